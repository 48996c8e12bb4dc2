//! Look-alike characters that word processors and phones put into text (curly quotes, dashes,
//! non-breaking spaces, the ellipsis…) and their GSM default-alphabet equivalents.
//!
//! Replacing them is opt-in: it changes what the recipient reads, so the analysis lists every
//! replacement it made, and makes them only when they lower the number of segments.

/// The GSM default-alphabet text that stands for `c`, if `c` is a known look-alike.
///
/// Every replacement is made of default-alphabet characters that are not in the extension table,
/// so a replacement never costs more than one septet per character it produces.
pub fn replacement(c: char) -> Option<&'static str> {
    Some(match c {
        // Quotation marks and apostrophes.
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' | '\u{2032}' | '\u{2035}'
        | '\u{02bc}' | '\u{ff07}' => "'",
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' | '\u{2033}' | '\u{2036}'
        | '\u{00ab}' | '\u{00bb}' | '\u{ff02}' => "\"",
        '\u{2039}' => "<",
        '\u{203a}' => ">",
        // Dashes and minus signs.
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' | '\u{fe58}' | '\u{fe63}' | '\u{ff0d}' => "-",
        // Spaces of other widths, and the soft hyphen's visible cousin is above.
        '\u{00a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => " ",
        // Punctuation.
        '\u{2026}' => "...",
        '\u{2022}' | '\u{00b7}' | '\u{2027}' => "-",
        '\u{ff01}' => "!",
        '\u{ff1f}' => "?",
        '\u{ff0c}' => ",",
        '\u{ff0e}' => ".",
        '\u{ff1a}' => ":",
        '\u{ff1b}' => ";",
        '\u{2044}' | '\u{2215}' => "/",
        // Letters the default alphabet has only in another case or without an accent that is
        // commonly dropped in SMS (ç → Ç is the standard's own fallback for 0x09).
        '\u{00e7}' => "Ç",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gsm;

    #[test]
    fn replacements_are_default_alphabet_without_extension() {
        for cp in 0..=0x10ffffu32 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            if let Some(r) = replacement(c) {
                for rc in r.chars() {
                    let m = gsm::lookup(rc);
                    assert_eq!(m.locking & 1, 1, "{c:?} -> {r:?}: {rc:?} is not basic GSM");
                }
                assert_eq!(gsm::lookup(c).locking & 1, 0, "{c:?} is already GSM");
            }
        }
    }

    #[test]
    fn common_look_alikes() {
        assert_eq!(replacement('’'), Some("'"));
        assert_eq!(replacement('“'), Some("\""));
        assert_eq!(replacement('—'), Some("-"));
        assert_eq!(replacement('\u{a0}'), Some(" "));
        assert_eq!(replacement('…'), Some("..."));
        assert_eq!(replacement('a'), None);
        assert_eq!(replacement('😀'), None);
    }
}

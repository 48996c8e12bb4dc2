//! The GSM 7-bit alphabets of 3GPP TS 23.038: the default alphabet (§6.2.1), its extension table
//! (§6.2.1.1) and the national language locking-shift (Annex A.3) and single-shift (Annex A.2)
//! tables of all thirteen national languages. The default and Latin tables are written here by
//! hand from the standard; the Indian ones are generated into `gsm/indic.rs`. Both are checked
//! against an independent transcription (`tests/tables.rs`).
//!
//! A table is written here in the standard's own order (septet value = index) so it can be read
//! against the specification. What the encoder needs is the other direction, "which tables hold
//! this character", which [`lookup`] answers from an index built once.

use std::sync::OnceLock;

mod indic;

/// The escape septet (0x1B): in a locking-shift table it announces that the next septet is read
/// from the single-shift table, so a single-shift character costs two septets.
pub const ESC: u8 = 0x1b;

/// A slot of a locking-shift table with no character (the escape slot, or a position the
/// standard leaves reserved). U+0000 is in no table, so it cannot collide.
const NONE: char = '\0';

/// A national language of TS 23.038 §6.2.1.2.4. The discriminant is the
/// national language identifier carried in the UDH information element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Language {
    Turkish = 1,
    Spanish = 2,
    Portuguese = 3,
    Bengali = 4,
    Gujarati = 5,
    Hindi = 6,
    Kannada = 7,
    Malayalam = 8,
    Oriya = 9,
    Punjabi = 10,
    Tamil = 11,
    Telugu = 12,
    Urdu = 13,
}

impl Language {
    /// Every language with at least one table, in identifier order.
    pub const ALL: [Language; 13] = [
        Language::Turkish,
        Language::Spanish,
        Language::Portuguese,
        Language::Bengali,
        Language::Gujarati,
        Language::Hindi,
        Language::Kannada,
        Language::Malayalam,
        Language::Oriya,
        Language::Punjabi,
        Language::Tamil,
        Language::Telugu,
        Language::Urdu,
    ];

    /// The national language identifier (the octet of IEI 0x24 / 0x25).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The language with this identifier, if it has a table here.
    pub fn from_id(id: u8) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.id() == id)
    }

    /// Lower-case English name, as accepted by [`std::str::FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            Language::Turkish => "turkish",
            Language::Spanish => "spanish",
            Language::Portuguese => "portuguese",
            Language::Bengali => "bengali",
            Language::Gujarati => "gujarati",
            Language::Hindi => "hindi",
            Language::Kannada => "kannada",
            Language::Malayalam => "malayalam",
            Language::Oriya => "oriya",
            Language::Punjabi => "punjabi",
            Language::Tamil => "tamil",
            Language::Telugu => "telugu",
            Language::Urdu => "urdu",
        }
    }

    /// Whether the standard defines a locking-shift table for this language (Spanish has only a
    /// single-shift table).
    pub fn has_locking_shift(self) -> bool {
        locking_table(self).is_some()
    }
}

impl std::str::FromStr for Language {
    type Err = UnknownLanguage;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownLanguage(s.to_owned()))
    }
}

/// A language name that has no table here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no GSM national language table for {0:?}")]
pub struct UnknownLanguage(pub String);

/// A set of tables: bit 0 is the default alphabet (or default extension table), bit `n` the
/// national language with identifier `n`.
pub type TableMask = u16;

/// Which locking-shift tables and which single-shift tables hold a character.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    pub locking: TableMask,
    pub single: TableMask,
}

/// §6.2.1: the default alphabet, septets 0x00..=0x7F.
#[rustfmt::skip]
const DEFAULT_LOCKING: [char; 128] = [
    '@',  '£',  '$',  '¥',  'è',  'é',  'ù',  'ì',  'ò',  'Ç',  '\n', 'Ø',  'ø',  '\r', 'Å',  'å',
    'Δ',  '_',  'Φ',  'Γ',  'Λ',  'Ω',  'Π',  'Ψ',  'Σ',  'Θ',  'Ξ',  NONE, 'Æ',  'æ',  'ß',  'É',
    ' ',  '!',  '"',  '#',  '¤',  '%',  '&',  '\'', '(',  ')',  '*',  '+',  ',',  '-',  '.',  '/',
    '0',  '1',  '2',  '3',  '4',  '5',  '6',  '7',  '8',  '9',  ':',  ';',  '<',  '=',  '>',  '?',
    '¡',  'A',  'B',  'C',  'D',  'E',  'F',  'G',  'H',  'I',  'J',  'K',  'L',  'M',  'N',  'O',
    'P',  'Q',  'R',  'S',  'T',  'U',  'V',  'W',  'X',  'Y',  'Z',  'Ä',  'Ö',  'Ñ',  'Ü',  '§',
    '¿',  'a',  'b',  'c',  'd',  'e',  'f',  'g',  'h',  'i',  'j',  'k',  'l',  'm',  'n',  'o',
    'p',  'q',  'r',  's',  't',  'u',  'v',  'w',  'x',  'y',  'z',  'ä',  'ö',  'ñ',  'ü',  'à',
];

/// §6.2.1.1: the default extension table (0x0A is FORM FEED; 0x0D and 0x1B are control codes,
/// not characters).
const DEFAULT_SINGLE: &[(u8, char)] = &[
    (0x0a, '\u{0c}'),
    (0x14, '^'),
    (0x28, '{'),
    (0x29, '}'),
    (0x2f, '\\'),
    (0x3c, '['),
    (0x3d, '~'),
    (0x3e, ']'),
    (0x40, '|'),
    (0x65, '€'),
];

/// A.3.1: Turkish locking shift.
#[rustfmt::skip]
const TURKISH_LOCKING: [char; 128] = [
    '@',  '£',  '$',  '¥',  '€',  'é',  'ù',  'ı',  'ò',  'Ç',  '\n', 'Ğ',  'ğ',  '\r', 'Å',  'å',
    'Δ',  '_',  'Φ',  'Γ',  'Λ',  'Ω',  'Π',  'Ψ',  'Σ',  'Θ',  'Ξ',  NONE, 'Ş',  'ş',  'ß',  'É',
    ' ',  '!',  '"',  '#',  '¤',  '%',  '&',  '\'', '(',  ')',  '*',  '+',  ',',  '-',  '.',  '/',
    '0',  '1',  '2',  '3',  '4',  '5',  '6',  '7',  '8',  '9',  ':',  ';',  '<',  '=',  '>',  '?',
    'İ',  'A',  'B',  'C',  'D',  'E',  'F',  'G',  'H',  'I',  'J',  'K',  'L',  'M',  'N',  'O',
    'P',  'Q',  'R',  'S',  'T',  'U',  'V',  'W',  'X',  'Y',  'Z',  'Ä',  'Ö',  'Ñ',  'Ü',  '§',
    'ç',  'a',  'b',  'c',  'd',  'e',  'f',  'g',  'h',  'i',  'j',  'k',  'l',  'm',  'n',  'o',
    'p',  'q',  'r',  's',  't',  'u',  'v',  'w',  'x',  'y',  'z',  'ä',  'ö',  'ñ',  'ü',  'à',
];

/// A.2.1: Turkish single shift.
const TURKISH_SINGLE: &[(u8, char)] = &[
    (0x0a, '\u{0c}'),
    (0x14, '^'),
    (0x28, '{'),
    (0x29, '}'),
    (0x2f, '\\'),
    (0x3c, '['),
    (0x3d, '~'),
    (0x3e, ']'),
    (0x40, '|'),
    (0x47, 'Ğ'),
    (0x49, 'İ'),
    (0x53, 'Ş'),
    (0x63, 'ç'),
    (0x65, '€'),
    (0x67, 'ğ'),
    (0x69, 'ı'),
    (0x73, 'ş'),
];

/// A.2.2: Spanish single shift (Spanish has no locking-shift table).
const SPANISH_SINGLE: &[(u8, char)] = &[
    (0x09, 'ç'),
    (0x0a, '\u{0c}'),
    (0x14, '^'),
    (0x28, '{'),
    (0x29, '}'),
    (0x2f, '\\'),
    (0x3c, '['),
    (0x3d, '~'),
    (0x3e, ']'),
    (0x40, '|'),
    (0x41, 'Á'),
    (0x49, 'Í'),
    (0x4f, 'Ó'),
    (0x55, 'Ú'),
    (0x61, 'á'),
    (0x65, '€'),
    (0x69, 'í'),
    (0x6f, 'ó'),
    (0x75, 'ú'),
];

/// A.3.3: Portuguese locking shift.
#[rustfmt::skip]
const PORTUGUESE_LOCKING: [char; 128] = [
    '@',  '£',  '$',  '¥',  'ê',  'é',  'ú',  'í',  'ó',  'ç',  '\n', 'Ô',  'ô',  '\r', 'Á',  'á',
    'Δ',  '_',  'ª',  'Ç',  'À',  '∞',  '^',  '\\', '€',  'Ó',  '|',  NONE, 'Â',  'â',  'Ê',  'É',
    ' ',  '!',  '"',  '#',  'º',  '%',  '&',  '\'', '(',  ')',  '*',  '+',  ',',  '-',  '.',  '/',
    '0',  '1',  '2',  '3',  '4',  '5',  '6',  '7',  '8',  '9',  ':',  ';',  '<',  '=',  '>',  '?',
    'Í',  'A',  'B',  'C',  'D',  'E',  'F',  'G',  'H',  'I',  'J',  'K',  'L',  'M',  'N',  'O',
    'P',  'Q',  'R',  'S',  'T',  'U',  'V',  'W',  'X',  'Y',  'Z',  'Ã',  'Õ',  'Ú',  'Ü',  '§',
    '~',  'a',  'b',  'c',  'd',  'e',  'f',  'g',  'h',  'i',  'j',  'k',  'l',  'm',  'n',  'o',
    'p',  'q',  'r',  's',  't',  'u',  'v',  'w',  'x',  'y',  'z',  'ã',  'õ',  '`',  'ü',  'à',
];

/// A.2.3: Portuguese single shift.
const PORTUGUESE_SINGLE: &[(u8, char)] = &[
    (0x05, 'ê'),
    (0x09, 'ç'),
    (0x0a, '\u{0c}'),
    (0x0b, 'Ô'),
    (0x0c, 'ô'),
    (0x0e, 'Á'),
    (0x0f, 'á'),
    (0x12, 'Φ'),
    (0x13, 'Γ'),
    (0x14, '^'),
    (0x15, 'Ω'),
    (0x16, 'Π'),
    (0x17, 'Ψ'),
    (0x18, 'Σ'),
    (0x19, 'Θ'),
    (0x1f, 'Ê'),
    (0x28, '{'),
    (0x29, '}'),
    (0x2f, '\\'),
    (0x3c, '['),
    (0x3d, '~'),
    (0x3e, ']'),
    (0x40, '|'),
    (0x41, 'À'),
    (0x49, 'Í'),
    (0x4f, 'Ó'),
    (0x55, 'Ú'),
    (0x5b, 'Ã'),
    (0x5c, 'Õ'),
    (0x61, 'Â'),
    (0x65, '€'),
    (0x69, 'í'),
    (0x6f, 'ó'),
    (0x75, 'ú'),
    (0x7b, 'ã'),
    (0x7c, 'õ'),
    (0x7f, 'â'),
];

/// The locking-shift table of a language, if the standard defines one.
pub fn locking_table(language: Language) -> Option<&'static [char; 128]> {
    match language {
        Language::Turkish => Some(&TURKISH_LOCKING),
        Language::Spanish => None,
        Language::Portuguese => Some(&PORTUGUESE_LOCKING),
        Language::Bengali => Some(&indic::BENGALI_LOCKING),
        Language::Gujarati => Some(&indic::GUJARATI_LOCKING),
        Language::Hindi => Some(&indic::HINDI_LOCKING),
        Language::Kannada => Some(&indic::KANNADA_LOCKING),
        Language::Malayalam => Some(&indic::MALAYALAM_LOCKING),
        Language::Oriya => Some(&indic::ORIYA_LOCKING),
        Language::Punjabi => Some(&indic::PUNJABI_LOCKING),
        Language::Tamil => Some(&indic::TAMIL_LOCKING),
        Language::Telugu => Some(&indic::TELUGU_LOCKING),
        Language::Urdu => Some(&indic::URDU_LOCKING),
    }
}

/// The single-shift table of a language.
pub fn single_table(language: Language) -> &'static [(u8, char)] {
    match language {
        Language::Turkish => TURKISH_SINGLE,
        Language::Spanish => SPANISH_SINGLE,
        Language::Portuguese => PORTUGUESE_SINGLE,
        Language::Bengali => indic::BENGALI_SINGLE,
        Language::Gujarati => indic::GUJARATI_SINGLE,
        Language::Hindi => indic::HINDI_SINGLE,
        Language::Kannada => indic::KANNADA_SINGLE,
        Language::Malayalam => indic::MALAYALAM_SINGLE,
        Language::Oriya => indic::ORIYA_SINGLE,
        Language::Punjabi => indic::PUNJABI_SINGLE,
        Language::Tamil => indic::TAMIL_SINGLE,
        Language::Telugu => indic::TELUGU_SINGLE,
        Language::Urdu => indic::URDU_SINGLE,
    }
}

/// The default alphabet and its extension table, for tests and callers that show septets.
pub fn default_tables() -> (&'static [char; 128], &'static [(u8, char)]) {
    (&DEFAULT_LOCKING, DEFAULT_SINGLE)
}

/// Reverse index: ASCII by direct lookup (most campaign text), everything else by binary search
/// over the few hundred characters that any table holds.
struct Index {
    ascii: [Membership; 128],
    other: Vec<(char, Membership)>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut all: Vec<(char, Membership)> = Vec::new();
        let mut add = |c: char, bit: TableMask, locking: bool| {
            if c == NONE {
                return;
            }
            let m = match all.iter_mut().find(|(k, _)| *k == c) {
                Some((_, m)) => m,
                None => {
                    all.push((c, Membership::default()));
                    &mut all.last_mut().expect("just pushed").1
                }
            };
            if locking {
                m.locking |= bit;
            } else {
                m.single |= bit;
            }
        };
        for &c in &DEFAULT_LOCKING {
            add(c, 1, true);
        }
        for &(_, c) in DEFAULT_SINGLE {
            add(c, 1, false);
        }
        for language in Language::ALL {
            let bit = 1 << language.id();
            if let Some(table) = locking_table(language) {
                for &c in table {
                    add(c, bit, true);
                }
            }
            for &(_, c) in single_table(language) {
                add(c, bit, false);
            }
        }
        let mut ascii = [Membership::default(); 128];
        all.retain(|&(c, m)| {
            if c.is_ascii() {
                ascii[c as usize] = m;
                false
            } else {
                true
            }
        });
        all.sort_unstable_by_key(|&(c, _)| c);
        Index { ascii, other: all }
    })
}

/// Which tables hold `c` (all bits clear: no GSM table, so the text needs UCS-2).
#[inline]
pub fn lookup(c: char) -> Membership {
    let index = index();
    if c.is_ascii() {
        return index.ascii[c as usize];
    }
    match index.other.binary_search_by_key(&c, |&(k, _)| k) {
        Ok(i) => index.other[i].1,
        Err(_) => Membership::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_alphabet_has_127_characters_and_the_extension_ten() {
        let (locking, single) = default_tables();
        assert_eq!(locking.iter().filter(|&&c| c != NONE).count(), 127);
        assert_eq!(single.len(), 10);
        let ext: String = single.iter().map(|&(_, c)| c).collect();
        assert_eq!(ext, "\u{c}^{}\\[~]|€");
    }

    #[test]
    fn lookup_finds_default_and_extension_characters() {
        assert_eq!(lookup('A').locking & 1, 1);
        assert_eq!(lookup('A').single & 1, 0);
        assert_eq!(lookup('€').locking & 1, 0);
        assert_eq!(lookup('€').single & 1, 1);
        assert_eq!(lookup('Δ').locking & 1, 1);
        assert_eq!(
            lookup('`'),
            Membership {
                locking: 1 << Language::Portuguese.id(),
                single: 0
            }
        );
        assert_eq!(
            lookup('ç').locking & 1,
            0,
            "0x09 is capital Ç in the default alphabet"
        );
        assert_eq!(
            lookup('\u{1b}'),
            Membership::default(),
            "escape is no character"
        );
        assert_eq!(lookup('😀'), Membership::default());
    }

    #[test]
    fn national_tables_are_indexed_under_their_identifier() {
        let m = lookup('ş');
        assert_ne!(m.locking & (1 << Language::Turkish.id()), 0);
        assert_ne!(m.single & (1 << Language::Turkish.id()), 0);
        assert_eq!(m.locking & 1, 0);
        let m = lookup('á');
        assert_ne!(m.single & (1 << Language::Spanish.id()), 0);
        assert_ne!(m.locking & (1 << Language::Portuguese.id()), 0);
    }

    #[test]
    fn latin_tables_hold_each_character_once() {
        // (The Indian tables repeat a few characters, as the standard does: see `indic`.)
        let mut tables: Vec<Vec<char>> = vec![DEFAULT_LOCKING.to_vec()];
        tables.push(DEFAULT_SINGLE.iter().map(|&(_, c)| c).collect());
        for l in [Language::Turkish, Language::Spanish, Language::Portuguese] {
            if let Some(t) = locking_table(l) {
                tables.push(t.to_vec());
            }
            tables.push(single_table(l).iter().map(|&(_, c)| c).collect());
        }
        for t in tables {
            let mut seen: Vec<char> = t.into_iter().filter(|&c| c != NONE).collect();
            let n = seen.len();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), n);
        }
    }

    #[test]
    fn language_names_round_trip() {
        for l in Language::ALL {
            assert_eq!(l.name().parse::<Language>().unwrap(), l);
            assert_eq!(Language::from_id(l.id()), Some(l));
        }
        assert!("klingon".parse::<Language>().is_err());
        assert!(!Language::Spanish.has_locking_shift());
    }
}

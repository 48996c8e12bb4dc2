//! Punctuation that phone apps and texts glue to the end of a link: `https://go.example/abc1234.`
//! taken whole by an auto-linker, or a Chinese sentence's `。` right after the URL. No code ends in
//! one of these characters, so a path that is not a code but ends in a run of them is answered as
//! the code without the run. The one table and the one strip rule the module (on the raw URI) and
//! the sidecar's fallback (on the code nginx passes it) both apply, so the two agree.
//!
//! `+` is not stripped: in a path it is a plus, not a space (only a form's query spells a space
//! so), and no SMS app glues one to a link.

/// Characters that cannot end a code, as text glues them to a link: ASCII sentence and closing
/// punctuation, their full-width and CJK forms, closing quotes, and spaces (`%20`, a no-break
/// space, the ideographic space). `.` is here although imported codes may contain it: the caller
/// looks up the exact code first wherever one could end in `.` (see [`strip`]).
#[rustfmt::skip]
pub const TRAILING: [char; 40] = [
    // ASCII
    '.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"', ' ',
    // Spaces an encoder may write
    '\u{00A0}', '\u{3000}',
    // CJK punctuation
    '。', '、', '」', '』', '】', '〉', '》', '〕', '〗',
    // Full-width forms
    '，', '．', '；', '：', '！', '？', '）', '］', '｝', '＂', '＇',
    // Half-width CJK forms
    '｡', '､', '｣',
    // Quotes and the ellipsis
    '’', '”', '…',
];

/// `path` without its trailing run of [`TRAILING`] characters, each raw (UTF-8) or
/// percent-encoded (either hex case, `%E3%80%82` for `。`); `None` when `path` does not end in
/// one. The result may be empty, or still not a code: the caller checks it as any path.
///
/// Only whole characters are stripped: an invalid or cut escape (`%E3%80`, `%2`, `%G0`) stops the
/// run, and so does a character that is not in the table. The exact path is the caller's first
/// try wherever it could be a code itself (an imported code `promo.`): an exact match always wins.
pub fn strip(path: &[u8]) -> Option<&[u8]> {
    let mut end = path.len();
    while let Some(len) = trailing_char_len(&path[..end]) {
        end -= len;
    }
    (end < path.len()).then(|| &path[..end])
}

/// The length in bytes of the [`TRAILING`] character that `bytes` ends with, raw or escaped.
fn trailing_char_len(bytes: &[u8]) -> Option<usize> {
    let &last = bytes.last()?;
    // The common 404 (`/favicon.ico`, a scanner's path) ends in a letter or digit, which ends a
    // character of the table only as an escape's last hex digit: no walk through the table.
    let escape_at = bytes.len().checked_sub(3).map(|at| bytes[at]);
    if last.is_ascii_alphanumeric() && escape_at != Some(b'%') {
        return None;
    }
    let mut utf8 = [0; 4];
    TRAILING.iter().find_map(|c| {
        let raw = c.encode_utf8(&mut utf8).as_bytes();
        if bytes.ends_with(raw) {
            return Some(raw.len());
        }
        let escaped = raw.len() * 3;
        let at = bytes.len().checked_sub(escaped)?;
        is_escaped(&bytes[at..], raw).then_some(escaped)
    })
}

/// Whether `escaped` is `raw` with every byte written `%XX` (upper or lower case hex).
fn is_escaped(escaped: &[u8], raw: &[u8]) -> bool {
    escaped.chunks_exact(3).zip(raw).all(|(triplet, &byte)| {
        triplet[0] == b'%'
            && hex_value(triplet[1]) == Some(byte >> 4)
            && hex_value(triplet[2]) == Some(byte & 0x0F)
    })
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(c: char, upper: bool) -> String {
        let mut utf8 = [0; 4];
        c.encode_utf8(&mut utf8)
            .bytes()
            .map(|b| match upper {
                true => format!("%{b:02X}"),
                false => format!("%{b:02x}"),
            })
            .collect()
    }

    fn stripped(path: &str) -> Option<&str> {
        strip(path.as_bytes()).map(|rest| std::str::from_utf8(rest).unwrap())
    }

    #[test]
    fn every_character_is_stripped_raw_and_escaped_in_either_case() {
        // The issue's own list, so that the table can only grow.
        let listed = ".,;:!?)]}'\"。，、！？）】」』’”";
        for c in listed.chars() {
            assert!(TRAILING.contains(&c), "{c}");
        }
        for c in TRAILING {
            for form in [c.to_string(), escaped(c, true), escaped(c, false)] {
                let path = format!("/abc1234{form}");
                assert_eq!(stripped(&path), Some("/abc1234"), "{path}");
            }
        }
    }

    #[test]
    fn an_encoded_space_is_stripped_and_a_plus_is_not() {
        assert_eq!(stripped("/abc%20"), Some("/abc"));
        assert_eq!(stripped("/abc%C2%A0"), Some("/abc"));
        assert_eq!(stripped("/abc+"), None);
        assert_eq!(stripped("/abc+."), Some("/abc+"));
    }

    #[test]
    fn the_whole_trailing_run_goes() {
        assert_eq!(stripped("/abc,)"), Some("/abc"));
        assert_eq!(stripped("/abc...!!"), Some("/abc"));
        assert_eq!(stripped("/abc%E3%80%82%E2%80%9D"), Some("/abc"));
        assert_eq!(stripped("/abc)%e3%80%82."), Some("/abc"));
        assert_eq!(stripped("/abc。」"), Some("/abc"));
        // Only the tail: punctuation inside the path stays.
        assert_eq!(stripped("/a.b.c."), Some("/a.b.c"));
        assert_eq!(stripped("/a,b"), None);
    }

    #[test]
    fn a_path_that_ends_otherwise_is_left_alone() {
        for path in [
            "/abc1234", "/abc-", "/abc_", "/abc~", "/", "", "/abc%41", "/abc/",
        ] {
            assert_eq!(stripped(path), None, "{path}");
        }
    }

    #[test]
    fn punctuation_alone_strips_to_the_path_before_it() {
        assert_eq!(stripped("/."), Some("/"));
        assert_eq!(stripped("/%E3%80%82"), Some("/"));
        assert_eq!(stripped(".,!"), Some(""));
        assert_eq!(stripped("%2e%2C"), Some(""));
    }

    #[test]
    fn invalid_escapes_stop_the_run() {
        for path in [
            "/abc%E3%80",
            "/abc%2",
            "/abc%",
            "/abc%G0",
            "/abc%2G",
            "/abc%%2E2E",
        ] {
            assert_eq!(stripped(path), None, "{path}");
        }
        // A cut escape before a whole one: only the whole one goes.
        assert_eq!(stripped("/abc%E3%80%2E"), Some("/abc%E3%80"));
        // A lone UTF-8 continuation byte is no character of the table.
        assert_eq!(strip(b"/abc\x82"), None);
        assert_eq!(strip(b"/abc\x80\x82."), Some(&b"/abc\x80\x82"[..]));
    }
}

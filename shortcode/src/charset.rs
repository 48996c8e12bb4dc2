//! Which bytes a custom alias may hold, and how long it may be: read by the scheme when it sorts a
//! path into a kind of code, and by the alias rules when a caller asks for one.

pub const ALIAS_MIN_LEN: usize = 3;
pub const ALIAS_MAX_LEN: usize = 64;
/// An alias's charset and length as a regular expression (unanchored: an HTML form's `pattern`
/// matches the whole value; a JSON Schema anchors it). The shape check is [`is_alias_charset`].
pub const ALIAS_PATTERN: &str = "[A-Za-z0-9_-]{3,64}";

pub(crate) fn is_alias_charset(code: &[u8]) -> bool {
    (ALIAS_MIN_LEN..=ALIAS_MAX_LEN).contains(&code.len()) && code.iter().all(|&c| is_alias_byte(c))
}

pub(crate) fn is_alias_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_says_the_lengths() {
        assert_eq!(
            ALIAS_PATTERN,
            format!("[A-Za-z0-9_-]{{{ALIAS_MIN_LEN},{ALIAS_MAX_LEN}}}")
        );
        for byte in 0..=u8::MAX {
            let in_class = byte.is_ascii_alphanumeric() || b"_-".contains(&byte);
            assert_eq!(is_alias_byte(byte), in_class, "{byte}");
        }
    }
}

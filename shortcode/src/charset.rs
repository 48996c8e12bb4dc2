//! Which bytes a custom alias may hold, and how long it may be: read by the scheme when it sorts a
//! path into a kind of code, and by the alias rules when a caller asks for one.

pub const ALIAS_MIN_LEN: usize = 3;
pub const ALIAS_MAX_LEN: usize = 64;

pub(crate) fn is_alias_charset(code: &[u8]) -> bool {
    (ALIAS_MIN_LEN..=ALIAS_MAX_LEN).contains(&code.len()) && code.iter().all(|&c| is_alias_byte(c))
}

pub(crate) fn is_alias_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

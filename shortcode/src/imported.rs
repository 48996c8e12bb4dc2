//! Codes imported from another shortener (YOURLS, Shlink, Kutt, Bitly, a CSV): kept exactly as
//! they were sent, so they follow the old system's rules rather than ours. They may be shorter
//! than an alias, use `.` and `~`, or have the generated shape (a Bitly code often does); the
//! sidecar decides what a clash with its own code space means, and the module looks them up only
//! where a location says its domain carries imported codes.

use std::fmt;

pub const IMPORTED_MIN_LEN: usize = 1;
pub const IMPORTED_MAX_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportedCodeError {
    Length { len: usize },
    Charset { position: usize },
}

impl fmt::Display for ImportedCodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportedCodeError::Length { len } => write!(
                f,
                "imported code is {len} characters; it must be {IMPORTED_MIN_LEN} to {IMPORTED_MAX_LEN}"
            ),
            ImportedCodeError::Charset { position } => write!(
                f,
                "imported code character {position} is not one of A-Z a-z 0-9 - . _ ~"
            ),
        }
    }
}

impl std::error::Error for ImportedCodeError {}

/// RFC 3986's unreserved characters: the only ones a path segment carries without escaping, so
/// the raw URI the module reads holds the code byte for byte.
fn is_imported_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
}

/// Whether raw URI bytes could be an imported code (no lookup, no scheme).
pub fn is_imported_charset(code: &[u8]) -> bool {
    (IMPORTED_MIN_LEN..=IMPORTED_MAX_LEN).contains(&code.len())
        && code.iter().all(|&c| is_imported_byte(c))
}

/// Checks that `code`, taken from another shortener, can be stored and answered as it is.
pub fn parse_imported(code: &str) -> Result<(), ImportedCodeError> {
    let len = code.chars().count();
    if !(IMPORTED_MIN_LEN..=IMPORTED_MAX_LEN).contains(&len) {
        return Err(ImportedCodeError::Length { len });
    }
    if let Some(position) = code
        .chars()
        .position(|c| !c.is_ascii() || !is_imported_byte(c as u8))
    {
        return Err(ImportedCodeError::Charset {
            position: position + 1,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_shorteners_codes_are_kept() {
        for code in ["1", "Zz", "abc.def", "~promo", "a-b_c", "AbCdEfG"] {
            assert_eq!(parse_imported(code), Ok(()), "{code}");
            assert!(is_imported_charset(code.as_bytes()), "{code}");
        }
    }

    #[test]
    fn codes_a_path_cannot_carry_raw_are_refused() {
        assert_eq!(
            parse_imported(""),
            Err(ImportedCodeError::Length { len: 0 })
        );
        assert_eq!(
            parse_imported(&"a".repeat(65)),
            Err(ImportedCodeError::Length { len: 65 })
        );
        for (code, position) in [("a/b", 2), ("a%20", 2), ("é", 1), ("a b", 2), ("x?", 2)] {
            assert_eq!(
                parse_imported(code),
                Err(ImportedCodeError::Charset { position }),
                "{code}"
            );
            assert!(!is_imported_charset(code.as_bytes()), "{code}");
        }
    }
}

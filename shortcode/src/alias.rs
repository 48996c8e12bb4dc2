//! Custom aliases: vanity codes chosen by the caller.

use crate::charset::{is_alias_byte, ALIAS_MAX_LEN, ALIAS_MIN_LEN};
use crate::CodeScheme;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AliasError {
    Length {
        len: usize,
    },
    Charset {
        position: usize,
    },
    /// Exactly the shape of a generated code: refused so no alias can ever take a code the sequence
    /// will reach later.
    ReservedShape {
        code_len: usize,
    },
}

impl fmt::Display for AliasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AliasError::Length { len } => write!(
                f,
                "alias is {len} characters; it must be {ALIAS_MIN_LEN} to {ALIAS_MAX_LEN}"
            ),
            AliasError::Charset { position } => write!(
                f,
                "alias character {position} is not one of A-Z a-z 0-9 _ -"
            ),
            AliasError::ReservedShape { code_len } => write!(
                f,
                "aliases of exactly {code_len} letters and digits are reserved for generated codes; \
                 add '-' or '_' or change the length"
            ),
        }
    }
}

impl std::error::Error for AliasError {}

/// Checks that `alias` may be used as a custom code under `scheme`.
pub fn parse_alias(scheme: &CodeScheme, alias: &str) -> Result<(), AliasError> {
    let bytes = alias.as_bytes();
    // Count characters, not bytes, so a multi-byte character reports a sensible length.
    let len = alias.chars().count();
    if !(ALIAS_MIN_LEN..=ALIAS_MAX_LEN).contains(&len) {
        return Err(AliasError::Length { len });
    }
    if let Some(position) = alias
        .chars()
        .position(|c| !c.is_ascii() || !is_alias_byte(c as u8))
    {
        return Err(AliasError::Charset {
            position: position + 1,
        });
    }
    if scheme.has_generated_shape(bytes) {
        return Err(AliasError::ReservedShape {
            code_len: scheme.code_len(),
        });
    }
    Ok(())
}

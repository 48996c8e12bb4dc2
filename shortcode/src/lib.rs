//! The shortlink code scheme, shared by the sidecar (which issues codes) and the nginx module
//! (which rejects impossible codes before asking Redis).
//!
//! A generated code is `body ++ check`:
//! - `body` is `L` base62 digits (default 6) of `permute(sequence)`, where `permute` is a keyed
//!   permutation of `0..62^L`. Sequence numbers are unique, so codes are unique by construction;
//!   consecutive numbers give unrelated-looking codes, and without the secret nobody can go from one
//!   code to its neighbours.
//! - `check` is one base62 digit of a keyed hash of the body. A random probe of the generated shape
//!   passes with probability 1/62, so the redirect path rejects 61 of 62 probes without a lookup.
//!
//! Custom aliases are `[A-Za-z0-9_-]{3,64}` that do **not** have the generated shape (exactly
//! `L + 1` base62 characters), so an alias can never take a code the sequence will reach later.
//!
//! Imported codes (another shortener's, kept exactly) are `[A-Za-z0-9._~-]{1,64}` of any shape.
//!
//! This crate does no I/O and allocates only to return an encoded code.

mod alias;
mod charset;
mod feistel;
mod imported;
mod scheme;
mod sip;

pub use alias::{parse_alias, AliasError};
pub use charset::{ALIAS_MAX_LEN, ALIAS_MIN_LEN, ALIAS_PATTERN};
pub use imported::{
    is_imported_charset, parse_imported, ImportedCodeError, IMPORTED_MAX_LEN, IMPORTED_MIN_LEN,
};
pub use scheme::{
    fingerprint_difference, parse_hex_secret, CodeScheme, SchemeError, Shape, ALPHABET,
    DEFAULT_BODY_LEN, MAX_BODY_LEN, MIN_BODY_LEN, MIN_SECRET_LEN, SCHEME_VERSION,
};

#[cfg(test)]
mod tests;

//! The scheme itself: a keyed permutation of sequence numbers into base62 bodies, a keyed check
//! character, and the sorting of any path into the kind of code it can be.

use crate::charset::is_alias_charset;
use crate::feistel::Feistel;
use crate::sip::Sip24;
use sha2::{Digest, Sha256};
use std::fmt;

/// Base62 digits in ascending order: code bodies are big-endian numbers in this alphabet.
pub const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Whether a byte is a base62 digit, by table: every request of a code's length asks it of each
/// byte, and a load per byte is half the instructions of `is_ascii_alphanumeric`'s ranges.
static BASE62: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = true;
        i += 1;
    }
    table
};

/// Body lengths the scheme supports: 62^10 is the largest power of 62 below 2^64.
pub const MIN_BODY_LEN: u8 = 4;
pub const MAX_BODY_LEN: u8 = 10;
pub const DEFAULT_BODY_LEN: u8 = 6;

/// The shortest secret accepted, in bytes: 128 bits of key material.
pub const MIN_SECRET_LEN: usize = 16;

/// What a candidate code looks like, decided without any lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Generated shape with a correct check character (or checks disabled): worth a lookup.
    Generated,
    /// Generated shape whose check character is wrong: certainly unknown.
    BadCheck,
    /// A well-formed custom alias: worth a lookup.
    Alias,
    /// Neither: certainly unknown.
    Invalid,
}

impl Shape {
    /// Whether a code of this shape may exist and so deserves a lookup.
    pub fn may_exist(self) -> bool {
        matches!(self, Shape::Generated | Shape::Alias)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeError {
    SecretTooShort { len: usize },
    BodyLength { len: u8 },
    SequenceExhausted { sequence: u64, capacity: u64 },
}

impl fmt::Display for SchemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemeError::SecretTooShort { len } => write!(
                f,
                "code secret is {len} bytes; at least {MIN_SECRET_LEN} are required"
            ),
            SchemeError::BodyLength { len } => write!(
                f,
                "code length {len} is outside {MIN_BODY_LEN}..={MAX_BODY_LEN}"
            ),
            SchemeError::SequenceExhausted { sequence, capacity } => write!(
                f,
                "sequence number {sequence} is beyond the {capacity} codes of this length"
            ),
        }
    }
}

impl std::error::Error for SchemeError {}

/// A configured code scheme. Cheap to clone; build it once at start-up.
#[derive(Clone)]
pub struct CodeScheme {
    body_len: u8,
    check: bool,
    permutation: Feistel,
    check_key: Sip24,
    fingerprint: String,
}

impl fmt::Debug for CodeScheme {
    // Keys stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeScheme")
            .field("body_len", &self.body_len)
            .field("check", &self.check)
            .finish_non_exhaustive()
    }
}

impl CodeScheme {
    /// `secret` is the deployment's code secret (raw bytes, at least 16); the sidecar and every nginx
    /// module instance must share it, together with `body_len` and `check`.
    pub fn new(secret: &[u8], body_len: u8, check: bool) -> Result<Self, SchemeError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(SchemeError::SecretTooShort { len: secret.len() });
        }
        if !(MIN_BODY_LEN..=MAX_BODY_LEN).contains(&body_len) {
            return Err(SchemeError::BodyLength { len: body_len });
        }
        let capacity = 62u64.pow(u32::from(body_len));
        Ok(Self {
            body_len,
            check,
            permutation: Feistel::new(derive_key(secret, b"permutation"), capacity),
            check_key: Sip24::new(&derive_key(secret, b"check")),
            fingerprint: fingerprint(secret, body_len, check),
        })
    }

    /// What every code of this scheme depends on, safe to store and publish:
    /// `v1-L<body_len>-c<0|1>-<16 hex digits>`. The parameters are in clear so a mismatch can say
    /// which one differs; the hex part is a domain-separated hash of the secret (never the secret,
    /// never a key the scheme uses). See [`fingerprint_difference`].
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn body_len(&self) -> u8 {
        self.body_len
    }

    pub fn has_check(&self) -> bool {
        self.check
    }

    /// Length of every generated code.
    pub fn code_len(&self) -> usize {
        usize::from(self.body_len) + usize::from(self.check)
    }

    /// How many codes the scheme can issue: `62^body_len`.
    pub fn capacity(&self) -> u64 {
        self.permutation.domain()
    }

    /// The code for sequence number `sequence`.
    pub fn encode(&self, sequence: u64) -> Result<String, SchemeError> {
        if sequence >= self.capacity() {
            return Err(SchemeError::SequenceExhausted {
                sequence,
                capacity: self.capacity(),
            });
        }
        let mut value = self.permutation.permute(sequence);
        let mut code = vec![0u8; self.code_len()];
        let body = &mut code[..usize::from(self.body_len)];
        for digit in body.iter_mut().rev() {
            *digit = ALPHABET[(value % 62) as usize];
            value /= 62;
        }
        if self.check {
            let check = self.check_char(body);
            code[usize::from(self.body_len)] = check;
        }
        // Every byte comes from ALPHABET, which is ASCII.
        Ok(code.into_iter().map(char::from).collect())
    }

    /// The sequence number behind a generated code, or `None` if `code` is not one.
    pub fn decode(&self, code: &str) -> Option<u64> {
        if self.shape(code.as_bytes()) != Shape::Generated {
            return None;
        }
        let body = &code.as_bytes()[..usize::from(self.body_len)];
        let value = body
            .iter()
            .try_fold(0u64, |acc, &c| Some(acc * 62 + u64::from(digit_value(c)?)))?;
        Some(self.permutation.unpermute(value))
    }

    /// Classifies a candidate code (raw bytes from a URI) without any lookup.
    pub fn shape(&self, code: &[u8]) -> Shape {
        if self.has_generated_shape(code) {
            let body_len = usize::from(self.body_len);
            if !self.check || self.check_char(&code[..body_len]) == code[body_len] {
                Shape::Generated
            } else {
                Shape::BadCheck
            }
        } else if is_alias_charset(code) {
            Shape::Alias
        } else {
            Shape::Invalid
        }
    }

    /// Exactly `code_len()` base62 characters: the namespace reserved for generated codes.
    pub fn has_generated_shape(&self, code: &[u8]) -> bool {
        code.len() == self.code_len() && code.iter().all(|&b| BASE62[usize::from(b)])
    }

    fn check_char(&self, body: &[u8]) -> u8 {
        ALPHABET[(self.check_key.hash(body) % 62) as usize]
    }
}

fn digit_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'Z' => Some(c - b'A' + 10),
        b'a'..=b'z' => Some(c - b'a' + 36),
        _ => None,
    }
}

/// Independent 128-bit keys per purpose, so no output of one use reveals anything about another.
fn derive_key(secret: &[u8], purpose: &[u8]) -> [u8; 16] {
    let digest = Sha256::new()
        .chain_update(b"shortlink/v1/")
        .chain_update(purpose)
        .chain_update([0u8])
        .chain_update(secret)
        .finalize();
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Version of the code scheme in fingerprints: bumped if encoding or checking ever changes.
pub const SCHEME_VERSION: &str = "v1";

fn fingerprint(secret: &[u8], body_len: u8, check: bool) -> String {
    let digest = Sha256::new()
        .chain_update(b"shortlink/v1/fingerprint")
        .chain_update([0u8])
        .chain_update(secret)
        .finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{SCHEME_VERSION}-L{body_len}-c{}-{hex}", u8::from(check))
}

/// Which parts of two fingerprints differ, for an error message: e.g. `"code secret"`,
/// `"code length (6 / 7)"`. Empty if they are equal.
pub fn fingerprint_difference(expected: &str, found: &str) -> Vec<String> {
    let parts = |text: &str| -> [String; 4] {
        let mut it = text.splitn(4, '-').map(str::to_owned);
        std::array::from_fn(|_| it.next().unwrap_or_default())
    };
    let (a, b) = (parts(expected), parts(found));
    let names = [
        "scheme version",
        "code length",
        "check character",
        "code secret",
    ];
    (0..4)
        .filter(|&i| a[i] != b[i])
        .map(|i| match i {
            3 => names[i].to_owned(),
            _ => format!("{} ({} / {})", names[i], a[i], b[i]),
        })
        .collect()
}

/// Parses a secret written as hexadecimal (the form used in config files and the environment).
pub fn parse_hex_secret(text: &str) -> Result<Vec<u8>, SchemeError> {
    let text = text.trim();
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect();
    match bytes {
        Some(bytes) if bytes.len() >= MIN_SECRET_LEN => Ok(bytes),
        Some(bytes) => Err(SchemeError::SecretTooShort { len: bytes.len() }),
        None => Err(SchemeError::SecretTooShort { len: 0 }),
    }
}

#[cfg(test)]
mod table_tests {
    #[test]
    fn the_base62_table_is_ascii_alphanumeric() {
        for b in 0..=255u8 {
            assert_eq!(
                crate::scheme::BASE62[usize::from(b)],
                b.is_ascii_alphanumeric(),
                "{b}"
            );
        }
    }
}

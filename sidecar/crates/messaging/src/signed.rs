//! The signature a send job puts in each message's `dlr-url` (issue 77): `sig=` binds the report
//! to the one message the job handed over (its job, `mid`, link code and short URL's host), so a
//! job's callback URL that leaks (a Kannel log, a proxy) reports on its own messages only, and
//! the short domain a report counts on is the one the job sent, never a host a caller writes.
//!
//! The key is derived from the code secret the sidecar reads already (every sidecar of an
//! installation shares it): HMAC-SHA256(code secret, "shortlink dlr v1"). The signature is that
//! key's HMAC-SHA256 over the four fields, each length-prefixed (no two tuples sign alike),
//! truncated to 128 bits, base64url without padding (22 characters).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Bytes of the signature kept: 128 bits.
const SIGNATURE_BYTES: usize = 16;

/// What the key is for: another use of the code secret never yields the same key.
const PURPOSE: &[u8] = b"shortlink dlr v1";

/// The key of the `dlr-url` signatures.
#[derive(Clone)]
pub struct DlrKey([u8; 32]);

impl std::fmt::Debug for DlrKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DlrKey(…)")
    }
}

/// The message a signature is about.
#[derive(Debug, Clone, Copy)]
pub struct SignedMessage<'a> {
    /// The send job's id (`snd_…`).
    pub job: &'a str,
    pub message_id: &'a str,
    pub code: &'a str,
    /// The short URL's host, lower-case (empty when the `dlr-url` names the code alone).
    pub host: &'a str,
}

impl DlrKey {
    /// The key derived from the code secret's bytes.
    pub fn derive(code_secret: &[u8]) -> Self {
        DlrKey(shortlink_core::signing::derive_key(code_secret, PURPOSE))
    }

    fn mac(&self, message: SignedMessage<'_>) -> [u8; SIGNATURE_BYTES] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        for field in [message.job, message.message_id, message.code, message.host] {
            let len = u32::try_from(field.len()).unwrap_or(u32::MAX);
            mac.update(&len.to_be_bytes());
            mac.update(field.as_bytes());
        }
        let full = mac.finalize().into_bytes();
        let mut out = [0; SIGNATURE_BYTES];
        out.copy_from_slice(&full[..SIGNATURE_BYTES]);
        out
    }

    /// The `sig=` value of `message`.
    pub fn sign(&self, message: SignedMessage<'_>) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(message))
    }

    /// Whether `presented` is `message`'s signature (compared in constant time).
    pub fn verify(&self, message: SignedMessage<'_>, presented: &str) -> bool {
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(presented.trim()) else {
            return false;
        };
        bytes.len() == SIGNATURE_BYTES && bool::from(bytes.ct_eq(&self.mac(message)))
    }
}

/// The `sig=` of message `message_id` of job `job`, carrying link `code` as `short_url` (its
/// host as the callback reads it back) or alone.
pub fn job_signature(
    key: &DlrKey,
    job: &str,
    message_id: &str,
    code: &str,
    short_url: Option<&str>,
) -> String {
    let host = (short_url.and_then(|url| url::Url::parse(url).ok()))
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default();
    key.sign(SignedMessage {
        job,
        message_id,
        code,
        host: &host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_for_its_message_only() {
        let key = DlrKey::derive(&[7; 16]);
        let message = SignedMessage {
            job: "snd_1",
            message_id: "snd_1-4",
            code: "Ab1",
            host: "a1.example",
        };
        let sig = key.sign(message);
        assert_eq!(sig.len(), 22);
        assert!(key.verify(message, &sig));
        for other in [
            SignedMessage {
                job: "snd_2",
                ..message
            },
            SignedMessage {
                message_id: "snd_1-5",
                ..message
            },
            SignedMessage {
                code: "Ab2",
                ..message
            },
            SignedMessage {
                host: "a2.example",
                ..message
            },
            // The fields' bounds are signed: no shift from one field to the next.
            SignedMessage {
                message_id: "snd_1-4A",
                code: "b1",
                ..message
            },
        ] {
            assert!(!key.verify(other, &sig), "{other:?}");
        }
        assert!(!DlrKey::derive(&[8; 16]).verify(message, &sig));
        assert!(!key.verify(message, "not base64!"));
        assert!(!key.verify(message, &sig[..20]));
    }
}

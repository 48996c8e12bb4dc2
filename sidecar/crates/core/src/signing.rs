//! How the sidecar signs what it POSTs to other systems (the domain health webhook, click
//! webhooks): one header, `X-Shortlink-Signature: t=<unix seconds>,sha256=<hex>`, the HMAC-SHA256
//! with the shared secret of `<t>.<body>`. The time is signed so that a receiver can refuse a
//! replayed request (a captured POST sent again later); the receiver compares the HMAC in
//! constant time and the time against its clock (docs/WEBHOOKS.md shows the few lines).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header's name.
pub const HEADER: &str = "X-Shortlink-Signature";

/// The header's value for `body` sent at `unix_seconds`.
pub fn signature(secret: &[u8], unix_seconds: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let hex = shortlink_model::validate::hex(&mac.finalize().into_bytes());
    format!("t={unix_seconds},sha256={hex}")
}

/// The time `header` signs `body` at, when it is a valid signature of it with `secret` (the HMAC
/// compared in constant time). What a receiver does, here for the sidecar's own tests.
pub fn verify(secret: &[u8], header: &str, body: &[u8]) -> Option<i64> {
    let (time, hex) = header.strip_prefix("t=")?.split_once(",sha256=")?;
    let unix_seconds: i64 = time.parse().ok()?;
    let expected = signature(secret, unix_seconds, body);
    let given = format!("t={time},sha256={hex}");
    use subtle::ConstantTimeEq;
    bool::from(expected.as_bytes().ct_eq(given.as_bytes())).then_some(unix_seconds)
}

/// A key of its own for `purpose` from a deployment's `secret` (HMAC-SHA256 of the purpose):
/// each use of one secret (the code secret seals callback secrets and signs `dlr-url`s) gets
/// another key, and none reveals the secret or another use's key.
pub fn derive_key(secret: &[u8], purpose: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(purpose);
    mac.finalize().into_bytes().into()
}

/// What SQL keeps of a bearer secret (an API key, a callback token): SHA-256, lower-case hex.
/// A stolen database then presents no secret that works.
pub fn secret_hash(secret: &str) -> String {
    use sha2::Digest;
    shortlink_model::validate::hex(&Sha256::digest(secret.as_bytes()))
}

/// The header's value for `body` sent now.
pub fn signature_now(secret: &[u8], body: &[u8]) -> String {
    signature(secret, chrono::Utc::now().timestamp(), body)
}

#[cfg(test)]
mod tests {
    #[test]
    fn signs_the_time_and_the_body() {
        // HMAC-SHA256("Jefe", "1700000000.what do ya want for nothing?"), computed with
        // `printf '1700000000.what do ya want for nothing?' | openssl dgst -sha256 -hmac Jefe`.
        assert_eq!(
            super::signature(b"Jefe", 1_700_000_000, b"what do ya want for nothing?"),
            "t=1700000000,sha256=1cdd0650c8be1cb0974b1788d458b1e781206cfef59b85faafc582d2e182c57e"
        );
        let header = super::signature(b"k", 5, b"{}");
        assert_eq!(super::verify(b"k", &header, b"{}"), Some(5));
        assert_eq!(super::verify(b"k", &header, b"{ }"), None);
        assert_eq!(super::verify(b"x", &header, b"{}"), None);
        assert_eq!(
            super::verify(b"k", &header.replace("t=5", "t=6"), b"{}"),
            None
        );
    }
}

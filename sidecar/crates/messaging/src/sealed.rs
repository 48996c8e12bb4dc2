//! Gateway secrets kept in SQL sealed (issue 77): a Twilio callback token's auth token is
//! encrypted with a key derived from the code secret, which the operator keeps apart from the
//! database (`--code-secret-file`): a stolen backup without it opens nothing.
//!
//! The key is HMAC-SHA256(code secret, "shortlink callback secrets v1"); each value is sealed with
//! ChaCha20-Poly1305 under a random nonce, the workspace's id and the token's id as associated
//! data (a row copied into another workspace, or onto another token, does not open), and stored
//! as `v1:` + base64(nonce ‖ ciphertext ‖ tag). A value without the prefix is a row written
//! before sealing (plain text): read as such, and sealed by the start-up pass ([`reseal`]).

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::CallbackTokenStore;

/// What a sealed value starts with.
const VERSION: &str = "v1:";
/// What the key is derived for: another use of the code secret derives another key.
const PURPOSE: &[u8] = b"shortlink callback secrets v1";

/// The key sealing the callback tokens' secrets.
pub struct Sealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(…)")
    }
}

/// A stored secret that does not open: altered, copied from another row, or sealed under
/// another code secret.
#[derive(Debug, PartialEq, Eq)]
pub struct Unopened;

impl Sealer {
    /// The sealer of the deployment whose code secret is `code_secret`.
    pub fn new(code_secret: &[u8]) -> Sealer {
        let derived = shortlink_core::signing::derive_key(code_secret, PURPOSE);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &derived)
            .unwrap_or_else(|_| unreachable!("ChaCha20-Poly1305 takes a 32-byte key"));
        Sealer {
            key: LessSafeKey::new(key),
        }
    }

    /// `secret` sealed for token `token_id` of `workspace`.
    pub fn seal(
        &self,
        workspace: WorkspaceId,
        token_id: &str,
        secret: &str,
    ) -> crate::error::Result<String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce)
            .map_err(|error| crate::error::Error::Internal(Box::new(error)))?;
        let mut sealed = secret.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated(workspace, token_id)),
                &mut sealed,
            )
            .map_err(|_| crate::error::Error::Internal("sealing a secret failed".into()))?;
        let mut stored = nonce.to_vec();
        stored.extend_from_slice(&sealed);
        let engine = base64::engine::general_purpose::STANDARD;
        Ok(format!("{VERSION}{}", engine.encode(stored)))
    }

    /// The secret `stored` for token `token_id` of `workspace` (a legacy plain-text value as it
    /// is).
    pub fn open(
        &self,
        workspace: WorkspaceId,
        token_id: &str,
        stored: &str,
    ) -> Result<String, Unopened> {
        let Some(encoded) = stored.strip_prefix(VERSION) else {
            return Ok(stored.to_owned());
        };
        let engine = base64::engine::general_purpose::STANDARD;
        let bytes = engine.decode(encoded).map_err(|_| Unopened)?;
        if bytes.len() < NONCE_LEN {
            return Err(Unopened);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unopened)?;
        let mut sealed = sealed.to_vec();
        let aad = Aad::from(associated(workspace, token_id));
        let plain = (self.key.open_in_place(nonce, aad, &mut sealed)).map_err(|_| Unopened)?;
        String::from_utf8(plain.to_vec()).map_err(|_| Unopened)
    }
}

/// Whether a stored value is sealed (not a legacy plain-text one).
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(VERSION)
}

fn associated(workspace: WorkspaceId, token_id: &str) -> Vec<u8> {
    format!("{workspace}/{token_id}").into_bytes()
}

/// Seals every Twilio auth token still stored in plain text (written before sealing): run once
/// at start-up; how many it sealed.
pub async fn reseal(
    tokens: &dyn CallbackTokenStore,
    sealer: &Sealer,
) -> shortlink_store::StorageResult<u64> {
    let mut sealed = 0;
    for token in tokens.unsealed_secrets().await? {
        let Some(plain) = token.twilio_auth_token.as_deref() else {
            continue;
        };
        let Ok(value) = sealer.seal(token.workspace, &token.id, plain) else {
            continue;
        };
        if tokens.reseal_secret(&token.id, plain, &value).await? {
            sealed += 1;
        }
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_row_and_key() {
        let sealer = Sealer::new(&[7; 32]);
        let (a, b) = (WorkspaceId::from_db(1), WorkspaceId::from_db(2));
        let stored = sealer.seal(a, "cbt_1", "twilio-auth").unwrap();
        assert!(
            is_sealed(&stored) && !stored.contains("twilio-auth"),
            "{stored}"
        );
        assert_eq!(
            sealer.open(a, "cbt_1", &stored).as_deref(),
            Ok("twilio-auth")
        );
        assert_eq!(sealer.open(b, "cbt_1", &stored), Err(Unopened));
        assert_eq!(sealer.open(a, "cbt_2", &stored), Err(Unopened));
        assert_eq!(
            Sealer::new(&[8; 32]).open(a, "cbt_1", &stored),
            Err(Unopened)
        );
        // A fresh nonce each time: the same secret never seals to the same text.
        assert_ne!(sealer.seal(a, "cbt_1", "twilio-auth").unwrap(), stored);
        // A row from before sealing reads as it is.
        assert_eq!(sealer.open(a, "cbt_1", "legacy").as_deref(), Ok("legacy"));
        assert_eq!(sealer.open(a, "cbt_1", "v1:!!"), Err(Unopened));
    }
}

//! API keys: `Authorization: Bearer <key>` on every `/api/v1` route.
//!
//! A key is 32 random bytes (`slk_` + 64 hex digits), shown once when created; the database keeps
//! only its SHA-256. A request's key is hashed and looked up by that hash, so the lookup's timing
//! depends only on a digest the caller cannot steer; the stored digest is then compared in
//! constant time all the same.

use super::{AppState, Error};
use crate::validate::hex;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const KEY_PREFIX: &str = "slk_";
/// Longest Authorization value examined; longer ones are refused unread.
const MAX_KEY_LEN: usize = 256;

/// A new random API key.
pub fn generate_api_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{KEY_PREFIX}{}", hex(&bytes)))
}

/// What the database stores for `key`: SHA-256, lower-case hex.
pub fn hash_api_key(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// The API key id of an authenticated request, for handlers and logs.
#[derive(Debug, Clone, Copy)]
pub struct ApiKeyId(pub i64);

pub async fn require_api_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, Error> {
    let key = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|token| !token.is_empty())
        .ok_or(Error::MissingApiKey)?;
    if key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidApiKey);
    }
    let presented = hash_api_key(key);
    let stored = state
        .links
        .storage()
        .api_key_by_hash(&presented)
        .await?
        .ok_or(Error::InvalidApiKey)?;
    if !bool::from(stored.key_hash.as_bytes().ct_eq(presented.as_bytes())) {
        return Err(Error::InvalidApiKey);
    }
    if stored.revoked_at.is_some() {
        return Err(Error::RevokedApiKey);
    }
    tracing::Span::current().record("api_key", stored.id);
    request.extensions_mut().insert(ApiKeyId(stored.id));
    Ok(next.run(request).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hashed() {
        let a = generate_api_key().unwrap();
        let b = generate_api_key().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX) && a.len() == KEY_PREFIX.len() + 64);
        assert_eq!(hash_api_key(&a).len(), 64);
        assert_eq!(
            hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

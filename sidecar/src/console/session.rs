//! Sign-in with an API key, and the sessions it opens.
//!
//! Sessions live in the sidecar's memory, not in SQL: the console is served by the one sidecar
//! behind the internal API server, a session is worth little (signing in again takes the key
//! and a second), and nothing is gained by keeping it across a restart, which simply signs
//! everyone out. What must hold does not depend on where sessions live: a session names its key
//! by hash and every request reads that key back from SQL, so a revoked key ends its sessions at
//! once, and a role changed in SQL applies at the next click.
//!
//! The cookie carries 32 random bytes; the map is keyed by their SHA-256, so a memory dump or a
//! log of the map gives no usable cookie. It is `HttpOnly; SameSite=Strict; Path=/console/`,
//! `Secure` when nginx says the request came over TLS (`X-Forwarded-Proto: https`). A session
//! ends after [`IDLE`] without a request or [`LIFETIME`] in all.

use super::operator::Operator;
use super::page::PageError;
use crate::http::{hash_api_key, AppState, Error};
use crate::storage::Role;
use axum::extract::FromRequestParts;
use axum::http::header::COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const COOKIE_NAME: &str = "shortlink_console";
/// The sign-in form's own token (double submit): no session exists yet to hold one.
pub const SIGN_IN_COOKIE: &str = "shortlink_console_signin";
pub const IDLE: Duration = Duration::from_secs(60 * 60);
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Beyond this many sessions the oldest are dropped (a flood of sign-ins cannot grow memory).
const MAX_SESSIONS: usize = 10_000;

/// The open sessions, by the SHA-256 of their cookie.
#[derive(Default)]
pub struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
}

#[derive(Clone)]
struct Session {
    key_hash: String,
    csrf: String,
    created: Instant,
    seen: Instant,
}

pub(super) fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Internal(Box::new(e)))?;
    Ok(crate::validate::hex(&bytes))
}

fn token_hash(token: &str) -> String {
    hash_api_key(token)
}

/// The value of cookie `name` in the request.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether the browser reached nginx over TLS (nginx sets the header; the sidecar is loopback).
pub(super) fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"https"))
}

pub(super) fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!(
        "{name}={value}; Path=/console/; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        max_age.as_secs()
    );
    HeaderValue::from_str(&cookie).unwrap_or(HeaderValue::from_static(""))
}

impl FromRequestParts<AppState> for Operator {
    /// Not signed in (or the session ended): to the sign-in page.
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let to_sign_in = || Redirect::to("/console/sign-in").into_response();
        let console = Arc::clone(sessions(parts).map_err(IntoResponse::into_response)?);
        let token = cookie(&parts.headers, COOKIE_NAME).ok_or_else(to_sign_in)?;
        let id = token_hash(token);
        let now = Instant::now();
        let session = {
            let mut sessions = console.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let live = sessions.get_mut(&id).filter(|s| {
                now.duration_since(s.seen) < IDLE && now.duration_since(s.created) < LIFETIME
            });
            match live {
                Some(session) => {
                    session.seen = now;
                    session.clone()
                }
                None => {
                    sessions.remove(&id);
                    return Err(to_sign_in());
                }
            }
        };
        let key = state
            .links
            .storage()
            .api_key_by_hash(&session.key_hash)
            .await
            .map_err(|e| PageError::from(e).into_response())?;
        // An operator key acts in no workspace, and a suspended workspace's keys in none.
        let signed_in = key
            .filter(|key| key.revoked_at.is_none() && key.role != Role::Resolve)
            .and_then(|mut key| Some((key.workspace.take()?, key)))
            .filter(|(workspace, _)| !workspace.suspended);
        match signed_in {
            Some((workspace, key)) => Ok(Operator {
                name: key.name,
                role: key.role,
                workspace: workspace.id,
                workspace_slug: workspace.slug,
                csrf: session.csrf,
                secure: behind_tls(&parts.headers),
            }),
            _ => {
                console.end_sessions_of(&session.key_hash);
                Err(to_sign_in())
            }
        }
    }
}

/// The sessions, which the console's router carries as an extension (see [`super::router`]).
fn sessions(parts: &Parts) -> Result<&Arc<Sessions>, PageError> {
    (parts.extensions.get::<Arc<Sessions>>())
        .ok_or_else(|| PageError(Error::Internal("console state missing".into())))
}

impl Sessions {
    pub(super) fn open(&self, key_hash: String) -> Result<(String, String), Error> {
        let token = random_token()?;
        let csrf = random_token()?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| {
            now.duration_since(s.seen) < IDLE && now.duration_since(s.created) < LIFETIME
        });
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.seen)
                .map(|(id, _)| id.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            token_hash(&token),
            Session {
                key_hash,
                csrf: csrf.clone(),
                created: now,
                seen: now,
            },
        );
        Ok((token, csrf))
    }

    pub(super) fn end_sessions_of(&self, key_hash: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.key_hash != key_hash);
    }

    pub(super) fn end(&self, token: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.remove(&token_hash(token));
    }
}

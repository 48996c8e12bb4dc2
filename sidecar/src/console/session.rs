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

use super::{layout, see_other, PageError, PageResult};
use crate::http::{hash_api_key, AppState, Error};
use crate::storage::Role;
use axum::extract::{FromRequestParts, State};
use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use axum::Form;
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

pub const COOKIE_NAME: &str = "shortlink_console";
/// The sign-in form's own token (double submit): no session exists yet to hold one.
pub const SIGN_IN_COOKIE: &str = "shortlink_console_signin";
pub const IDLE: Duration = Duration::from_secs(60 * 60);
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Beyond this many sessions the oldest are dropped (a flood of sign-ins cannot grow memory).
const MAX_SESSIONS: usize = 10_000;

/// What the console keeps between requests: sessions, bulk uploads and campaign totals.
#[derive(Default)]
pub struct ConsoleState {
    sessions: Mutex<HashMap<String, Session>>,
    pub(super) jobs: super::bulk::Jobs,
    pub(super) imports: super::import::Imports,
    pub(super) totals: std::sync::Arc<super::totals::Totals>,
}

#[derive(Clone)]
struct Session {
    key_hash: String,
    csrf: String,
    created: Instant,
    seen: Instant,
}

/// A signed-in person: their key's name and role, and the session's CSRF token.
#[derive(Clone)]
pub struct Operator {
    pub name: String,
    pub role: Role,
    pub csrf: String,
    pub secure: bool,
}

impl Operator {
    /// Whether the role may create, change and revoke links (admin, issuer).
    pub fn may_issue(&self) -> bool {
        matches!(self.role, Role::Admin | Role::Issuer)
    }

    /// Refuses a change to a role that may only read, as the API does (403 `forbidden`).
    pub fn require_issue(&self) -> Result<(), PageError> {
        if self.may_issue() {
            Ok(())
        } else {
            Err(PageError(Error::Forbidden(self.role)))
        }
    }

    /// Checks a form's CSRF token against the session's (constant time).
    pub fn check_csrf(&self, token: Option<&str>) -> Result<(), PageError> {
        check_token(&self.csrf, token)
    }
}

/// An empty `expected` (no sign-in cookie) matches nothing, not even an empty field.
fn check_token(expected: &str, token: Option<&str>) -> Result<(), PageError> {
    match token {
        Some(token)
            if !expected.is_empty() && bool::from(token.as_bytes().ct_eq(expected.as_bytes())) =>
        {
            Ok(())
        }
        _ => Err(PageError(Error::Request {
            status: StatusCode::FORBIDDEN,
            code: "invalid_csrf_token",
            message: "the form was sent without its security token; reload the page and try again"
                .into(),
        })),
    }
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
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
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
fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"https"))
}

fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> HeaderValue {
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
        let console = Arc::clone(console_state(parts).map_err(IntoResponse::into_response)?);
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
        match key {
            Some(key) if key.revoked_at.is_none() && key.role != Role::Resolve => Ok(Operator {
                name: key.name,
                role: key.role,
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

/// The console's state, which its router carries as an extension (see [`super::router`]).
fn console_state(parts: &Parts) -> Result<&Arc<ConsoleState>, PageError> {
    (parts.extensions.get::<Arc<ConsoleState>>())
        .ok_or_else(|| PageError(Error::Internal("console state missing".into())))
}

impl ConsoleState {
    fn open(&self, key_hash: String) -> Result<(String, String), Error> {
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

    fn end_sessions_of(&self, key_hash: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.key_hash != key_hash);
    }

    fn end(&self, token: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.remove(&token_hash(token));
    }
}

fn sign_in_form(csrf: &str, problem: Option<&str>) -> maud::Markup {
    layout::bare(
        "Sign in",
        html! {
            h1 { "shortlink console" }
            @if let Some(problem) = problem {
                p.error role="alert" { (problem) }
            }
            form method="post" action="/console/sign-in" {
                input type="hidden" name="csrf" value=(csrf);
                label for="key" { "API key" }
                input #key type="password" name="key" autocomplete="off" required autofocus;
                button type="submit" { "Sign in" }
            }
            p.hint { "Use a key from " code { "shortlink-sidecar keys create" } "." }
        },
    )
}

pub async fn sign_in_page(headers: HeaderMap) -> PageResult {
    let csrf = random_token()?;
    let mut response = sign_in_form(&csrf, None).into_response();
    response.headers_mut().append(
        SET_COOKIE,
        set_cookie(SIGN_IN_COOKIE, &csrf, IDLE, behind_tls(&headers)),
    );
    Ok(response)
}

#[derive(Deserialize)]
pub struct SignIn {
    key: Option<String>,
    csrf: Option<String>,
}

pub async fn sign_in(
    State(state): State<AppState>,
    Extension(console): Extension<Arc<ConsoleState>>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> PageResult {
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    check_token(expected, form.csrf.as_deref())?;
    let key = form.key.unwrap_or_default();
    let key = key.trim();
    let refused = |message: &str| -> PageResult {
        Ok((
            StatusCode::UNAUTHORIZED,
            sign_in_form(expected, Some(message)),
        )
            .into_response())
    };
    if key.is_empty() || key.len() > 256 {
        return refused("That is not a valid API key.");
    }
    let hash = hash_api_key(key);
    let stored = state.links.storage().api_key_by_hash(&hash).await?;
    let Some(stored) = stored.filter(|k| bool::from(k.key_hash.as_bytes().ct_eq(hash.as_bytes())))
    else {
        return refused("That is not a valid API key.");
    };
    if stored.revoked_at.is_some() {
        return refused("This API key has been revoked.");
    }
    if stored.role == Role::Resolve {
        return refused("This key is nginx's resolve key; it cannot sign in.");
    }
    let (token, _) = console.open(hash)?;
    let secure = behind_tls(&headers);
    let mut response = see_other("/console/");
    let cookies = response.headers_mut();
    cookies.append(
        SET_COOKIE,
        set_cookie(COOKIE_NAME, &token, LIFETIME, secure),
    );
    cookies.append(
        SET_COOKIE,
        set_cookie(SIGN_IN_COOKIE, "", Duration::ZERO, secure),
    );
    Ok(response)
}

#[derive(Deserialize)]
pub struct SignOut {
    csrf: Option<String>,
}

pub async fn sign_out(
    Extension(console): Extension<Arc<ConsoleState>>,
    operator: Operator,
    headers: HeaderMap,
    Form(form): Form<SignOut>,
) -> PageResult {
    operator.check_csrf(form.csrf.as_deref())?;
    if let Some(token) = cookie(&headers, COOKIE_NAME) {
        console.end(token);
    }
    let mut response = see_other("/console/sign-in");
    response.headers_mut().append(
        SET_COOKIE,
        set_cookie(COOKIE_NAME, "", Duration::ZERO, operator.secure),
    );
    Ok(response)
}

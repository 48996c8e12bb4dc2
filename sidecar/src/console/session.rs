//! Sign-in with API keys, and the sessions they open.
//!
//! Sessions live in the sidecar's memory, not in SQL: the console is served by the one sidecar
//! behind the internal API server, a session is worth little (signing in again takes the key
//! and a second), and nothing is gained by keeping it across a restart, which simply signs
//! everyone out. What must hold does not depend on where sessions live: a session names its keys
//! by hash and every request reads the active one back from SQL, so a revoked key leaves its
//! sessions at once, and a role changed in SQL applies at the next click.
//!
//! A person with keys in several workspaces signs in with each ("Add a workspace"): a session
//! holds up to [`MAX_KEYS`] keys, one per workspace (an operator key counts as one more place),
//! and one of them is active. Pages act as the active key only; the others are names in the
//! switcher until chosen, and are read back from SQL the moment they are.
//!
//! The cookie carries 32 random bytes; the map is keyed by their SHA-256, so a memory dump or a
//! log of the map gives no usable cookie. It is `HttpOnly; SameSite=Strict; Path=/console/`,
//! `Secure` when nginx says the request came over TLS (`X-Forwarded-Proto: https`). A session
//! ends after [`IDLE`] without a request or [`LIFETIME`] in all.

use super::operator::{InstanceOperator, Operator, Place};
use super::page::PageError;
use axum::extract::FromRequestParts;
use axum::http::header::COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use shortlink_api::{hash_api_key, AppState, Error, InWorkspace};
use shortlink_core::sync::LockOrRecover;
use shortlink_store::ApiKey;
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
/// Keys one session may hold: enough for a person serving a dozen brands, and a bound.
pub const MAX_KEYS: usize = 16;

/// The open sessions, by the SHA-256 of their cookie.
#[derive(Default)]
pub struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
}

#[derive(Clone)]
struct Session {
    /// Never empty: a session left without keys is removed.
    keys: Vec<Member>,
    active: usize,
    csrf: String,
    created: Instant,
    seen: Instant,
}

/// One key of a session.
#[derive(Clone, Debug)]
pub struct Member {
    key_hash: String,
    pub place: Place,
}

impl Member {
    pub fn new(key_hash: String, place: Place) -> Self {
        Member { key_hash, place }
    }
}

/// A live session as a request finds it: its active key, read back from SQL, and the places of
/// the others (for the switcher).
pub struct Signed {
    pub key: ApiKey,
    pub place: Place,
    /// Every place of the session, the active one included, in sign-in order.
    pub places: Vec<Place>,
    pub csrf: String,
    pub secure: bool,
}

pub(super) fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Internal(Box::new(e)))?;
    Ok(shortlink_model::validate::hex(&bytes))
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

impl FromRequestParts<AppState> for Signed {
    /// Not signed in (or the session ended): to the sign-in page. The active key revoked while
    /// others remain: to the overview, as the next key (never the page asked for, which was
    /// meant for the workspace that just left).
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let to_sign_in = || Redirect::to("/console/sign-in").into_response();
        let console = Arc::clone(sessions(parts).map_err(IntoResponse::into_response)?);
        let token = cookie(&parts.headers, COOKIE_NAME).ok_or_else(to_sign_in)?;
        let session = console.live(token).ok_or_else(to_sign_in)?;
        let member = &session.keys[session.active];
        let key = (state.links.storage())
            .api_key_by_hash(&member.key_hash)
            .await
            .map_err(|e| PageError::from(e).into_response())?;
        // The key must still act where it did when it joined (a key never moves, but a
        // suspended workspace's keys act nowhere).
        match key.filter(|key| Place::of(key).as_ref() == Some(&member.place)) {
            Some(key) => Ok(Signed {
                key,
                place: member.place.clone(),
                places: session.keys.iter().map(|m| m.place.clone()).collect(),
                csrf: session.csrf,
                secure: behind_tls(&parts.headers),
            }),
            None => {
                console.end_sessions_of(&member.key_hash);
                let overview = match &member.place {
                    Place::Workspace { slug, .. } => format!("/console/?left={slug}"),
                    Place::Installation => "/console/".to_owned(),
                };
                match console.live(token) {
                    Some(_) => Err(Redirect::to(&overview).into_response()),
                    None => Err(to_sign_in()),
                }
            }
        }
    }
}

/// Who a live session is, by its active key: a workspace's person or the operator.
pub enum Person {
    Workspace(Operator),
    Instance(InstanceOperator),
}

impl Signed {
    pub fn person(self) -> Person {
        match self.place {
            Place::Workspace { id, slug, name } => Person::Workspace(Operator {
                key: self.key.id,
                name: self.key.name,
                role: self.key.role,
                workspace: id,
                workspace_slug: slug,
                workspace_name: name,
                csrf: self.csrf,
                places: self.places,
            }),
            Place::Installation => Person::Instance(InstanceOperator {
                key: self.key,
                csrf: self.csrf,
                places: self.places,
            }),
        }
    }
}

impl FromRequestParts<AppState> for Person {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        Ok(Signed::from_request_parts(parts, state).await?.person())
    }
}

impl FromRequestParts<AppState> for Operator {
    /// Besides [`Signed`]'s: an operator session, which has no workspace, goes to its own pages.
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        // Read once a request: a form's extractor reads it after the handler's argument did,
        // and a second read would count the form twice against the key's rate.
        if let Some(operator) = parts.extensions.get::<Operator>() {
            return Ok(operator.clone());
        }
        let signed = Signed::from_request_parts(parts, state).await?;
        // A form (anything but a read) counts against the key's rate as its API request
        // would: a console session does not lift the limits of the key it holds.
        if !matches!(parts.method, Method::GET | Method::HEAD) {
            (shortlink_api::rate_limit::admit_key(state, &signed.key).await)
                .map_err(|refused| PageError(refused).into_response())?;
        }
        match signed.person() {
            Person::Workspace(operator) => {
                // What the API's auth does for a key: the extractors after this one (the
                // issuing domains of `DomainContext`) then act in the session's workspace, not
                // the default's. Handlers take `Operator` before `DomainContext` for it.
                let slugs = state.links.slugs();
                if let Err(error) = slugs.remember(operator.workspace, &operator.workspace_slug) {
                    tracing::error!(%error, "console: the session's workspace has no record name");
                }
                parts.extensions.insert(InWorkspace(operator.workspace));
                parts.extensions.insert(operator.clone());
                Ok(operator)
            }
            Person::Instance(_) => Err(Redirect::to("/console/workspaces").into_response()),
        }
    }
}

impl FromRequestParts<AppState> for InstanceOperator {
    /// Besides [`Signed`]'s: a workspace's key gets the 403 page (the API answers it 403 too).
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        if let Some(operator) = parts.extensions.get::<InstanceOperator>() {
            return Ok(operator.clone());
        }
        match Person::from_request_parts(parts, state).await? {
            Person::Instance(operator) => {
                parts.extensions.insert(operator.clone());
                Ok(operator)
            }
            Person::Workspace(operator) => {
                Err(PageError(Error::Forbidden(operator.role)).into_response())
            }
        }
    }
}

/// The sessions, which the console's router carries as an extension (see [`super::router`]).
fn sessions(parts: &Parts) -> Result<&Arc<Sessions>, PageError> {
    (parts.extensions.get::<Arc<Sessions>>())
        .ok_or_else(|| PageError(Error::Internal("console state missing".into())))
}

fn alive(session: &Session, now: Instant) -> bool {
    now.duration_since(session.seen) < IDLE && now.duration_since(session.created) < LIFETIME
}

impl Sessions {
    /// Opens a session with one key; returns its cookie and CSRF token.
    pub(super) fn open(&self, member: Member) -> Result<(String, String), Error> {
        let token = random_token()?;
        let csrf = random_token()?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock_or_recover();
        sessions.retain(|_, s| alive(s, now));
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
                keys: vec![member],
                active: 0,
                csrf: csrf.clone(),
                created: now,
                seen: now,
            },
        );
        Ok((token, csrf))
    }

    /// The live session of cookie `token` (its last use now), if any.
    fn live(&self, token: &str) -> Option<Session> {
        let id = token_hash(token);
        let now = Instant::now();
        let mut sessions = self.sessions.lock_or_recover();
        match sessions.get_mut(&id).filter(|s| alive(s, now)) {
            Some(session) => {
                session.seen = now;
                Some(session.clone())
            }
            None => {
                sessions.remove(&id);
                None
            }
        }
    }

    /// The CSRF token of cookie `token`'s live session.
    pub(super) fn csrf_of(&self, token: &str) -> Option<String> {
        self.live(token).map(|session| session.csrf)
    }

    /// Adds a key to the session of cookie `token` and makes it active: in place of the key of
    /// the same workspace if it has one. The session gets a new cookie (what it may reach has
    /// grown; an old copy of the cookie must not); `None` if the session ended meanwhile.
    pub(super) fn join(&self, token: &str, member: Member) -> Result<Option<String>, Error> {
        let fresh = random_token()?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock_or_recover();
        let Some(mut session) = sessions
            .remove(&token_hash(token))
            .filter(|s| alive(s, now))
        else {
            return Ok(None);
        };
        match session.keys.iter().position(|m| m.place == member.place) {
            Some(same) => {
                session.keys[same] = member;
                session.active = same;
            }
            None if session.keys.len() >= MAX_KEYS => {
                sessions.insert(token_hash(token), session);
                return Err(Error::Request {
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    code: "too_many_workspaces",
                    message: format!(
                        "a session holds {MAX_KEYS} workspaces at most; sign out and in again"
                    ),
                });
            }
            None => {
                session.keys.push(member);
                session.active = session.keys.len() - 1;
            }
        }
        session.seen = now;
        sessions.insert(token_hash(&fresh), session);
        Ok(Some(fresh))
    }

    /// Makes the session's key of `choice` (see [`Place::choice`]) the active one; `false` if
    /// the session has none there.
    pub(super) fn switch(&self, token: &str, choice: &str) -> bool {
        let mut sessions = self.sessions.lock_or_recover();
        let Some(session) = sessions.get_mut(&token_hash(token)) else {
            return false;
        };
        match session.keys.iter().position(|m| m.place.choice() == choice) {
            Some(index) => {
                session.active = index;
                true
            }
            None => false,
        }
    }

    /// Takes a key out of every session (revoked, or its workspace suspended); a session left
    /// without keys ends, one whose active key it was goes on with its first.
    pub(super) fn end_sessions_of(&self, key_hash: &str) {
        let mut sessions = self.sessions.lock_or_recover();
        sessions.retain(|_, s| {
            let Some(index) = s.keys.iter().position(|m| m.key_hash == key_hash) else {
                return true;
            };
            s.keys.remove(index);
            if s.active == index {
                s.active = 0;
            } else if s.active > index {
                s.active -= 1;
            }
            !s.keys.is_empty()
        });
    }

    pub(super) fn end(&self, token: &str) {
        let mut sessions = self.sessions.lock_or_recover();
        sessions.remove(&token_hash(token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_model::WorkspaceId;

    fn member(key: &str, workspace: i64) -> Member {
        let place = Place::Workspace {
            id: WorkspaceId::from_db(workspace),
            slug: format!("w{workspace}"),
            name: format!("Workspace {workspace}"),
        };
        Member::new(key.into(), place)
    }

    /// The session's keys and its active one's.
    fn keys_of(sessions: &Sessions, token: &str) -> (Vec<String>, String) {
        let session = sessions.live(token).expect("a live session");
        let keys = session.keys.iter().map(|m| m.key_hash.clone()).collect();
        (keys, session.keys[session.active].key_hash.clone())
    }

    #[test]
    fn a_joining_key_is_active_and_replaces_its_workspaces() {
        let sessions = Sessions::default();
        let (first, _) = sessions.open(member("a", 1)).unwrap();
        let token = sessions.join(&first, member("b", 2)).unwrap().unwrap();
        assert!(sessions.live(&first).is_none(), "the old cookie is void");
        assert_eq!(
            keys_of(&sessions, &token),
            (vec!["a".into(), "b".into()], "b".into())
        );
        let token = sessions.join(&token, member("a2", 1)).unwrap().unwrap();
        assert_eq!(
            keys_of(&sessions, &token),
            (vec!["a2".into(), "b".into()], "a2".into())
        );
        assert!(sessions.switch(&token, "w2"));
        assert!(!sessions.switch(&token, "w3"));
        assert_eq!(keys_of(&sessions, &token).1, "b");
        let mut token = token;
        for workspace in 3..=MAX_KEYS as i64 {
            token = (sessions.join(&token, member(&format!("k{workspace}"), workspace)))
                .unwrap()
                .unwrap();
        }
        assert!(sessions.join(&token, member("over", 99)).is_err());
        assert_eq!(keys_of(&sessions, &token).0.len(), MAX_KEYS);
    }

    #[test]
    fn a_revoked_key_leaves_every_session_and_the_last_ends_it() {
        let sessions = Sessions::default();
        let (token, _) = sessions.open(member("a", 1)).unwrap();
        let token = sessions.join(&token, member("b", 2)).unwrap().unwrap();
        let token = sessions.join(&token, member("c", 3)).unwrap().unwrap();
        assert!(sessions.switch(&token, "w2"));
        // A key before the active one: the active one stays.
        sessions.end_sessions_of("a");
        assert_eq!(
            keys_of(&sessions, &token),
            (vec!["b".into(), "c".into()], "b".into())
        );
        // The active one: the first left takes over.
        sessions.end_sessions_of("b");
        assert_eq!(keys_of(&sessions, &token), (vec!["c".into()], "c".into()));
        sessions.end_sessions_of("c");
        assert!(sessions.live(&token).is_none());
    }
}

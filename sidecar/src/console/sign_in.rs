//! Sign-in, "Add a workspace", the switcher and sign-out (the sessions they open, change and end
//! are [`super::session`]'s).

use super::layout;
use super::operator::{check_token, Place};
use super::page::{see_other, PageResult};
use super::session::{
    behind_tls, cookie, random_token, set_cookie, Member, Sessions, Signed, COOKIE_NAME, IDLE,
    LIFETIME, SIGN_IN_COOKIE,
};
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Extension;
use axum::Form;
use maud::html;
use serde::Deserialize;
use shortlink_api::{hash_api_key, AppState, Error};
use shortlink_store::Role;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// The form; `adding` when a session is open (its key joins that session).
fn sign_in_form(csrf: &str, adding: bool, problem: Option<&str>) -> maud::Markup {
    let title = if adding { "Add a workspace" } else { "Sign in" };
    layout::bare(
        title,
        html! {
            h1 { @if adding { "Add a workspace" } @else { "shortlink console" } }
            @if adding {
                p { "Sign in with a key of another workspace: it joins this session and becomes the "
                    "active one; the header's switcher goes back. A key of a workspace the session "
                    "has already replaces that one." }
            }
            @if let Some(problem) = problem {
                p.error role="alert" { (problem) }
            }
            form method="post" action="/console/sign-in" {
                input type="hidden" name="csrf" value=(csrf);
                label for="key" { "API key" }
                input #key type="password" name="key" autocomplete="off" required autofocus;
                button type="submit" { @if adding { "Add" } @else { "Sign in" } }
            }
            @if adding {
                p { a href="/console/" { "Back" } }
            } @else {
                p.hint { "Use a key from " code { "shortlink-sidecar keys create" } "." }
            }
        },
    )
}

pub async fn sign_in_page(
    Extension(console): Extension<Arc<Sessions>>,
    headers: HeaderMap,
) -> PageResult {
    // Signed in: the form adds a key to the session, under the session's own CSRF token.
    if let Some(csrf) = cookie(&headers, COOKIE_NAME).and_then(|token| console.csrf_of(token)) {
        return Ok(sign_in_form(&csrf, true, None).into_response());
    }
    let csrf = random_token()?;
    let mut response = sign_in_form(&csrf, false, None).into_response();
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
    Extension(console): Extension<Arc<Sessions>>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> PageResult {
    let session =
        cookie(&headers, COOKIE_NAME).and_then(|token| Some((token, console.csrf_of(token)?)));
    let expected = match &session {
        Some((_, csrf)) => csrf.as_str(),
        None => cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default(),
    };
    check_token(expected, form.csrf.as_deref())?;
    let adding = session.is_some();
    let key = form.key.unwrap_or_default();
    let key = key.trim();
    let refused = |message: &str| -> PageResult {
        Ok((
            StatusCode::UNAUTHORIZED,
            sign_in_form(expected, adding, Some(message)),
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
    let Some(place) = Place::of(&stored) else {
        return refused("This key's workspace is suspended.");
    };
    let member = Member::new(hash, place);
    let secure = behind_tls(&headers);
    let token = match session {
        Some((token, _)) => match console.join(token, member) {
            Ok(Some(token)) => token,
            Ok(None) => return Err(Error::NotFound.into()),
            Err(error) => {
                let message = error.message();
                return Ok((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    sign_in_form(expected, adding, Some(&message)),
                )
                    .into_response());
            }
        },
        None => console.open(member)?.0,
    };
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
pub struct Switch {
    csrf: Option<String>,
    to: Option<String>,
}

/// The header's switcher: another key of the session becomes the active one, read back from
/// SQL at the overview it redirects to (a key revoked meanwhile leaves the session there).
pub async fn switch(
    Extension(console): Extension<Arc<Sessions>>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Switch>,
) -> PageResult {
    check_token(&signed.csrf, form.csrf.as_deref())?;
    let token = cookie(&headers, COOKIE_NAME).unwrap_or_default();
    if !console.switch(token, form.to.as_deref().unwrap_or_default()) {
        return Err(Error::Request {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "not_in_session",
            message: "this session has no key of that workspace; add it first".into(),
        }
        .into());
    }
    Ok(see_other("/console/"))
}

#[derive(Deserialize)]
pub struct SignOut {
    csrf: Option<String>,
}

/// Ends the whole session, every workspace of it.
pub async fn sign_out(
    Extension(console): Extension<Arc<Sessions>>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<SignOut>,
) -> PageResult {
    check_token(&signed.csrf, form.csrf.as_deref())?;
    if let Some(token) = cookie(&headers, COOKIE_NAME) {
        console.end(token);
    }
    let mut response = see_other("/console/sign-in");
    response.headers_mut().append(
        SET_COOKIE,
        set_cookie(COOKIE_NAME, "", Duration::ZERO, signed.secure),
    );
    Ok(response)
}

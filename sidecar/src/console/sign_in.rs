//! The sign-in and sign-out pages (the sessions they open and end are [`super::session`]'s).

use super::layout;
use super::operator::{check_token, Operator};
use super::page::{see_other, PageResult};
use super::session::{
    behind_tls, cookie, random_token, set_cookie, Sessions, COOKIE_NAME, IDLE, LIFETIME,
    SIGN_IN_COOKIE,
};
use crate::http::{hash_api_key, AppState};
use crate::storage::Role;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Extension;
use axum::Form;
use maud::html;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

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
    Extension(console): Extension<Arc<Sessions>>,
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
    Extension(console): Extension<Arc<Sessions>>,
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

//! A console form's POST, admitted in one place: the signed-in person, the session's CSRF token
//! (the form's `csrf` field), the role the form needs, and the audit origin its change is filed
//! under. A handler names what it needs in its argument's type ([`IssuerForm`], [`AdminForm`],
//! [`OperatorForm`], [`ConsoleForm`] for a form that changes nothing) and gets the parsed fields
//! only once every check has passed, so no form can forget one.
//!
//! The checks run in the order the handlers ran them: the session, the form's fields (axum's
//! own rejections), the token, the role.

use super::audit;
use super::operator::{InstanceOperator, Operator};
use super::page::PageError;
use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, RawForm, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use shortlink_api::{AppState, Error};
use shortlink_store::audit::{Origin, RequestInfo};
use std::marker::PhantomData;

/// A form's fields and the origin its change is recorded with, after [`Gate`] `G` admitted it.
pub struct Posted<T, G>(pub T, pub Origin, pub PhantomData<G>);

/// A form of a workspace's person that changes nothing (a preview): any role.
pub type ConsoleForm<T> = Posted<T, Anyone>;
/// A form that creates or changes links: admin or issuer.
pub type IssuerForm<T> = Posted<T, Issuer>;
/// A form of an admin's page (webhooks, keys, privacy, domains, held links).
pub type AdminForm<T> = Posted<T, Admin>;
/// A form of the operator's pages (the workspaces).
pub type OperatorForm<T> = Posted<T, Installation>;

/// A form whose only field is its token (a confirmation).
#[derive(Debug, Deserialize)]
pub struct Confirmed {}

/// The origin a form's change is filed under, or why the form is refused.
pub type Admitted = Result<Origin, Error>;

/// Who may send a form, and what origin their change has.
pub trait Gate: Send + Sync {
    type Person: FromRequestParts<AppState, Rejection = Response> + Send;

    fn admit(person: &Self::Person, token: Option<&str>, tag: RequestInfo) -> Admitted;
}

/// Any role of the workspace.
pub struct Anyone;
/// Admin or issuer.
pub struct Issuer;
pub struct Admin;
/// The operator (no workspace).
pub struct Installation;

/// What a workspace person's role must be for a form.
pub trait Needs: Send + Sync {
    fn check(operator: &Operator) -> Result<(), Error>;
}

impl Needs for Anyone {
    fn check(_: &Operator) -> Result<(), Error> {
        Ok(())
    }
}

impl Needs for Issuer {
    fn check(operator: &Operator) -> Result<(), Error> {
        operator.require_issue()
    }
}

impl Needs for Admin {
    fn check(operator: &Operator) -> Result<(), Error> {
        operator.require_admin()
    }
}

impl<N: Needs> Gate for N {
    type Person = Operator;

    fn admit(person: &Operator, token: Option<&str>, tag: RequestInfo) -> Admitted {
        person.check_csrf(token)?;
        N::check(person)?;
        Ok(audit::origin(person, tag))
    }
}

impl Gate for Installation {
    type Person = InstanceOperator;

    fn admit(person: &InstanceOperator, token: Option<&str>, tag: RequestInfo) -> Admitted {
        person.check_csrf(token)?;
        Ok(audit::operator_origin(person, tag))
    }
}

impl<T, G> FromRequest<AppState> for Posted<T, G>
where
    T: DeserializeOwned + Send,
    G: Gate,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        // Read once a request: a handler's own `Operator` argument, first, read it already.
        let person = G::Person::from_request_parts(&mut parts, state).await?;
        let Extension(tagged) = Extension::<RequestInfo>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let RawForm(body) = RawForm::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        let fields = fields(body.clone(), state).await?;
        let token = url::form_urlencoded::parse(&body)
            .find(|(name, _)| name == "csrf")
            .map(|(_, value)| value.into_owned());
        let origin = G::admit(&person, token.as_deref(), tagged)
            .map_err(|refused| PageError(refused).into_response())?;
        Ok(Posted(fields, origin, PhantomData))
    }
}

/// The form's fields as axum's [`Form`] reads them, with its rejections (422 for a field that
/// does not parse).
async fn fields<T: DeserializeOwned>(
    body: axum::body::Bytes,
    state: &AppState,
) -> Result<T, Response> {
    let mut form = Request::new(Body::from(body));
    *form.method_mut() = Method::POST;
    (form.headers_mut()).insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    let Form(fields) = Form::<T>::from_request(form, state)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok(fields)
}

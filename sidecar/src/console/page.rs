//! What every console page answers with: its error page, the redirect after a POST, a refused
//! form shown again, and the security policy. The base the pages build on, beside [`super::layout`].

use super::layout;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use shortlink_api::Error;

/// Every console answer forbids anything not served by the console itself: no inline script or
/// style, no framing, forms post only here.
pub(super) const CSP: &str =
    "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The crate's [`Error`] as an HTML page: the same status and the same message for people
/// (internal causes are logged by [`Error`]'s own rendering, never shown).
pub struct PageError(pub Error);

impl<E: Into<Error>> From<E> for PageError {
    fn from(error: E) -> Self {
        PageError(error.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status_code();
        let message = self.0.message();
        // Logs and counts the error as the API does; only the status and message are kept.
        drop(self.0.into_response());
        let page = layout::bare(
            "Error",
            maud::html! {
                h1 { "Error " (status.as_u16()) }
                p.error role="alert" { (message) }
                p { a href="/console/" { "Back to the overview" } }
            },
        );
        (status, page).into_response()
    }
}

pub type PageResult<T = Response> = std::result::Result<T, PageError>;

/// A form's page shown again with the error that refused it: the error logged and counted as
/// the API does, the page (`page` gets the error's message) answered 422 for a person's mistake,
/// else with the error's own status (a quota used up is no mistake: 429, as the API answers).
pub(super) fn refused_form(error: Error, page: impl FnOnce(String) -> Response) -> Response {
    let status = error.status_code();
    let message = error.message();
    drop(error.into_response());
    let mut response = page(message);
    *response.status_mut() = if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS
    {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        status
    };
    response
}

/// After a successful POST: see the result with a GET (reloading never posts twice).
pub(super) fn see_other(location: &str) -> Response {
    Redirect::to(location).into_response()
}

/// Percent-encodes a path segment or query value (campaigns and tags are free text).
pub(crate) fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

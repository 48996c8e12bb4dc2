//! `Connection: close` on client errors to requests that carried a body.
//!
//! A 401, 413 or 415 is answered before the body is read. If the connection were then kept alive,
//! nginx could send its next request on it while the unread body is still in flight, and that
//! request would fail with 502. Closing costs one reconnect per refused request, and only then.

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

pub async fn close_after_client_error(request: Request, next: Next) -> Response {
    let had_body = request.headers().contains_key(header::TRANSFER_ENCODING)
        || request
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length != "0");
    let mut response = next.run(request).await;
    if had_body && response.status().is_client_error() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

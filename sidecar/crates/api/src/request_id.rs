//! The request id and client address every audit row of a request carries: `X-Request-Id` as
//! nginx sends it (`$request_id`), or one made here; echoed on the answer so a caller can quote
//! it. The client address is nginx's `X-Real-IP`, believed only on a request that came through
//! nginx ([`super::proxy_secret`]): anyone else reaching the port could name any address.

use super::AppState;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use shortlink_model::validate::hex;
use shortlink_store::audit::RequestInfo;

pub const HEADER: &str = "x-request-id";

/// Longest request id kept from a caller (nginx's are 32 hex digits).
const MAX_LEN: usize = 200;

pub async fn tag_request(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let request_id = headers
        .get(HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|id| {
            !id.is_empty() && id.len() <= MAX_LEN && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map(str::to_owned)
        .unwrap_or_else(new_id);
    let through_nginx =
        (state.settings.proxy_secret.as_ref()).is_some_and(|secret| secret.matches(headers));
    let client_addr = through_nginx
        .then(|| headers.get("x-real-ip")?.to_str().ok())
        .flatten()
        .map(|addr| addr.trim().chars().take(64).collect::<String>())
        .filter(|addr| !addr.is_empty());
    let echo = HeaderValue::from_str(&request_id).ok();
    request.extensions_mut().insert(RequestInfo {
        request_id: Some(request_id),
        client_addr,
    });
    let mut response = next.run(request).await;
    if let Some(echo) = echo {
        response.headers_mut().insert(HEADER, echo);
    }
    response
}

/// 16 random bytes as hex, like nginx's `$request_id`.
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    // Without randomness the id is only less unique; the request still goes on.
    let _ = getrandom::fill(&mut bytes);
    hex(&bytes)
}

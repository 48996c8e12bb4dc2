//! The old shorteners' APIs, from recorded answers: Shlink REST v3, Kutt API v2, Bitly API v4.
//! Each checks its authentication header (401 with the vendor's error body otherwise),
//! paginates as the vendor does, and answers the first request for the second page with a 429
//! and `Retry-After: 1`, as a rate limit would.

use super::fixture;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct SourceServer {
    pub url: String,
    pub state: Arc<Recorded>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SourceServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub const KEY: &str = "old-shortener-key";

/// What the server answers from, and what it was asked.
pub struct Recorded {
    pub base: String,
    pub shlink: Vec<Value>,
    pub kutt: Vec<Value>,
    /// Requests for a second page (the first is refused with a 429).
    pub second_pages: AtomicUsize,
    pub requests: AtomicUsize,
}

fn load(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(name)).unwrap()).unwrap()
}

pub async fn start() -> SourceServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let state = Arc::new(Recorded {
        base: url.clone(),
        shlink: load("shlink-short-urls.json").as_array().unwrap().clone(),
        kutt: load("kutt-links.json").as_array().unwrap().clone(),
        second_pages: AtomicUsize::new(0),
        requests: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/rest/v3/short-urls", get(shlink_list))
        .route("/rest/v3/short-urls/{code}/visits", get(shlink_visits))
        .route("/api/v2/links", get(kutt_list))
        .route("/v4/groups/{group}/bitlinks", get(bitly_list))
        .route(
            "/v4/bitlinks/{domain}/{code}/clicks/summary",
            get(bitly_clicks),
        )
        .with_state(Arc::clone(&state));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    SourceServer { url, state, task }
}

type Params = Query<HashMap<String, String>>;

fn number(params: &Params, name: &str, default: usize) -> usize {
    params
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The first request for a second page: refused as rate-limited.
fn rate_limited(state: &Recorded, second: bool) -> Option<Response> {
    state.requests.fetch_add(1, Ordering::Relaxed);
    if second && state.second_pages.fetch_add(1, Ordering::Relaxed) == 0 {
        return Some(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [("Retry-After", "1")],
                "<html><body>Too many requests</body></html>",
            )
                .into_response(),
        );
    }
    None
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Shlink's problem-details body for a bad key.
fn shlink_denied() -> Response {
    let body = json!({"type": "https://shlink.io/api/error/invalid-api-key", "title": "Invalid API key",
        "detail": "Provided API key does not exist or is invalid.", "status": 401});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

async fn shlink_list(
    State(s): State<Arc<Recorded>>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    if header(&headers, "x-api-key") != KEY {
        return shlink_denied();
    }
    let page = number(&params, "page", 1).max(1);
    let per_page = number(&params, "itemsPerPage", 10);
    if let Some(limited) = rate_limited(&s, page == 2) {
        return limited;
    }
    let start = ((page - 1) * per_page).min(s.shlink.len());
    let data: Vec<Value> = s.shlink[start..].iter().take(per_page).cloned().collect();
    let total = s.shlink.len();
    Json(json!({"shortUrls": {"data": data, "pagination": {
        "currentPage": page, "pagesCount": total.div_ceil(per_page), "itemsPerPage": per_page,
        "itemsInCurrentPage": data.len(), "totalItems": total}}}))
    .into_response()
}

async fn shlink_visits(
    State(s): State<Arc<Recorded>>,
    Path(code): Path<String>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    if header(&headers, "x-api-key") != KEY {
        return shlink_denied();
    }
    s.requests.fetch_add(1, Ordering::Relaxed);
    // Only the link on the default domain has visits; Shlink takes the default domain's name
    // for it as well as no `domain` at all.
    let domain = params.get("domain").map_or("s.old.example", String::as_str);
    if code == "shl-one" && domain == "s.old.example" {
        return Json(load("shlink-visits-shl-one.json")).into_response();
    }
    Json(
        json!({"visits": {"data": [], "pagination": {"currentPage": 1, "pagesCount": 0,
        "itemsPerPage": 5000, "itemsInCurrentPage": 0, "totalItems": 0}}}),
    )
    .into_response()
}

async fn kutt_list(State(s): State<Arc<Recorded>>, headers: HeaderMap, params: Params) -> Response {
    if header(&headers, "x-api-key") != KEY {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "Unauthorized"})),
        )
            .into_response();
    }
    let limit = number(&params, "limit", 10);
    let skip = number(&params, "skip", 0);
    if let Some(limited) = rate_limited(&s, skip > 0 && skip == limit) {
        return limited;
    }
    let data: Vec<Value> = s.kutt.iter().skip(skip).take(limit).cloned().collect();
    Json(json!({"limit": limit, "skip": skip, "total": s.kutt.len(), "data": data})).into_response()
}

fn bitly_denied(headers: &HeaderMap) -> Option<Response> {
    (header(headers, "authorization") != format!("Bearer {KEY}")).then(|| {
        let body = json!({"message": "FORBIDDEN", "resource": "bitlinks", "description": "You are currently forbidden to access this resource."});
        (StatusCode::FORBIDDEN, Json(body)).into_response()
    })
}

async fn bitly_list(
    State(s): State<Arc<Recorded>>,
    Path(group): Path<String>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    if let Some(denied) = bitly_denied(&headers) {
        return denied;
    }
    assert_eq!(group, "Bg1aBcDeF2");
    let second = params.contains_key("search_after");
    if let Some(limited) = rate_limited(&s, second) {
        return limited;
    }
    let mut page = load(if second {
        "bitly-page-2.json"
    } else {
        "bitly-page-1.json"
    });
    if page["pagination"]["next"] == "NEXT" {
        page["pagination"]["next"] = json!(format!(
            "{}/v4/groups/{group}/bitlinks?size=2&search_after=eyJpZCI6Imdv",
            s.base
        ));
    }
    Json(page).into_response()
}

async fn bitly_clicks(
    State(s): State<Arc<Recorded>>,
    Path((domain, code)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = bitly_denied(&headers) {
        return denied;
    }
    s.requests.fetch_add(1, Ordering::Relaxed);
    let total = match (domain.as_str(), code.as_str()) {
        ("bit.ly", "3xYz9Ab") => 321,
        ("go.brand.example", "summer") => 45,
        _ => 0,
    };
    Json(json!({"unit_reference": "2024-01-01T00:00:00+0000", "total_clicks": total, "units": -1, "unit": "month"}))
        .into_response()
}

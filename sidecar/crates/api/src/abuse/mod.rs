//! The public "report abuse" address (issue 79): `POST /report-abuse` (a domain's home page's
//! form, the code or short URL typed in `code`) and `POST /report-abuse/{code}` (the warning
//! page's button, which posts its own path with `?report`; nginx rewrites it here). Outside the
//! API key: any visitor may report. What is kept is the code and the host it came to, for the
//! operator's queue (`shortlink-sidecar abuse-reports`): never a target (a report tells nothing
//! of where a link goes) and never the visitor's address.
//!
//! Limited per client address in this sidecar's memory, as unknown callback tokens are
//! ([`crate::deliveries::callbacks::strikes`]): [`BURST`] reports at once, then one per
//! [`INTERVAL`]; a full table shares one budget among the addresses it cannot hold.

mod budgets;

use crate::per_address::Client;
use crate::{AppState, Error, Path, Result};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Form, Router};
pub use budgets::{ReportBudgets, BURST, INTERVAL};
use serde::Deserialize;
use shortlink_store::audit::RequestInfo;
use shortlink_store::AbuseReport;
use std::time::Instant;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/report-abuse", post(report_typed))
        .route("/report-abuse/{code}", post(report_page))
}

/// The home page's form: a code or a whole short URL.
#[derive(Debug, Deserialize)]
pub struct ReportForm {
    #[serde(default)]
    code: String,
}

async fn report_typed(
    State(state): State<AppState>,
    Extension(info): Extension<RequestInfo>,
    headers: HeaderMap,
    Form(form): Form<ReportForm>,
) -> Result<Response> {
    // A pasted short URL: its last path segment, without a query.
    let typed = form.code.trim();
    let code = typed.split(['?', '#']).next().unwrap_or_default();
    let code = code
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    report(&state, &info, &headers, code).await
}

async fn report_page(
    State(state): State<AppState>,
    Extension(info): Extension<RequestInfo>,
    headers: HeaderMap,
    Path(code): Path<String>,
) -> Result<Response> {
    report(&state, &info, &headers, &code).await
}

async fn report(
    state: &AppState,
    info: &RequestInfo,
    headers: &HeaderMap,
    code: &str,
) -> Result<Response> {
    if !shortcode::is_imported_charset(code.as_bytes()) {
        return Err(Error::invalid(
            "invalid_code",
            "code: give the short link's code or its whole address",
        ));
    }
    state
        .abuse_reports
        .spend(Client::of(info.client_addr.as_deref()), Instant::now())?;
    // nginx names the host the visitor used; a value it could not have sent is left out.
    let host = (headers.get("x-shortlink-host"))
        .and_then(|value| value.to_str().ok())
        .filter(|host| host.len() <= 253 && host.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_default();
    let report = AbuseReport {
        code: code.to_owned(),
        host: host.to_ascii_lowercase(),
        reported_at: shortlink_store::now(),
    };
    state.links.storage().record_abuse_report(&report).await?;
    let page = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
        <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
        <meta name=\"robots\" content=\"noindex\"><title>Reported</title></head>\
        <body><h1>Thank you</h1><p>The link was reported to the people who run this service, \
        who will look at it.</p></body></html>\n";
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response())
}

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

use crate::deliveries::callbacks::strikes::Client;
use crate::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use crate::{AppState, Error, Path, Result};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Form, Router};
use serde::Deserialize;
use shortlink_core::sync::LockOrRecover;
use shortlink_store::audit::RequestInfo;
use shortlink_store::AbuseReport;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Reports an address may send at once.
pub const BURST: u32 = 5;
/// Then one per this long.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 65_536;

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

/// Each address's reports, as GCRA's "theoretical arrival time": when its budget would be whole
/// again.
#[derive(Debug, Default)]
pub struct ReportBudgets {
    full_at: Mutex<HashMap<Client, Instant>>,
}

impl ReportBudgets {
    /// Spends one report of `client`'s, or 429 when it has none left now.
    fn spend(&self, client: Client, now: Instant) -> Result<()> {
        let mut full_at = self.full_at.lock_or_recover();
        if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            full_at.retain(|_, at| *at > now);
        }
        let client = if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            Client::Shared
        } else {
            client
        };
        let at = full_at.entry(client).or_insert(now);
        let owed = at.saturating_duration_since(now);
        let allowed = INTERVAL * (BURST - 1);
        if owed > allowed {
            return Err(refused(owed - allowed, owed));
        }
        *at = (*at).max(now) + INTERVAL;
        Ok(())
    }
}

fn refused(retry: Duration, reset: Duration) -> Error {
    Error::RateLimited(Box::new(Throttled {
        code: "rate_limited",
        message: format!(
            "too many reports from this address ({BURST} at once, then one per {} s); retry later",
            INTERVAL.as_secs()
        ),
        headers: RateLimitHeaders {
            policy: "abuse-reports",
            quota: u64::from(BURST),
            window: Some((INTERVAL * BURST).as_secs()),
            remaining: 0,
            reset: Some(whole_seconds(reset)),
        },
        retry_after: Some(whole_seconds(retry).max(1)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_burst_then_one_per_interval() {
        let budgets = ReportBudgets::default();
        let now = Instant::now();
        let visitor = Client::of(Some("203.0.113.9"));
        for _ in 0..BURST {
            assert!(budgets.spend(visitor, now).is_ok());
        }
        assert!(budgets.spend(visitor, now).is_err());
        assert!(budgets.spend(visitor, now + INTERVAL).is_ok());
        assert!(budgets.spend(Client::of(Some("203.0.113.10")), now).is_ok());
    }
}

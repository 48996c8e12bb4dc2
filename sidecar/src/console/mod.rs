//! The operator console under `/console/` (issue 21): HTML pages for the people who run SMS
//! campaigns, served by the sidecar and reached only through nginx's internal API server (the
//! public redirect servers never route `/console/`).
//!
//! Technology: server-rendered HTML with [`maud`]. Its templates are Rust expressions compiled
//! into the binary and type-checked with the handlers, every interpolation is HTML-escaped
//! unless wrapped in `PreEscaped` (used only for SVG we draw ourselves), and there is no
//! template directory to ship or keep in step with the code (askama would have needed one, and
//! its errors point at generated code). Charts are SVG marks with HTML axes drawn here
//! ([`chart`]); the one stylesheet, the few lines of script (the copy button, the phone's table
//! labels) and the icon are files in `console/assets/` compiled in and served from
//! `/console/assets/`, so every page works with no internet access under
//! `Content-Security-Policy: default-src 'self'` (set on every console answer, errors included).
//! Every page fits a phone (issue 80): under 40em the navigation folds behind "Menu" and each
//! table becomes a card per row (`tests/tests/e2e/console_widths_browser.rs` checks each page).
//!
//! Sign-in takes an API key and opens a server-side session ([`session`]); each request re-reads
//! the key, so a revoked key or a changed role takes effect at once. A session may hold keys of
//! several workspaces and switch between them; an operator key's session sees the workspaces
//! ([`workspaces`]) and the audit log only. Every form carries the
//! session's CSRF token; a POST without it is refused (403 `invalid_csrf_token`) by the one
//! extractor every form handler takes ([`form`]), which also checks the role the form needs.

mod ab;
mod audit;
mod audit_changes;
mod bulk;
mod campaign_summary;
mod campaigns;
mod card;
mod chart;
mod compose;
mod detail;
mod domain_chart;
mod domains;
mod form;
mod funnel;
mod held;
mod import;
mod keys;
mod layout;
mod links;
mod not_found;
mod operator;
mod orphans;
mod overview;
mod page;
mod rule_form;
mod rules;
pub(crate) mod session;
mod sign_in;
mod subject_forms;
mod subjects;
mod totals;
mod visit_list;
mod webhooks;
mod workspace;
mod workspaces;

use page::PageError;

use axum::extract::DefaultBodyLimit;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Redirect, Response};
use axum::routing::{any, get, post};
use axum::{Extension, Router};
use shortlink_api::{AppState, Error};
use std::sync::Arc;

/// Largest bulk upload (the batch API itself streams without limit; the console holds the file).
pub const MAX_UPLOAD_BYTES: usize = 4 * 1024 * 1024;

/// The console's routes, with their full paths (merged, not nested: `/console/` itself is the
/// overview, and nesting would leave the trailing slash unrouted).
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/", get(overview::page))
        .route(
            "/console/sign-in",
            get(sign_in::sign_in_page).post(sign_in::sign_in),
        )
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/switch", post(sign_in::switch))
        .route(
            "/console/create",
            get(links::create_page).post(links::create),
        )
        .route("/console/links", get(links::list))
        .route("/console/links/{code}", get(detail::page))
        .route("/console/links/{code}/qr", get(detail::qr_file))
        .route("/console/links/{code}/ab", get(ab::link))
        .route("/console/links/{code}/edit", post(links::edit))
        .route(
            "/console/links/{code}/rules",
            get(rules::page).post(rules::save),
        )
        .route(
            "/console/links/{code}/rules/preview",
            post(rules::try_phone),
        )
        .route("/console/links/{code}/rules/form", post(rules::save_form))
        .route(
            "/console/links/{code}/card",
            get(card::page).post(card::save),
        )
        .route("/console/links/{code}/card/preview", post(card::preview))
        .route(
            "/console/links/{code}/revoke",
            get(links::revoke_confirm).post(links::revoke),
        )
        .route(
            "/console/bulk",
            get(bulk::page)
                .post(bulk::upload)
                .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES)),
        )
        .route("/console/bulk/{job}", get(bulk::progress))
        .route(
            "/console/import",
            get(import::page)
                .post(import::start)
                .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES)),
        )
        .route("/console/import/{job}", get(import::progress))
        .route(
            "/console/import/{job}/report.json",
            get(import::report_file),
        )
        .route("/console/compose", get(compose::page).post(compose::sample))
        .route("/console/compose/count", post(compose::count))
        .route("/console/bulk/{job}/results.csv", get(bulk::results))
        .route("/console/campaigns", get(campaigns::list))
        .route("/console/campaigns/totals", get(campaigns::totals))
        .route("/console/campaigns/ab", get(ab::campaign))
        .route("/console/campaigns/{campaign}/funnel", get(funnel::page))
        .route("/console/campaigns/recipients.csv", get(campaigns::export))
        .route("/console/domains", get(domains::page))
        .route(
            "/console/not-found",
            get(not_found::page).post(not_found::change),
        )
        .route("/console/domains/{domain}/{action}", post(domains::change))
        .route(
            "/console/webhooks",
            get(webhooks::page).post(webhooks::create),
        )
        .route("/console/webhooks/{id}", get(webhooks::detail))
        .route("/console/webhooks/{id}/replay", post(webhooks::replay))
        .route("/console/webhooks/{id}/delete", post(webhooks::delete))
        .route("/console/audit", get(audit::page))
        .route("/console/held", get(held::page))
        .route("/console/held/{code}/release", post(held::release))
        .route("/console/privacy", get(subjects::page))
        .route("/console/privacy/export", post(subject_forms::export))
        .route("/console/privacy/erase", post(subject_forms::erase))
        .route("/console/workspace", get(workspace::page))
        .route("/console/workspace/keys", post(workspace::create_key))
        .route(
            "/console/workspace/keys/{id}/revoke",
            get(workspace::revoke_confirm).post(workspace::revoke),
        )
        .route(
            "/console/workspaces",
            get(workspaces::list).post(workspaces::create),
        )
        .route("/console/workspaces/{slug}", get(workspaces::detail))
        .route(
            "/console/workspaces/{slug}/change",
            post(workspaces::change),
        )
        .route(
            "/console/workspaces/{slug}/suspend",
            post(workspaces::suspend),
        )
        .route(
            "/console/workspaces/{slug}/delete",
            get(workspaces::delete_confirm).post(workspaces::delete),
        )
        .route(
            "/console/workspaces/{slug}/keys",
            post(workspaces::create_key),
        )
        .route(
            "/console/workspaces/{slug}/keys/{id}/revoke",
            get(workspaces::revoke_confirm).post(workspaces::revoke),
        )
        .route("/console/assets/console.css", get(layout::css))
        .route("/console/assets/console.js", get(layout::js))
        .route("/console/assets/icon.svg", get(layout::icon))
        // Unknown console paths: an HTML 404 under the same headers, not the API's JSON one.
        .route(
            "/console/{*rest}",
            any(|| async {
                PageError(Error::Request {
                    status: StatusCode::NOT_FOUND,
                    code: "not_found",
                    message: "there is no such console page".into(),
                })
            }),
        )
        // Sessions, uploads and totals: the console's own state, one per router (per app).
        .layer(Extension(Arc::new(session::Sessions::default())))
        .layer(Extension(Arc::new(bulk::Jobs::default())))
        .layer(Extension(Arc::new(import::Imports::default())))
        .layer(Extension(Arc::new(totals::Totals::default())))
        .layer(axum::middleware::map_response(secure_headers))
}

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    // A page may widen it for itself (the card page loads the card's image).
    headers
        .entry(CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(page::CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    response
}

//! The sidecar's Prometheus metrics (`GET /metrics`, on the internal API server only; the public
//! server never routes it). Counters and histograms are recorded where things happen, through
//! the `metrics` facade; gauges that are cheaper to read than to keep (pool use, projection
//! marker, stream length and consumer lag, visits processed) are sampled at scrape time, by the
//! endpoint (`http::metrics`), which can reach the parts that know them.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use shortlink_wire::keys::EVENT_STREAM;
use std::sync::OnceLock;
use std::time::Instant;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets in seconds: a create is about a millisecond, a batch chunk up to seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Rollup delay buckets in seconds: from a consumer keeping up (well under a second) to one
/// catching up after an outage (an hour).
const ROLLUP_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
];

/// Installs the recorder once per process (tests start several apps in one process).
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
            .expect("buckets are not empty")
            // A full name wins over the suffix.
            .set_buckets_for_metric(
                Matcher::Full("shortlink_rollup_delay_seconds".into()),
                &ROLLUP_BUCKETS,
            )
            .expect("buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was installed already; /metrics stays empty");
        }
        describe();
        handle
    })
}

/// Help lines (promtool wants one per family).
fn describe() {
    describe_gauge!(
        "shortlink_domain_health",
        "1 for each short domain's current health state (healthy, degraded, suspected-blocked, unreachable)."
    );
    describe_gauge!(
        "shortlink_domain_certificate_expiry_timestamp_seconds",
        "notAfter (Unix time) of the certificate the edge presents for each short domain; NaN when none was read."
    );
    describe_gauge!(
        "shortlink_domain_drained",
        "1 while a short domain takes no new links (drained by the health check or by hand), else 0."
    );
    describe_gauge!(
        "shortlink_domain_degraded_issuing",
        "1 while every issuing domain of a workspace is drained (its links go out on the healthiest), else 0."
    );
    describe_counter!(
        "shortlink_domain_drain_transitions_total",
        "Drain state changes of each short domain, by the state entered and who made it (health, operator)."
    );
    describe_counter!(
        "shortlink_domain_receipt_drains_total",
        "Drains of each short domain made on its delivery receipts (a carrier rejecting it far more than the workspace's other domains)."
    );
    describe_gauge!(
        "shortlink_carrier_dead_route",
        "1 while a carrier fails every domain of a workspace in its delivery receipts (a dead route: nothing drained), else 0."
    );
    describe_counter!(
        "shortlink_links_issued_total",
        "New links handed out, by the short domain they were issued on."
    );
    describe_counter!(
        "shortlink_http_requests_total",
        "API requests by route template, method and status."
    );
    describe_histogram!(
        "shortlink_http_request_duration_seconds",
        Unit::Seconds,
        "API request latency by route template and method."
    );
    describe_counter!(
        "shortlink_links_created_total",
        "Links created, by single create or batch item."
    );
    describe_counter!(
        "shortlink_api_errors_total",
        "Errors answered (whole requests and batch items), by error code."
    );
    describe_histogram!(
        "shortlink_write_duration_seconds",
        Unit::Seconds,
        "A create's SQL insert and Redis write-through."
    );
    describe_gauge!(
        "shortlink_db_pool_connections",
        "Database pool connections, open and idle, per pool."
    );
    describe_gauge!(
        "shortlink_projection_complete",
        "1 while the projection marker says Redis holds every link."
    );
    describe_gauge!(
        "shortlink_events_stream_length",
        "Entries in the sl:events stream."
    );
    describe_gauge!(
        "shortlink_consumer_lag_entries",
        "Entries of sl:events not yet delivered to the consumer group."
    );
    describe_gauge!(
        "shortlink_redis_up",
        "1 if the last scrape could read Redis."
    );
    describe_counter!(
        "shortlink_visits_processed_total",
        "Visits the consumer handled, by outcome."
    );
    describe_histogram!(
        "shortlink_rollup_delay_seconds",
        Unit::Seconds,
        "From the oldest visit of a stored batch to the commit of its rollups."
    );
    describe_counter!(
        "shortlink_events_read_total",
        format!("{EVENT_STREAM} entries the consumer read.")
    );
    describe_counter!(
        "shortlink_webhook_events_delivered_total",
        "Click webhook events a receiver acknowledged (2xx), per subscription."
    );
    describe_counter!(
        "shortlink_link_quarantines_total",
        "Links quarantined (a feed or a workspace's block list came to list a destination, or held \
         for review) and released (by an admin, the entry leaving its feed, a change of target), \
         per feed and event (quarantined, released)."
    );
    describe_counter!(
        "shortlink_orphan_visits_total",
        "Orphan visits (requests on a pool host no link answered, taps saved from trailing \
         punctuation, known links' 410s) read and stored, per kind."
    );
    describe_counter!(
        "shortlink_webhook_retries_total",
        "Click webhook POSTs that failed and will be retried, per subscription."
    );
    describe_counter!(
        "shortlink_webhook_events_failed_total",
        "Click webhook events given up on after the retry window (replayable), per subscription."
    );
    describe_counter!(
        "shortlink_rate_limited_total",
        "Requests and reservations refused by the per-key rate limit or a workspace quota, by limit."
    );
    describe_counter!(
        "shortlink_rate_limiter_errors_total",
        "Requests let through unlimited because the limits' Redis failed, by limit."
    );
    describe_gauge!(
        "shortlink_webhook_lag_seconds",
        "Age of the oldest click not yet delivered, per subscription this process delivers; 0 when caught up."
    );
}

/// Counts and times every request under its route template (never the raw path: codes and
/// campaigns would make a series each).
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    histogram!("shortlink_http_request_duration_seconds", "route" => route.clone(), "method" => method.clone())
        .record(started.elapsed());
    counter!("shortlink_http_requests_total", "route" => route, "method" => method, "status" => status)
        .increment(1);
    response
}

/// Links created: `via` is `single` or `batch`.
pub fn links_created(via: &'static str, n: u64) {
    counter!("shortlink_links_created_total", "via" => via).increment(n);
}

/// A new link handed out on `domain` (a host of the issuing list: bounded by nginx's config).
pub fn links_issued(domain: String) {
    counter!("shortlink_links_issued_total", "domain" => domain).increment(1);
}

/// An API error answered, by its code (`invalid_url`, `redis_unavailable`, ...).
pub fn api_error(code: &'static str) {
    counter!("shortlink_api_errors_total", "code" => code).increment(1);
}

/// The SQL insert and the Redis write-through of a create.
pub fn write_latency(store: &'static str, started: Instant) {
    histogram!("shortlink_write_duration_seconds", "store" => store).record(started.elapsed());
}

/// A visit batch and its rollups committed; `oldest_visit_ms` is its oldest visit's time.
pub fn rollup_delay(oldest_visit_ms: i64) {
    let now_ms = chrono::Utc::now().timestamp_millis();
    // A clock step on the edge can date a visit in the future: counted as no delay.
    let delay = (now_ms.saturating_sub(oldest_visit_ms)).max(0) as f64 / 1000.0;
    histogram!("shortlink_rollup_delay_seconds").record(delay);
}

/// An orphan visit of `kind` (a fixed name: `shortlink_wire::event::OrphanKind`) read and stored;
/// a redelivered one counts again (the stored counts do not).
pub fn orphan_visit(kind: &'static str) {
    counter!("shortlink_orphan_visits_total", "kind" => kind).increment(1);
}

/// A link quarantined or released (`event`) under `feed` (the operator's feeds and a few fixed
/// names: bounded series).
pub fn link_quarantine(feed: &str, event: &'static str) {
    counter!("shortlink_link_quarantines_total", "feed" => feed.to_owned(), "event" => event)
        .increment(1);
}

/// Click webhook events acknowledged by `subscription`'s receiver (ids: few, made by the API).
pub fn webhook_delivered(subscription: &str, n: u64) {
    counter!("shortlink_webhook_events_delivered_total", "subscription" => subscription.to_owned())
        .increment(n);
}

/// A click webhook POST that failed and will be retried.
pub fn webhook_retried(subscription: &str) {
    counter!("shortlink_webhook_retries_total", "subscription" => subscription.to_owned())
        .increment(1);
}

/// Click webhook events given up on after the retry window.
pub fn webhook_failed(subscription: &str, n: u64) {
    counter!("shortlink_webhook_events_failed_total", "subscription" => subscription.to_owned())
        .increment(n);
}

/// How old the oldest undelivered click of `subscription` is.
pub fn webhook_lag(subscription: &str, seconds: f64) {
    metrics::gauge!("shortlink_webhook_lag_seconds", "subscription" => subscription.to_owned())
        .set(seconds);
}

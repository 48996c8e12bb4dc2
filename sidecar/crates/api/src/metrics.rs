//! `GET /metrics` (internal API server only): what the recorders of [`shortlink_core::metrics`] hold, plus
//! the gauges sampled now from the parts that know them.

use super::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics::{counter, gauge};
use shortlink_visits::consumer::{self, ConsumerCounters, GROUP};
use shortlink_wire::keys::EVENT_STREAM;

/// `GET /metrics`.
pub async fn serve(State(state): State<AppState>) -> Response {
    sample(&state).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        shortlink_core::metrics::install().render(),
    )
        .into_response()
}

async fn sample(state: &AppState) {
    for (pool, size, idle) in state.links.storage().pool_use() {
        gauge!("shortlink_db_pool_connections", "pool" => pool, "state" => "open").set(size as f64);
        gauge!("shortlink_db_pool_connections", "pool" => pool, "state" => "idle").set(idle as f64);
    }
    match state
        .links
        .projection()
        .pipeline_state(EVENT_STREAM, GROUP)
        .await
    {
        Ok(pipeline) => {
            gauge!("shortlink_projection_complete").set(f64::from(u8::from(pipeline.marker)));
            gauge!("shortlink_events_stream_length").set(pipeline.stream_length as f64);
            if let Some(lag) = pipeline.lag {
                gauge!("shortlink_consumer_lag_entries").set(lag as f64);
            }
            gauge!("shortlink_redis_up").set(1.0);
        }
        Err(error) => {
            tracing::debug!(%error, "metrics: redis");
            gauge!("shortlink_redis_up").set(0.0);
        }
    }
    if let Some(c) = consumer::registered() {
        let get = ConsumerCounters::get;
        // Absolute values of the consumer's own counters (monotonic since start).
        for (outcome, value) in [
            ("inserted", get(&c.inserted)),
            ("duplicate", get(&c.duplicates)),
            ("invalid", get(&c.invalid)),
            ("ignored", get(&c.ignored)),
            ("no_link", get(&c.unowned)),
            ("failed", get(&c.failed)),
        ] {
            counter!("shortlink_visits_processed_total", "outcome" => outcome).absolute(value);
        }
        counter!("shortlink_events_read_total").absolute(get(&c.read));
    }
}

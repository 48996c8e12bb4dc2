//! Conversions (issue 54): taken by click id and by `code` + `ref`, idempotent by `event_id`
//! under concurrent retries, refused with their codes (storing nothing), in NDJSON batches, and
//! counted in the A/B results as the raw rows count them. Visits are stored through the visit
//! store, as the consumer stores them; their ids are the click ids.

mod ab;
mod arms;
mod cli;
mod console;
mod converters;
mod feed;
mod ingest;
mod rollups;

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};

pub const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
pub const CURL: &str = "curl/8.5.0";

/// A visit as the consumer makes it of one event: `rule` as the module names it (`1.0`).
pub fn visit(id: &str, code: &str, at_ms: i64, ip: &str, ua: &str, rule: Option<&str>) -> Visit {
    let t = at_ms.to_string();
    let mut fields = vec![
        ("c", code.to_owned()),
        ("t", t),
        ("ip", ip.to_owned()),
        ("ua", ua.to_owned()),
        ("host", "s.example".to_owned()),
    ];
    if let Some(rule) = rule {
        fields.push(("rule", rule.to_owned()));
    }
    let event = VisitEvent::from_fields(id.to_owned(), fields).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

/// The click a test's conversion follows: `1700000000001-0` on `code`, a second ago, from an
/// iPhone, no rule.
pub fn first_click(code: &str) -> Visit {
    visit(
        "1700000000001-0",
        code,
        now_ms() - 1000,
        "203.0.113.1",
        IPHONE,
        None,
    )
}

/// Another click on `code` (`1700000000002-0`), `days` ago, from another iPhone.
pub fn second_click(code: &str, days: i64) -> Visit {
    visit(
        "1700000000002-0",
        code,
        now_ms() - days * 86_400_000,
        "203.0.113.2",
        IPHONE,
        None,
    )
}

pub async fn store(app: &TestApp, visits: &[Visit]) {
    let store = app.visit_store().await;
    store.store_batch(visits, false).await.unwrap();
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub async fn post(app: &TestApp, body: &Value) -> (u16, Value) {
    status_and_json(app.api(reqwest::Method::POST, "/conversions").json(body)).await
}

pub async fn link(app: &TestApp, campaign: &str, recipient: &str) -> String {
    let link = app
        .create(
            json!({"url": "https://shop.example/spring", "campaign": campaign, "ref": recipient}),
        )
        .await;
    link["code"].as_str().unwrap().to_owned()
}

pub async fn conversion_rows(app: &TestApp) -> i64 {
    app.db.scalar("SELECT COUNT(*) FROM conversions").await
}

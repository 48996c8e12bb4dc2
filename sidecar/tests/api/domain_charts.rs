//! The console's Domains charts (issue 70), on every backend: the numbers the page draws (its
//! table of them) equal the visits stored at known minutes, human clicks per minute and domain
//! over the health window, a minute with no visit on any of the workspace's domains a gap and
//! one with only others' visits (or bots) a measured zero; the delivered rate where receipts
//! name a domain; another workspace's domains and visits never shown.

use crate::console::Browser;
use crate::conversions::{CURL, IPHONE};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

crate::on_each_backend!(the_domains_charts_show_each_domains_human_clicks_per_minute);

/// As nginx's API server sends them (see `workspaces/domains.rs`).
const LISTS: &str = "https://s.example [brand-a] https://a1.brand-a.example \
                     https://a0.brand-a.example [brand-b] https://b1.brand-b.example";
const POOL: &str = "s.example a1.brand-a.example a0.brand-a.example b1.brand-b.example";
const A0: &str = "a0.brand-a.example";
const A1: &str = "a1.brand-a.example";
const B1: &str = "b1.brand-b.example";

/// A visit as the consumer makes it of one event on `host`.
fn visit(
    id: String,
    code: &str,
    at_ms: i64,
    ua: &str,
    host: &str,
) -> shortlink_visit_enrich::Visit {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    let fields = [
        ("c", code),
        ("t", &at_ms.to_string()),
        ("ip", "203.0.113.9"),
        ("ua", ua),
        ("host", host),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(id, fields).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

/// The page's table of numbers: by row label (`HH:MM`), by column header, the cell's text.
fn numbers(page: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let table = page
        .split("<table class=\"domain-clicks\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no numbers table:\n{page}"));
    let table = &table[..table.find("</table>").unwrap()];
    let cells = |row: &str, tag: &str| -> Vec<String> {
        (row.split(&format!("<{tag} ")).skip(1))
            .map(|cell| {
                let text = &cell[cell.find('>').unwrap() + 1..];
                text[..text.find(&format!("</{tag}>")).unwrap()].to_owned()
            })
            .collect()
    };
    let (head, body) = table.split_once("<tbody>").unwrap();
    let headers = cells(head, "th");
    let mut rows = BTreeMap::new();
    for row in body.split("<tr>").skip(1) {
        let label = cells(row, "th").remove(0);
        let values = cells(row, "td");
        let by_column = (headers.iter().skip(1).cloned()).zip(values).collect();
        rows.insert(label, by_column);
    }
    rows
}

async fn domains_page(app: &TestApp, key: &str) -> String {
    let mut browser = Browser::new(app);
    assert_eq!(browser.sign_in(key).await.status(), 303);
    let request = (browser.request(Method::GET, "/console/domains"))
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", POOL);
    let answer = browser.send(request).await;
    assert_eq!(answer.status(), 200);
    answer.text().await.unwrap()
}

async fn the_domains_charts_show_each_domains_human_clicks_per_minute(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "viewer").await;
    // Made as nginx sends it: the sidecar knows brand A's domains (a receipt names one).
    let link = with_key(&app, &a, Method::POST, "/links")
        .header("x-shortlink-public-base", LISTS)
        .json(&json!({"url": "https://shop.brand-a.example/spring"}))
        .send()
        .await
        .unwrap();
    assert_eq!(link.status(), 201);
    let code = link.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();

    // (minutes before this one, domain, people, bots): a1 clicked all along, a0 until 6 minutes
    // ago, bots only on a0 12 minutes ago, brand B's domain 3 minutes ago.
    let minute = chrono::Utc::now().timestamp() / 60 * 60;
    let mut plan: Vec<(i64, &str, i64, i64)> = vec![(12, A0, 0, 2), (3, B1, 7, 0)];
    plan.extend((1..=10).map(|back| (back, A1, 3, 1)));
    plan.extend((6..=10).map(|back| (back, A0, 2, 0)));
    let mut visits = Vec::new();
    for (back, host, people, bots) in &plan {
        let start_ms = (minute - back * 60) * 1000;
        for i in 0..people + bots {
            let ua = if i < *people { IPHONE } else { CURL };
            let id = format!("{host}-{back}-{i}");
            visits.push(visit(id, &code, start_ms + i * 7_000, ua, host));
        }
    }
    app.visit_store()
        .await
        .store_batch(&visits, false)
        .await
        .unwrap();

    // Two messages on a1 ended 4 minutes ago, one delivered.
    let at = chrono::DateTime::from_timestamp(minute - 4 * 60 + 10, 0).unwrap();
    for (id, state) in [("m1", "delivered"), ("m2", "failed")] {
        let receipt = json!({"message_id": id, "state": state, "at": at.to_rfc3339(),
            "short_url": format!("https://{A1}/{code}")});
        let (status, body) = crate::deliveries::post(&app, &a, &receipt).await;
        assert!(status == 201 || status == 200, "{status} {body}");
    }

    // What the visits say, per minute label, for one workspace's domains.
    let expected = |domains: &[&str]| {
        let mut measured = BTreeSet::new();
        let mut clicks: BTreeMap<(String, &str), i64> = BTreeMap::new();
        for (back, host, people, _) in plan.iter().filter(|p| domains.contains(&p.1)) {
            let label = chrono::DateTime::from_timestamp(minute - back * 60, 0)
                .unwrap()
                .format("%H:%M")
                .to_string();
            measured.insert(label.clone());
            *clicks.entry((label, *host)).or_default() += people;
        }
        (measured, clicks)
    };
    let check = |page: &str, domains: &[&str]| {
        let table = numbers(page);
        assert!(table.len() >= 30, "the 30-minute window: {table:?}");
        let (measured, clicks) = expected(domains);
        assert!(
            measured.iter().all(|label| table.contains_key(label)),
            "{table:?}"
        );
        for (label, row) in &table {
            for domain in domains {
                let shown = &row[&format!("{domain} clicks")];
                let want = match measured.contains(label) {
                    true => clicks
                        .get(&(label.clone(), *domain))
                        .copied()
                        .unwrap_or(0)
                        .to_string(),
                    false => "—".to_owned(),
                };
                assert_eq!(shown, &want, "{domain} at {label}");
            }
        }
        table
    };

    let page = domains_page(&app, &a).await;
    let table = check(&page, &[A1, A0]);
    // a0's measured zero after its clicks stopped, a gap where nobody clicked at all.
    let label = |back: i64| {
        chrono::DateTime::from_timestamp(minute - back * 60, 0)
            .unwrap()
            .format("%H:%M")
            .to_string()
    };
    assert_eq!(table[&label(2)][&format!("{A0} clicks")], "0");
    assert_eq!(
        table[&label(12)][&format!("{A1} clicks")],
        "0",
        "bots only: measured"
    );
    assert_eq!(table[&label(11)][&format!("{A1} clicks")], "—");
    // The delivered rate: a1's messages only.
    assert_eq!(table[&label(4)][&format!("{A1} delivered")], "1 of 2");
    assert!(!table[&label(4)].contains_key(&format!("{A0} delivered")));
    assert_eq!(
        page.matches("<figure class=\"chart domain-chart\"").count(),
        2,
        "{page}"
    );
    assert!(
        page.contains("polyline class=\"rate\""),
        "a1's delivered rate is drawn"
    );
    assert!(!page.contains(B1), "brand B's domain on brand A's page");

    let page = domains_page(&app, &b).await;
    let table = check(&page, &[B1]);
    assert_eq!(table[&label(3)][&format!("{B1} clicks")], "7");
    for theirs in [A0, A1] {
        assert!(
            !page.contains(theirs),
            "brand A's {theirs} on brand B's page"
        );
    }
    assert!(
        !page.contains("polyline class=\"rate\""),
        "no receipt names b1"
    );
}

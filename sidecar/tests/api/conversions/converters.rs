//! The converting-visitor counts stay exact when one visitor converts under several names: in
//! one batch, in later batches, and in batches stored at once (PostgreSQL keeps one
//! `ab_converters` row per visitor of an arm with the names they converted under, migration
//! 20261126000059; SQLite and MariaDB a row per name and one for every name).

use super::*;

crate::on_each_backend!(converting_visitors_stay_exact_across_names_and_concurrent_batches,);

const NAMES: [Option<&str>; 4] = [None, Some("lead"), Some("purchase"), Some("signup")];

/// (rule, conversions, converting visitors) of each arm from the raw conversions, for `name` or
/// every name.
async fn raw(app: &TestApp, code: &str, name: Option<&str>) -> Vec<(String, i64, i64)> {
    let mut out = Vec::new();
    for rule in ["1.0", "1.1"] {
        let named = name.map_or(String::new(), |n| format!(" AND name = '{n}'"));
        let of = |what: &str| {
            format!(
                "SELECT {what} FROM conversions WHERE code = '{code}' AND rule = '{rule}'{named}"
            )
        };
        let conversions = app.db.scalar(&of("COUNT(*)")).await;
        let converting = app.db.scalar(&of("COUNT(DISTINCT visitor)")).await;
        out.push((rule.to_owned(), conversions, converting));
    }
    out
}

/// The same from the A/B result.
async fn answered(app: &TestApp, code: &str, name: Option<&str>) -> Vec<(String, i64, i64)> {
    let query = name.map_or(String::new(), |n| format!("?name={n}"));
    let result = app.get_json(&format!("/links/{code}/ab{query}")).await;
    let arms = result["arms"].as_array().unwrap();
    (["1.0", "1.1"].iter())
        .map(|rule| {
            let arm = arms.iter().find(|a| a["rule"] == json!(rule)).unwrap();
            let int = |field: &str| arm[field].as_i64().unwrap();
            (
                rule.to_string(),
                int("conversions"),
                int("converting_visitors"),
            )
        })
        .collect()
}

/// An NDJSON batch of (person, name, event id); every line stored.
fn batch(lines: &[(u32, &str, String)]) -> String {
    (lines.iter())
        .map(|(person, name, event)| {
            json!({"click_id": format!("17000000{person:05}-0"), "name": name, "event_id": event})
                .to_string()
                + "\n"
        })
        .collect()
}

async fn send(app: &TestApp, body: String) -> Vec<i64> {
    let answer = send_ndjson(app.api(reqwest::Method::POST, "/conversions"), body).await;
    (ndjson_lines(answer).await.iter())
        .map(|line| line["status"].as_i64().unwrap())
        .collect()
}

async fn converting_visitors_stay_exact_across_names_and_concurrent_batches(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    let people = 40u32;
    let visits: Vec<_> = (0..people)
        .map(|person| {
            let rule = if person % 2 == 0 { "1.0" } else { "1.1" };
            let ip = format!("198.51.100.{}", person + 1);
            let id = format!("17000000{person:05}-0");
            visit(&id, &code, now_ms() - 60_000, &ip, IPHONE, Some(rule))
        })
        .collect();
    store(&app, &visits).await;

    // One batch: everyone a lead; every third person also a purchase, in the same batch (one
    // visitor, two new names at once).
    let mut first = Vec::new();
    for person in 0..people {
        first.push((person, "lead", format!("l-{person}")));
        if person % 3 == 0 {
            first.push((person, "purchase", format!("p-{person}")));
        }
    }
    assert!(send(&app, batch(&first)).await.iter().all(|s| *s == 201));

    // Two batches at once, the same people under two other names: each visitor's row is
    // written by both.
    let purchases: Vec<_> = (0..people)
        .filter(|p| p % 3 != 0)
        .map(|p| (p, "purchase", format!("p-{p}")))
        .collect();
    let signups: Vec<_> = (0..people)
        .map(|p| (p, "signup", format!("s-{p}")))
        .collect();
    let (a, b) = tokio::join!(send(&app, batch(&purchases)), send(&app, batch(&signups)));
    assert!(a.iter().chain(&b).all(|s| *s == 201));

    // Later: some leads again (a visitor and a name already counted).
    let again: Vec<_> = (0..people)
        .step_by(4)
        .map(|p| (p, "lead", format!("l2-{p}")))
        .collect();
    assert!(send(&app, batch(&again)).await.iter().all(|s| *s == 201));

    for name in NAMES {
        let raw = raw(&app, &code, name).await;
        assert!(raw.iter().all(|(_, n, _)| *n > 0), "{name:?}: {raw:?}");
        assert_eq!(answered(&app, &code, name).await, raw, "{name:?}");
    }
    if backend == Backend::Postgres {
        // One converter row per visitor of an arm, whatever the names.
        let visitors = "SELECT COUNT(*) FROM (SELECT DISTINCT code, rule, visitor \
             FROM conversions) AS v";
        let rows = app.db.scalar("SELECT COUNT(*) FROM ab_converters").await;
        assert_eq!(rows, app.db.scalar(visitors).await);
    }
}

//! Orphan visits (issue 70): the module's events of requests no link answered, read by the real
//! consumer from the stream, listed per workspace (`GET /api/v1/visits/orphan`, its filters and
//! pages) and counted per domain and kind in `GET /api/v1/domains`. Whose each is comes with the
//! event (issue 77: the workspace nginx mapped the host to), so a sidecar that was never told
//! the hosts' workspaces answers as any other.

use super::*;
use reqwest::Method;
use shortlink_visits::consumer::{Consumer, ConsumerCounters};
use shortlink_wire::event::{Batch, OrphanKind, Visit};

crate::on_each_backend!(orphan_visits_are_listed_per_workspace_by_host_with_filters_and_pages);

const LISTS: &str = "https://s.example [brand-a] https://a1.brand-a.example";
const POOL: &str = "s.example a1.brand-a.example";

/// One stream entry of `events`: (host, its workspace as nginx maps it, kind, path, seconds
/// ago), as the module encodes them; workspace `""`: an event of a module that did not record it.
async fn orphans(app: &TestApp, events: &[(&str, &str, OrphanKind, &str, i64)]) {
    let now = chrono::Utc::now().timestamp_millis();
    let mut batch = Batch::default();
    for (host, workspace, kind, path, ago) in events {
        batch.push(&Visit {
            code: path.as_bytes(),
            time_ms: (now - ago * 1000) as u64,
            status: 404,
            ip: b"203.0.113.9",
            ua: b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148",
            host: host.as_bytes(),
            orphan: Some(*kind),
            workspace: workspace.as_bytes(),
            ..Default::default()
        });
    }
    queue_batch(app, &batch).await;
}

async fn consumer(app: &TestApp) -> Consumer {
    stream_consumer(app, "orphans").await
}

/// `?k=v&...`, encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    let mut encoded = url::form_urlencoded::Serializer::new(String::new());
    encoded.extend_pairs(pairs);
    format!("?{}", encoded.finish())
}

/// The paths of a page, and its `next`.
fn paths(page: &Value) -> (Vec<String>, Option<String>) {
    let paths = (page["visits"].as_array().unwrap().iter())
        .map(|v| v["path"].as_str().unwrap().to_owned())
        .collect();
    (paths, page["next"].as_str().map(str::to_owned))
}

async fn orphan_visits_are_listed_per_workspace_by_host_with_filters_and_pages(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let a = workspace_key(&app, &operator, "brand-a", "viewer").await;
    // No request has told this sidecar which workspace each host is (as after a restart, or
    // behind a balancer): the events say it.
    use OrphanKind::*;
    orphans(
        &app,
        &[
            ("a1.brand-a.example", "brand-a", BaseUrl, "/", 50),
            (
                "a1.brand-a.example",
                "brand-a",
                InvalidShortUrl,
                "/abc1234",
                40,
            ),
            (
                "a1.brand-a.example",
                "brand-a",
                Regular404,
                "/wp-login.php",
                30,
            ),
            (
                "a1.brand-a.example",
                "brand-a",
                Recovered,
                "/abc1234%E3%80%82",
                20,
            ),
            (
                "s.example",
                "default",
                InvalidShortUrl,
                "/defaults-typo",
                10,
            ),
            // A host the map names for no brand: nginx's `default default;`.
            ("stray.example", "default", Regular404, "/unclaimed", 5),
            // An older module's event, which names no workspace: nobody's but the operator's.
            ("a1.brand-a.example", "", Regular404, "/unattributed", 4),
            // Past the visits' retention (below).
            ("s.example", "default", Regular404, "/long-ago", 40 * 86_400),
        ],
    )
    .await;
    let mut consumer = consumer(&app).await;
    let counters = consumer.counters();
    consumer.drain().await.unwrap();
    assert_eq!(ConsumerCounters::get(&counters.orphans), 8);
    // Raw rows go with the raw visits' retention; the counts stay.
    let retention = std::time::Duration::from_secs(30 * 86_400);
    let store = app.visit_store().await;
    shortlink_visits::cleanup::delete_old_visits(store.as_ref(), Some(retention))
        .await
        .unwrap();

    let list = |key: &str, query: &str| {
        send_json(with_key(
            &app,
            key,
            Method::GET,
            &format!("/visits/orphan{query}"),
        ))
    };
    let all = list(&a, "").await;
    assert_eq!(
        paths(&all),
        (
            vec![
                "/".into(),
                "/abc1234".into(),
                "/wp-login.php".into(),
                "/abc1234%E3%80%82".into()
            ],
            None
        ),
        "{all}"
    );
    let first = &all["visits"][0];
    assert_eq!(first["kind"], "base_url");
    assert_eq!(first["domain"], "a1.brand-a.example");
    assert_eq!(first["device"], "mobile", "enriched: {first}");
    assert_eq!(first["status"], 404);

    let ours = list(API_KEY, "").await;
    assert_eq!(
        paths(&ours).0,
        ["/defaults-typo", "/unclaimed"],
        "the default's hosts only: {ours}"
    );
    let unattributed = "SELECT COUNT(*) FROM orphan_visits WHERE workspace = ''";
    assert_eq!(app.db.scalar(unattributed).await, 1, "stored, as nobody's");

    // Filters: kind, domain, time.
    let kind = list(&a, "?kind=regular_404").await;
    assert_eq!(paths(&kind).0, ["/wp-login.php"]);
    let other = list(&a, "?domain=s.example").await;
    assert_eq!(
        paths(&other).0,
        Vec::<String>::new(),
        "another's host: {other}"
    );
    let from = (chrono::Utc::now() - chrono::Duration::seconds(35)).to_rfc3339();
    let to = (chrono::Utc::now() - chrono::Duration::seconds(25)).to_rfc3339();
    let window = list(&a, &query(&[("from", &from), ("to", &to)])).await;
    assert_eq!(paths(&window).0, ["/wp-login.php"], "{window}");

    // Pages of two, resumed from `next`.
    let page = list(&a, "?limit=2").await;
    let (got, next) = paths(&page);
    assert_eq!(got, ["/", "/abc1234"]);
    let next = next.expect("a next page");
    let page = list(&a, &query(&[("limit", "2"), ("after", &next)])).await;
    let (got, next) = paths(&page);
    assert_eq!(got, ["/wp-login.php", "/abc1234%E3%80%82"]);
    let next = next.expect("maybe more");
    let last = list(&a, &query(&[("limit", "2"), ("after", &next)])).await;
    assert_eq!(paths(&last), (vec![], None));

    for bad in ["?kind=bogus", "?limit=0", "?after=nope"] {
        let answer = with_key(&app, &a, Method::GET, &format!("/visits/orphan{bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{bad}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_query", "{bad}: {body}");
    }

    // Counted per domain and kind, each workspace its own domains.
    let domains = send_json(with_key(&app, &a, Method::GET, "/domains")).await;
    let counts = &domains["orphan_visits"];
    assert_eq!(
        counts,
        &json!({"a1.brand-a.example": {"base_url": 1, "invalid_short_url": 1,
            "regular_404": 1, "recovered": 1}}),
        "{domains}"
    );
    let domains = send_json(with_key(&app, API_KEY, Method::GET, "/domains")).await;
    assert_eq!(
        domains["orphan_visits"],
        json!({"s.example": {"base_url": 0, "invalid_short_url": 1, "regular_404": 1,
            "recovered": 0}, "stray.example": {"base_url": 0, "invalid_short_url": 0,
            "regular_404": 1, "recovered": 0}}),
        "{domains}"
    );

    // The console's Domains page: the same counts and the latest paths, of its own hosts only.
    let (status, page) = console_domains_page(&app, &a, (LISTS, POOL)).await;
    assert_eq!(status, 200);
    assert!(page.contains("Orphan visits"), "{page}");
    let row = "<td>a1.brand-a.example</td><td class=\"num\">1</td><td class=\"num\">1</td>\
               <td class=\"num\">1</td><td class=\"num\">1</td>";
    assert!(page.contains(row), "no counts row {row}:\n{page}");
    assert!(page.contains("/wp-login.php"), "{page}");
    for theirs in ["/defaults-typo", "/unclaimed", "s.example"] {
        assert!(!page.contains(theirs), "shows {theirs}:\n{page}");
    }

    // A deleted workspace takes its orphan visits and counts; the others' stay.
    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let count = |table: &str, workspace: &str| {
        format!("SELECT COUNT(*) FROM {table} WHERE workspace = '{workspace}'")
    };
    for table in ["orphan_visits", "orphan_counts"] {
        assert_eq!(app.db.scalar(&count(table, "brand-a")).await, 0, "{table}");
        for kept in ["default", ""] {
            assert!(
                app.db.scalar(&count(table, kept)).await > 0,
                "{table} {kept:?}"
            );
        }
    }
}

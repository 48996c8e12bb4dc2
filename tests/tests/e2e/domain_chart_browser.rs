//! The Domains page's charts (issue 70) in a real browser through the real nginx: a domain
//! drained by hand after its clicks stopped shows the fall to zero after the drain marker, while
//! the other domain's clicks go on. The visits are queued on the stream as the module queues
//! them, with their times minutes in the past; the drain is made through the API and its moment
//! moved back in SQL (to 6½ minutes before the current minute), as the state another sidecar's
//! earlier drain left would read.
//! The screenshot goes with the console's, to `target/console-screenshots/`.

use serde_json::{json, Value};
use shortlink_e2e::browser::{self, sign_in};
use shortlink_e2e::{paths, System, API_KEY};
use std::time::{Duration, Instant};

const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
                        Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";

/// `people` phone visits of `code` on `host` in the minute starting `minute` (Unix s), in one
/// stream entry as the module packs them.
fn queue_visits(system: &System, code: &str, host: &str, minute: i64, people: i64) {
    let mut args: Vec<String> = ["XADD", "sl:events", "*"].map(str::to_owned).to_vec();
    for i in 0..people {
        let t = (minute * 1000 + i * 5_000).to_string();
        let ip = format!("198.51.100.{}", i + 1);
        for (k, v) in [
            ("c", code),
            ("t", &t),
            ("s", "302"),
            ("ip", &ip),
            ("ua", PHONE_UA),
            ("host", host),
        ] {
            args.extend([k.to_owned(), v.to_owned()]);
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let id = system.redis.cli(&args);
    assert!(id.contains('-'), "XADD: {id}");
}

/// What the browser sees of `domain`'s chart: the drain marker's x and label, the baseline's
/// y, the domain's own points and the other domain's.
const READ_CHART: &str = r#"
const [domain, other] = arguments;
const figure = document.querySelector(`figure.domain-chart[data-domain="${domain}"]`);
if (!figure) return null;
const marker = figure.querySelector('g.marker.drain');
const points = (selector) => [...figure.querySelectorAll(selector)].flatMap((line) =>
    line.getAttribute('points').trim().split(' ').map((xy) => xy.split(',').map(Number)));
return {
    marker_x: marker ? Number(marker.querySelector('line').getAttribute('x1')) : null,
    marker_title: marker ? marker.querySelector('title').textContent : '',
    marker_shown: marker ? marker.getBoundingClientRect().height > 0 : false,
    baseline: Number(figure.querySelector('line.grid').getAttribute('y1')),
    own: points(`polyline.clicks[data-domain="${domain}"]`),
    other: points(`polyline.peer[data-domain="${other}"]`),
};
"#;

/// A path no code has, tapped on s1.test.
const MISTYPED: &str = "/no-such-alias-9";

/// The orphan visits table's row of the path `arguments[0]`: its text and whether it is drawn.
const READ_ORPHAN: &str = r#"
const row = [...document.querySelectorAll('table.orphan-latest tbody tr')]
    .find(tr => tr.textContent.includes(arguments[0]));
return row ? { text: row.textContent, shown: row.getBoundingClientRect().height > 0 } : null;
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_domains_chart_shows_its_fall_and_the_drain_in_a_browser() {
    let system = tokio::task::spawn_blocking(|| {
        let mut system = System::start();
        // Checks (and the drain states read back from SQL) every 200 ms.
        system.restart_sidecar_with(&["--domain-health-every", "200ms"]);
        system
    })
    .await
    .unwrap();
    let system = std::sync::Arc::new(system);
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);

    // s1 clicked in each of the last 10 minutes, s2 until 7 minutes ago; then s2 drained.
    let setup = std::sync::Arc::clone(&system);
    let drained_at = tokio::task::spawn_blocking(move || {
        let system = setup;
        let code = system.create(json!({"url": "https://t.example/spring"}));
        let minute = chrono::Utc::now().timestamp() / 60 * 60;
        for back in 1..=10 {
            queue_visits(&system, &code, "s1.test", minute - back * 60, 3);
            if back >= 7 {
                queue_visits(&system, &code, "s2.test", minute - back * 60, 4);
            }
        }
        // A mistyped code tapped on s1: an orphan visit the same page lists.
        let mistyped = system.nginx.request(reqwest::Method::GET, "s1.test", MISTYPED);
        assert_eq!(mistyped.status(), 404);
        let api = system.api();
        let (status, body) = api.post("/domains/s2.test/drain", &json!({"reason": "carrier block"}));
        assert_eq!(status, 200, "{body}");
        // The drain's moment moved to the middle of the minute 7 minutes ago (after s2's last
        // clicks, in its first seconds): the row's time everywhere it appears.
        let row = system.sqlite("SELECT value FROM settings WHERE name LIKE 'drain:%' AND name NOT LIKE '%@%' AND value LIKE '%\"s2.test\"%'");
        let stored: Value = serde_json::from_str(&row).expect("the drain row");
        let since = stored["since"].as_str().expect("since").to_owned();
        let earlier = chrono::DateTime::from_timestamp(minute - 390, 0).unwrap();
        let earlier_text = earlier.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        system.sqlite(&format!(
                "UPDATE settings SET value = replace(value, '{since}', '{earlier_text}') \
                 WHERE value LIKE '%\"s2.test\"%'"
            ),
        );
        earlier
    })
    .await
    .unwrap();

    let chrome = browser::chrome(PHONE_UA, "MAP *.test 127.0.0.1").await;
    let c = &chrome.client;
    sign_in(c, &console, API_KEY).await;
    // Until the consumer stored the visits and the sidecar read the drain's moment back.
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        c.goto(&format!("{console}/domains")).await.unwrap();
        let seen = c
            .execute(READ_CHART, vec![json!("s2.test"), json!("s1.test")])
            .await
            .unwrap();
        let ready = seen["own"].as_array().is_some_and(|p| p.len() >= 8)
            && seen["marker_x"].as_f64().is_some_and(|x| x < 600.0);
        if ready || Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let page = c.source().await.unwrap();
    let marker_x = seen["marker_x"]
        .as_f64()
        .unwrap_or_else(|| panic!("no drain marker: {seen}\n{page}"));
    assert!(seen["marker_shown"].as_bool().unwrap(), "{seen}");
    let title = seen["marker_title"].as_str().unwrap();
    assert!(
        title.contains("drained by hand") && title.contains("carrier block"),
        "{title}"
    );
    assert!(
        title.contains(&drained_at.format("%H:%M:%S").to_string()),
        "{title}"
    );
    let baseline = seen["baseline"].as_f64().unwrap();
    let xy = |points: &Value| -> Vec<(f64, f64)> {
        (points.as_array().unwrap().iter())
            .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
            .collect()
    };
    let (own, other) = (xy(&seen["own"]), xy(&seen["other"]));
    let before: Vec<_> = own.iter().filter(|(x, _)| *x < marker_x).collect();
    let after: Vec<_> = own.iter().filter(|(x, _)| *x > marker_x).collect();
    assert!(
        before.iter().any(|(_, y)| *y < baseline - 1.0),
        "clicks before the drain: {seen}"
    );
    assert!(
        after.len() >= 5,
        "the minutes after the drain are drawn: {seen}"
    );
    assert!(
        after.iter().all(|(_, y)| (*y - baseline).abs() < 0.05),
        "zero after the drain: {seen}"
    );
    let other_after: Vec<_> = other.iter().filter(|(x, _)| *x > marker_x).collect();
    assert!(other_after.len() >= 5, "{seen}");
    assert!(
        other_after.iter().all(|(_, y)| *y < baseline - 1.0),
        "s1's clicks go on: {seen}"
    );
    // The drained domain's line stands out (its own colour), the other's does not.
    assert!(
        page.contains("class=\"clicks drained\" fill=\"none\" data-domain=\"s2.test\""),
        "{page}"
    );
    assert!(
        !page.contains("class=\"clicks drained\" fill=\"none\" data-domain=\"s1.test\""),
        "{page}"
    );

    // The orphan visits under the chart: the mistyped tap's row, drawn on screen.
    let deadline = Instant::now() + Duration::from_secs(30);
    let row = loop {
        let row = c.execute(READ_ORPHAN, vec![json!(MISTYPED)]).await.unwrap();
        if !row.is_null() || Instant::now() > deadline {
            break row;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.goto(&format!("{console}/domains")).await.unwrap();
    };
    let text = row["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no orphan row: {row}"));
    assert!(row["shown"].as_bool().unwrap(), "{row}");
    assert!(
        text.contains("s1.test") && text.contains("Unknown code"),
        "{text}"
    );

    let dir = paths::profile_dir()
        .parent()
        .expect("target/")
        .join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(dir.join("20-domains-chart-drained.png"), png).unwrap();
}

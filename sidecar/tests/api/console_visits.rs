//! A link's console page (issue 78, "shown where operators look… and why"): its four-way split
//! is the stats API's and each visit's verdict and reasons are the visit feed's, after a sweep
//! noticed afterwards corrected them, on every backend; the Domains page's split is the stats
//! API's `short_domain` breakdown; the visits are paged newest first; another workspace's
//! session never sees one of them.

use crate::conversions::{now_ms, IPHONE};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use serde_json::{json, Value};
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
use shortlink_visits::hindsight::Hindsight;

crate::on_each_backend!(the_link_page_s_verdicts_and_reasons_are_the_api_s);

const WHATSAPP: &str = "WhatsApp/2.23.20.0 A";

/// A visit as the consumer makes it of one event, to `host`.
pub(crate) fn visit(id: &str, code: &str, at_ms: i64, ip: &str, ua: &str, host: &str) -> Visit {
    let fields = [
        ("c", code),
        ("t", &at_ms.to_string()),
        ("ip", ip),
        ("ua", ua),
        ("host", host),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(id.to_owned(), fields.to_vec()).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

/// Judges a batch as the consumer does and stores it with its corrections; answers how many.
pub(crate) async fn consume(
    app: &TestApp,
    hindsight: &mut Hindsight,
    batch: &mut [Visit],
) -> usize {
    let store = app.visit_store().await;
    let facts = store.link_facts(&Hindsight::codes(batch)).await.unwrap();
    let corrections = hindsight.judge(batch, &facts);
    store
        .store_corrected(batch, &corrections, false)
        .await
        .unwrap();
    hindsight.keep(batch.to_vec());
    corrections.len()
}

/// A link made with `key`, one phone's visit of it stored: its code and the visit's id.
pub(crate) async fn link_with_one_visit(app: &TestApp, key: &str) -> (String, String) {
    let created = with_key(app, key, reqwest::Method::POST, "/links")
        .json(&json!({"url": "https://shop.example/a"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let code = created.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = format!("{}-0", now_ms());
    let mut batch = vec![visit(
        &id,
        &code,
        now_ms(),
        "192.0.2.1",
        IPHONE,
        "a.example",
    )];
    consume(app, &mut Hindsight::default(), &mut batch).await;
    (code, id)
}

/// The text a page shows in the element marked `data-<attribute>="<key>"`.
pub(crate) fn text_at(page: &str, attribute: &str, key: &str) -> String {
    let marker = format!("data-{attribute}=\"{key}\">");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("{marker} in {page}"))
        + marker.len();
    page[start..].chars().take_while(|c| *c != '<').collect()
}

/// The visits a link's page lists: (id, verdict, reason names), in its order.
pub(crate) fn listed(page: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    for part in page.split("<tr data-visit=\"").skip(1) {
        let id = &part[..part.find('"').unwrap()];
        let reasons = part.split("data-reasons=\"").nth(1).unwrap();
        let reasons = &reasons[..reasons.find('"').unwrap()];
        let names: Vec<&str> = reasons.split(',').filter(|r| !r.is_empty()).collect();
        rows.push(json!([id, text_at(page, "verdict", id), names]));
    }
    rows
}

/// The feed's click events of recipient `r`: (id, verdict, reason names), newest first.
pub(crate) async fn fed(app: &TestApp, r: &str) -> Vec<Value> {
    let answer = app
        .api(reqwest::Method::GET, &format!("/visits?ref={r}&limit=1000"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let mut events: Vec<Value> = (answer.text().await.unwrap().lines())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "click")
        .collect();
    // The page's order: newest first, the id deciding between visits of one instant.
    let key = |event: &Value| {
        let time = event["time"].as_str().unwrap();
        let time: chrono::DateTime<chrono::Utc> = time.parse().unwrap();
        std::cmp::Reverse((time, event["id"].as_str().unwrap().to_owned()))
    };
    events.sort_by_key(key);
    (events.iter())
        .map(|e| json!([e["id"], e["audience"], e["reasons"]]))
        .collect()
}

async fn the_link_page_s_verdicts_and_reasons_are_the_api_s(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut codes = Vec::new();
    for i in 0..6 {
        let body =
            json!({"url": "https://shop.example/", "campaign": "spring", "ref": format!("r{i}")});
        codes.push(app.create(body).await["code"].as_str().unwrap().to_owned());
    }
    let mut hindsight = Hindsight::default();
    // After the links' creation: the page's range starts at it.
    let t = now_ms();
    // One block fetches four recipients' links (people so far), WhatsApp draws the first one's
    // card, a person taps the sixth.
    let mut first: Vec<Visit> = (0..4)
        .map(|i| {
            let ip = format!("198.51.100.{}", 10 + i);
            visit(
                &format!("{t}-{i}"),
                &codes[i],
                t + i as i64 * 100,
                &ip,
                IPHONE,
                "s.example",
            )
        })
        .collect();
    first.push(visit(
        &format!("{t}-7"),
        &codes[0],
        t + 50,
        "203.0.113.5",
        WHATSAPP,
        "s.example",
    ));
    first.push(visit(
        &format!("{t}-9"),
        &codes[5],
        t + 60,
        "192.0.2.77",
        IPHONE,
        "s.example",
    ));
    assert_eq!(consume(&app, &mut hindsight, &mut first).await, 0);
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page(&format!("/console/links/{}", codes[0])).await;
    let before = json!([
        [format!("{t}-7"), "preview", ["agent"]],
        [format!("{t}-0"), "human", []]
    ]);
    assert_eq!(json!(listed(&page)), before, "{page}");

    // The fifth recipient's link makes it a sweep: the four stored visits become scanners.
    let ip = "198.51.100.99";
    let mut second = vec![visit(
        &format!("{}-0", t + 1),
        &codes[4],
        t + 400,
        ip,
        IPHONE,
        "s.example",
    )];
    assert_eq!(consume(&app, &mut hindsight, &mut second).await, 4);

    let page = browser.page(&format!("/console/links/{}", codes[0])).await;
    let shown = listed(&page);
    assert_eq!(shown, fed(&app, "r0").await, "{page}");
    let after = json!([
        [format!("{t}-7"), "preview", ["agent"]],
        [format!("{t}-0"), "scanner", ["sweep"]]
    ]);
    assert_eq!(json!(shown), after);
    assert!(page.contains("preview agent (WhatsApp)"), "{page}");
    assert!(page.contains("sweep of the campaign"), "{page}");
    // The four numbers above the list are the link's stats.
    let stats = app.get_json(&format!("/links/{}/stats", codes[0])).await;
    for key in ["humans", "previews", "scanners", "bots"] {
        let number = text_at(&page, "audience", key)
            .trim()
            .parse::<i64>()
            .unwrap();
        assert_eq!(
            number,
            stats["totals"][key].as_i64().unwrap(),
            "{key}: {stats}"
        );
    }
    assert_eq!(stats["totals"]["scanners"], 1, "{stats}");
    assert_eq!(stats["totals"]["humans"], 0, "{stats}");

    // The Domains page splits the workspace's visits as the stats API's breakdown does.
    let all = app.get_json("/stats?top=100").await;
    let entry = (all["breakdowns"]["short_domain"].as_array().unwrap().iter())
        .find(|e| e["value"] == "s.example")
        .unwrap_or_else(|| panic!("{all}"))
        .clone();
    assert_eq!(
        [&entry["humans"], &entry["previews"], &entry["scanners"]],
        [1, 1, 5]
    );
    let page = browser.page("/console/domains").await;
    for key in ["humans", "previews", "scanners", "bots"] {
        let number = text_at(&page, &format!("domain-{key}"), "s.example");
        assert_eq!(
            number.parse::<i64>().unwrap(),
            entry[key].as_i64().unwrap(),
            "{key}"
        );
    }
}

/// Fifty visits a page, newest first; the older page goes on after the last one shown, and a
/// `before` that is no visit of the list is refused.
#[tokio::test]
async fn a_link_s_visits_are_paged_newest_first() {
    let app = spawn_app(Backend::Sqlite).await;
    let link = app.create(json!({"url": "https://shop.example/"})).await;
    let code = link["code"].as_str().unwrap();
    let t = now_ms();
    // 53 visits, two of them at the same millisecond: the id orders them.
    let mut batch: Vec<Visit> = (0..53)
        .map(|i| {
            let at = t + (i as i64).min(51);
            visit(
                &format!("{t}-{i:02}"),
                code,
                at,
                "192.0.2.1",
                IPHONE,
                "s.example",
            )
        })
        .collect();
    consume(&app, &mut Hindsight::default(), &mut batch).await;
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let first = listed(&browser.page(&format!("/console/links/{code}")).await);
    assert_eq!(first.len(), 50);
    assert_eq!(first[0][0], format!("{t}-52"));
    let page = browser.page(&format!("/console/links/{code}")).await;
    let next = page.split("rel=\"next\" href=\"").nth(1).unwrap();
    let next = next[..next.find('"').unwrap()].replace("&amp;", "&");
    let second = listed(&browser.page(&next).await);
    let ids: Vec<&Value> = first.iter().chain(&second).map(|row| &row[0]).collect();
    let expected: Vec<Value> = (0..53)
        .rev()
        .map(|i| json!(format!("{t}-{i:02}")))
        .collect();
    assert_eq!(ids, expected.iter().collect::<Vec<_>>());
    let refused = browser
        .get(&format!("/console/links/{code}?before=nonsense"))
        .await;
    assert_eq!(refused.status(), 400);
}

/// A link of workspace A: its visits show to A's session only; another workspace's session
/// gets the same 404 as for no link, and its Domains page counts none of them.
#[tokio::test]
async fn another_workspace_never_sees_a_link_s_visits() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let a_key = workspace_key(&app, &operator, "brand-a", "admin").await;
    let (code, id) = link_with_one_visit(&app, &a_key).await;

    let mut a = crate::console::Browser::new(&app);
    a.sign_in(&a_key).await;
    assert!(a
        .page(&format!("/console/links/{code}"))
        .await
        .contains(&id));
    let a_domains = a.page("/console/domains").await;
    assert_eq!(text_at(&a_domains, "domain-humans", "a.example"), "1");

    let mut b = crate::console::Browser::new(&app);
    b.sign_in(API_KEY).await;
    let theirs = b.get(&format!("/console/links/{code}")).await;
    let none = b.get("/console/links/no-such-code").await;
    assert_eq!(theirs.status(), 404);
    assert_eq!(none.status(), 404);
    assert!(!theirs.text().await.unwrap().contains(&id));
    let b_domains = b.page("/console/domains").await;
    assert!(!b_domains.contains("a.example"), "{b_domains}");
}

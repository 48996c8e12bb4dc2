//! `GET /api/v1/links/{code}/visits` (issue 78, "shown where operators look… and why"): one
//! link's visits with the verdicts and reasons the visit feed and the console's link page give
//! them, a sweep's correction included, on every backend; a hosting visit's reason names its
//! autonomous system from the bundled ASN table; paged newest first, filtered by verdict, inside
//! the key's workspace; bad input refused naming its field.

use crate::console_visits::{consume, fed, link_with_one_visit, listed, visit};
use crate::conversions::{now_ms, IPHONE};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
use shortlink_visits::hindsight::Hindsight;
use shortlink_wire::network::{AsnTable, HostingList, Networks};
use std::path::PathBuf;

crate::on_each_backend!(a_link_s_visits_are_the_feed_s_and_the_console_s);

const WHATSAPP: &str = "WhatsApp/2.23.20.0 A";

/// The bundled ASN table (`scripts/fetch-geo`), as `--geoip-asn-dir` names it.
fn asn_dir() -> PathBuf {
    shortlink_e2e::paths::fetched_geo_dir().join("asn")
}

/// An address of Amazon's AS16509 in the bundled table: (the address, that range's line).
fn amazon_address() -> (String, String) {
    let table = std::fs::read_to_string(asn_dir().join("asn-ipv4-num.csv")).unwrap();
    let line = (table.lines())
        .find(|line| line.split(',').nth(2) == Some("16509"))
        .expect("AS16509 in the bundled table");
    let first: u32 = line.split(',').next().unwrap().parse().unwrap();
    (
        std::net::Ipv4Addr::from(first + 7).to_string(),
        line.to_owned(),
    )
}

/// A visit from `ip` as a consumer reading the ASN table judges it: `ip`'s range is in the
/// table it is given (that range alone: the rest of the bundled table would only slow the test).
fn hosting_visit(id: &str, code: &str, at_ms: i64, ip: &str, range_line: &str) -> Visit {
    let mut fields = range_line.split(',');
    let mut next = || fields.next().unwrap().parse::<u32>().unwrap();
    let range = (next(), next(), next());
    let networks = Networks::new(AsnTable::from_v4(vec![range]), HostingList::shipped());
    let fields = [
        ("c", code),
        ("t", &at_ms.to_string()),
        ("ip", ip),
        ("ua", IPHONE),
        ("host", "s.example"),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(id.to_owned(), fields.to_vec()).unwrap();
    let enricher = Enricher::new(GeoDb::disabled(), false).with_networks(networks);
    enricher.enrich(&event)
}

/// The API's page of `code`'s visits at `query` (`?…`).
async fn page(app: &TestApp, code: &str, query: &str) -> Value {
    app.get_json(&format!("/links/{code}/visits{query}")).await
}

/// A page's visits as the console's and the feed's tests compare them: (id, verdict, codes).
fn triples(page: &Value) -> Vec<Value> {
    let visits = page["visits"].as_array().unwrap();
    (visits.iter())
        .map(|v| {
            let codes: Vec<&Value> = (v["reasons"].as_array().unwrap().iter())
                .map(|r| &r["code"])
                .collect();
            json!([v["id"], v["verdict"], codes])
        })
        .collect()
}

async fn a_link_s_visits_are_the_feed_s_and_the_console_s(backend: Backend) {
    let asn = asn_dir();
    let app = spawn_app_with(backend, &["--geoip-asn-dir", asn.to_str().unwrap()]).await;
    let mut codes = Vec::new();
    for i in 0..6 {
        let body =
            json!({"url": "https://shop.example/", "campaign": "spring", "ref": format!("r{i}")});
        codes.push(app.create(body).await["code"].as_str().unwrap().to_owned());
    }
    let (amazon, range) = amazon_address();
    let mut hindsight = Hindsight::default();
    let t = now_ms();
    // One block fetches four recipients' links (people so far), WhatsApp draws the first one's
    // card, a cloud address with a person's agent fetches it too.
    let mut first: Vec<Visit> = (0..4)
        .map(|i| {
            let ip = format!("198.51.100.{}", 10 + i);
            let id = format!("{t}-{i}");
            visit(&id, &codes[i], t + i as i64 * 100, &ip, IPHONE, "s.example")
        })
        .collect();
    let preview = format!("{t}-7");
    first.push(visit(
        &preview,
        &codes[0],
        t + 50,
        "203.0.113.5",
        WHATSAPP,
        "s.example",
    ));
    let cloud = format!("{t}-8");
    first.push(hosting_visit(&cloud, &codes[0], t + 70, &amazon, &range));
    assert_eq!(consume(&app, &mut hindsight, &mut first).await, 0);
    // The fifth recipient's link makes it a sweep: the four stored visits become scanners.
    let mut second = vec![visit(
        &format!("{}-0", t + 1),
        &codes[4],
        t + 400,
        "198.51.100.99",
        IPHONE,
        "s.example",
    )];
    assert_eq!(consume(&app, &mut hindsight, &mut second).await, 4);

    let listed_by_api = page(&app, &codes[0], "").await;
    let expected = json!([
        [cloud, "scanner", ["network"]],
        [preview, "preview", ["agent"]],
        [format!("{t}-0"), "scanner", ["sweep"]]
    ]);
    assert_eq!(json!(triples(&listed_by_api)), expected, "{listed_by_api}");
    assert_eq!(triples(&listed_by_api), fed(&app, "r0").await);
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let console = browser.page(&format!("/console/links/{}", codes[0])).await;
    assert_eq!(triples(&listed_by_api), listed(&console), "{console}");
    assert_eq!(listed_by_api["next"], Value::Null);

    // Each reason's words are the console's; the hosting one names Amazon's system.
    let visits = listed_by_api["visits"].as_array().unwrap();
    let words = |i: usize| {
        visits[i]["reasons"][0]["words"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(words(0), "hosting network (AS16509 Amazon.com, Inc.)");
    assert!(range.ends_with(",\"Amazon.com, Inc.\""), "{range}");
    assert_eq!(words(1), "preview agent (WhatsApp)");
    assert_eq!(words(2), "sweep of the campaign");
    for i in 0..3 {
        assert!(console.contains(&words(i)), "{}: {console}", words(i));
    }
    assert_eq!(visits[1]["client"], "WhatsApp");
    assert_eq!(visits[0]["short_domain"], "s.example");

    // By verdict: no person fetched this link.
    let only = |page: &Value| json!(triples(page));
    let scanners = page(&app, &codes[0], "?verdict=scanner").await;
    assert_eq!(only(&scanners), json!([expected[0], expected[2]]));
    let previews = page(&app, &codes[0], "?verdict=preview").await;
    assert_eq!(only(&previews), json!([expected[1]]));
    for people in ["people", "human"] {
        let none = page(&app, &codes[0], &format!("?verdict={people}")).await;
        assert_eq!(only(&none), json!([]), "{people}");
    }
    let all = page(&app, &codes[0], "?verdict=all").await;
    assert_eq!(only(&all), expected);
    assert_eq!(
        only(&page(&app, &codes[0], "?verdict=bot").await),
        json!([])
    );
}

/// 53 visits, two of one instant on either side of a page's end: newest first, the greater id
/// first between visits of one instant, 20 a page; `next` goes on after the last one shown, and is null after the
/// oldest. A verdict's pages go on within it.
#[tokio::test]
async fn a_link_s_visits_are_paged_newest_first_ties_by_id() {
    let app = spawn_app(Backend::Sqlite).await;
    let link = app.create(json!({"url": "https://shop.example/"})).await;
    let code = link["code"].as_str().unwrap();
    let t = now_ms();
    let mut batch: Vec<Visit> = (0..53)
        .map(|i| {
            // 33 shares 32's instant: the first page ends with 33, the second starts with 32.
            let at = t + i as i64 - i64::from(i == 33);
            let ua = if i % 2 == 0 { IPHONE } else { WHATSAPP };
            visit(
                &format!("{t}-{i:02}"),
                code,
                at,
                "192.0.2.1",
                ua,
                "s.example",
            )
        })
        .collect();
    consume(&app, &mut Hindsight::default(), &mut batch).await;
    let walk = |verdict: &'static str| {
        let app = &app;
        async move {
            let mut ids = Vec::new();
            let mut pages = 0;
            let mut query = format!("?limit=20{verdict}");
            loop {
                let answer = page(app, code, &query).await;
                pages += 1;
                for visit in answer["visits"].as_array().unwrap() {
                    ids.push(visit["id"].as_str().unwrap().to_owned());
                }
                match answer["next"].as_str() {
                    Some(next) => query = format!("?limit=20{verdict}&after={next}"),
                    None => return (ids, pages),
                }
            }
        }
    };
    let newest_first = |keep: fn(usize) -> bool| -> Vec<String> {
        ((0..53).rev().filter(|i| keep(*i)))
            .map(|i| format!("{t}-{i:02}"))
            .collect()
    };
    let (ids, pages) = walk("").await;
    assert_eq!(ids, newest_first(|_| true));
    assert_eq!(pages, 3);
    let (people, pages) = walk("&verdict=people").await;
    assert_eq!(people, newest_first(|i| i % 2 == 0));
    assert_eq!(pages, 2);
    let (previews, _) = walk("&verdict=preview").await;
    assert_eq!(previews, newest_first(|i| i % 2 == 1));
}

/// Another workspace's key gets the 404 of a link nobody has, whatever its role; the link's own
/// workspace reads it with a viewer key (a read, as the link's stats).
#[tokio::test]
async fn another_workspace_s_key_gets_404_and_a_viewer_reads() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let a_admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let a_viewer = workspace_key(&app, &operator, "brand-a", "viewer").await;
    let (code, id) = link_with_one_visit(&app, &a_admin).await;

    let read = |key: String, code: String| {
        let app = &app;
        async move {
            let answer = with_key(app, &key, Method::GET, &format!("/links/{code}/visits"));
            let answer = answer.send().await.unwrap();
            (answer.status().as_u16(), answer.text().await.unwrap())
        }
    };
    let (status, body) = read(a_viewer.clone(), code.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id), "{body}");
    let b_viewer = {
        create_workspace(&app, &operator, "brand-b").await;
        workspace_key(&app, &operator, "brand-b", "viewer").await
    };
    for key in [API_KEY.to_owned(), b_viewer] {
        let (theirs, body) = read(key.clone(), code.clone()).await;
        let (nobody, none) = read(key, "no-such-code".into()).await;
        assert_eq!((theirs, nobody), (404, 404), "{body} {none}");
        assert_eq!(body, none.replace("no-such-code", &code));
        assert!(!body.contains(&id));
    }
}

/// Each bad value is refused whole with a 400 JSON naming its field.
#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let app = spawn_app(Backend::Sqlite).await;
    let link = app.create(json!({"url": "https://shop.example/"})).await;
    let code = link["code"].as_str().unwrap();
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=99999999999", "limit"),
        ("limit=ten", "limit"),
        ("after=nonsense", "after"),
        ("after=12_", "after"),
        ("after=12_a%00b", "after"),
        ("after=-12_a", "after"),
        ("verdict=robots", "verdict"),
        ("verdict=", "verdict"),
        ("colour=red", "colour"),
    ] {
        let answer = app
            .api(Method::GET, &format!("/links/{code}/visits?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{query}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_query", "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{query}: {message}");
    }
    // A cursor past every backend's times (its pattern allows 18 digits) lists from the newest.
    let id = format!("{}-0", now_ms());
    let mut batch = vec![visit(&id, code, now_ms(), "192.0.2.1", IPHONE, "s.example")];
    consume(&app, &mut Hindsight::default(), &mut batch).await;
    let far = page(&app, code, "?after=999999999999999999_x").await;
    assert_eq!(far["visits"][0]["id"], id.as_str(), "{far}");
}

//! The fallback (`/api/v1/resolve/{code}`) answers a link with rules and a lifecycle as the
//! module does: through `wire`'s one answer function, from the request's `User-Agent`,
//! `Accept-Language`, query string and `X-Real-IP`.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_wire::record::{decode, not_yet_page, Link as WireLink};
use shortlink_wire::rules::{self, Click};
use std::path::PathBuf;

crate::on_each_backend!(
    the_fallback_answers_by_the_rules,
    the_fallback_answers_the_lifecycle,
    the_preview_answers_a_made_up_phone,
);

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 \
     (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
     Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";

fn geo_db() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../visit-enrich/testdata/test-city.mmdb")
        .display()
        .to_string()
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `GET /resolve/<path_and_query>` with these headers: (status, Location or body).
async fn click(app: &TestApp, path_and_query: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = app.fallback("default", path_and_query).await;
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    match response.headers().get("location") {
        Some(location) => (status, location.to_str().unwrap().to_owned()),
        None => (status, response.text().await.unwrap()),
    }
}

async fn the_fallback_answers_by_the_rules(backend: Backend) {
    let geo = geo_db();
    let app = spawn_app_with(backend, &["--geoip-db", &geo]).await;
    let day = 86_400;
    let link = app
        .create(json!({
            "url": "https://t.example/own",
            "rules": [
                {"if": {"after": rfc3339(now_secs() + day)}, "then": {"url": "https://t.example/later"}},
                {"if": {"before": rfc3339(now_secs() - day)}, "then": {"url": "https://t.example/earlier"}},
                {"if": {"query": [{"name": "src", "value": "sms"}]},
                 "then": {"url": "https://t.example/sms", "forward_query": true, "redirect": 307}},
                {"if": {"device": ["ios"]}, "then": {"url": "https://apps.example/ios"}},
                {"if": {"language": ["pt"]}, "then": {"url": "https://t.example/pt"}},
                {"if": {"ip": ["10.0.0.0/8"]}, "then": {"url": "https://t.example/office"}},
                {"if": {"country": ["US"]}, "then": {"url": "https://t.example/us"}},
                {"if": {"device": ["android"]},
                 "split": {"sticky": true, "variants": [
                     {"weight": 1, "url": "https://t.example/a"},
                     {"weight": 1, "url": "https://t.example/b"}]}}
            ]
        }))
        .await;
    let code = link["code"].as_str().unwrap();
    let own = (302, "https://t.example/own".to_owned());

    // Nothing matches (and the time rules never do now): the link's own target.
    assert_eq!(click(&app, code, &[]).await, own);
    // Query: the rule's own status, and it forwards the query.
    assert_eq!(
        click(&app, &format!("{code}?src=sms&x=1"), &[]).await,
        (307, "https://t.example/sms?src=sms&x=1".to_owned())
    );
    assert_eq!(click(&app, &format!("{code}?src=mms"), &[]).await, own);
    // Device.
    assert_eq!(
        click(&app, code, &[("user-agent", IPHONE)]).await,
        (302, "https://apps.example/ios".to_owned())
    );
    // Language: `pt` holds for pt-BR, the preferred one.
    assert_eq!(
        click(&app, code, &[("accept-language", "pt-BR,en;q=0.8")]).await,
        (302, "https://t.example/pt".to_owned())
    );
    assert_eq!(
        click(&app, code, &[("accept-language", "en-GB,pt;q=0.5")]).await,
        own
    );
    // Address range, from X-Real-IP (what nginx's @resolve passes).
    assert_eq!(
        click(&app, code, &[("x-real-ip", "10.20.30.40")]).await,
        (302, "https://t.example/office".to_owned())
    );
    // Country from the geo database (192.0.2.1 is US in the test database); an address it
    // does not know, or none, leaves the country unknown.
    assert_eq!(
        click(&app, code, &[("x-real-ip", "192.0.2.1")]).await,
        (302, "https://t.example/us".to_owned())
    );
    assert_eq!(
        click(&app, code, &[("x-real-ip", "198.51.100.200")]).await,
        own
    );

    // Sticky split: one phone (address + agent) always gets one variant, the one wire's
    // evaluation gives for it, as the module computes it.
    let record = app.redis_record(code).await.unwrap();
    let WireLink::Live {
        extras: Some(extras),
        ..
    } = decode(&record).unwrap()
    else {
        panic!("not a version 2 record");
    };
    let mut seen = std::collections::BTreeSet::new();
    for phone in 0..12 {
        let ip = format!("198.51.100.{phone}");
        let expected = rules::choose(
            &extras.rules,
            &Click {
                now_unix: now_secs() as u64,
                user_agent: ANDROID.as_bytes(),
                accept_language: b"",
                query: b"",
                client: ip.parse().ok(),
                visitor: rules::visitor(ip.as_bytes(), ANDROID.as_bytes()),
                recipient: None,
                cookies: b"",
                random: 0,
            },
            |_| None,
        )
        .unwrap();
        let url = String::from_utf8(expected.target.url.to_vec()).unwrap();
        for _ in 0..3 {
            let answer = click(&app, code, &[("user-agent", ANDROID), ("x-real-ip", &ip)]).await;
            assert_eq!(answer, (302, url.clone()), "phone {phone}");
        }
        seen.insert(url);
    }
    assert_eq!(seen.len(), 2, "twelve phones land on both variants");
}

async fn the_fallback_answers_the_lifecycle(backend: Backend) {
    let app = spawn_app(backend).await;
    let since = now_secs() + 3600;
    let page = app
        .create(json!({"url": "https://t.example/own", "valid_since": rfc3339(since)}))
        .await;
    let page = page["code"].as_str().unwrap();
    let response = app.fallback("default", page).await.send().await.unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(
        response.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    assert_eq!(
        response.bytes().await.unwrap().to_vec(),
        not_yet_page(since as u64)
    );

    let soon = app
        .create(
            json!({"url": "https://t.example/own", "valid_since": rfc3339(since),
                       "not_yet_url": "https://t.example/soon"}),
        )
        .await;
    let soon = soon["code"].as_str().unwrap();
    assert_eq!(
        click(&app, soon, &[]).await,
        (302, "https://t.example/soon".to_owned())
    );

    // Opened already: the own target.
    let open = app
        .create(json!({"url": "https://t.example/own", "valid_since": rfc3339(now_secs() - 60)}))
        .await;
    let open = open["code"].as_str().unwrap();
    assert_eq!(
        click(&app, open, &[]).await,
        (302, "https://t.example/own".to_owned())
    );

    // Expired (within the grace period): the expired URL instead of a 410, and 410 without one.
    let over: Value = app
        .create(
            json!({"url": "https://t.example/own", "expires_at": rfc3339(now_secs() + 3600),
                       "expired_url": "https://t.example/over"}),
        )
        .await;
    let over = over["code"].as_str().unwrap();
    let gone = app
        .create(json!({"url": "https://t.example/own", "expires_at": rfc3339(now_secs() + 3600)}))
        .await;
    let gone = gone["code"].as_str().unwrap();
    for code in [over, gone] {
        app.set_expiry_in_sql(code, now_secs() - 60).await;
    }
    assert_eq!(
        click(&app, over, &[]).await,
        (302, "https://t.example/over".to_owned())
    );
    assert_eq!(click(&app, gone, &[]).await.0, 410);

    // Past the grace period: the plain link's key is gone (404), the one with an expired URL
    // keeps answering it, in Redis (no TTL) and from the fallback.
    for code in [over, gone] {
        app.set_expiry_in_sql(code, now_secs() - 30 * 86_400).await;
    }
    app.run_cli(&["resync"]).await;
    assert_eq!(
        click(&app, over, &[]).await,
        (302, "https://t.example/over".to_owned())
    );
    assert_eq!(app.redis_expiretime(over).await, -1);
    assert_eq!(click(&app, gone, &[]).await.0, 404);
}

async fn preview(app: &TestApp, code: &str, body: Value) -> (u16, Value) {
    let response = app
        .api(Method::POST, &format!("/links/{code}/preview"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn the_preview_answers_a_made_up_phone(backend: Backend) {
    let app = spawn_app(backend).await;
    let since = now_secs() + 3600;
    let link = app
        .create(json!({
            "url": "https://t.example/own",
            "valid_since": rfc3339(since),
            "rules": [
                {"if": {"device": ["ios"]}, "then": {"url": "https://apps.example/ios"}},
                {"if": {"country": ["PT"]},
                 "split": {"variants": [{"weight": 1, "url": "https://t.example/pt", "redirect": 307}]}}
            ]
        }))
        .await;
    let code = link["code"].as_str().unwrap();
    let later = rfc3339(since + 60);

    let (status, answer) = preview(&app, code, json!({})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answer"], "not_yet");
    assert_eq!(answer["status"], 403);
    assert_eq!(answer["opens_at"], json!(rfc3339(since)));

    let (_, answer) = preview(&app, code, json!({"user_agent": IPHONE, "time": later})).await;
    assert_eq!(
        (
            answer["status"].clone(),
            answer["location"].clone(),
            answer["rule"].clone()
        ),
        (json!(302), json!("https://apps.example/ios"), json!("0"))
    );
    let (_, answer) = preview(&app, code, json!({"country": "pt", "time": later})).await;
    assert_eq!(
        (
            answer["status"].clone(),
            answer["location"].clone(),
            answer["rule"].clone()
        ),
        (json!(307), json!("https://t.example/pt"), json!("1.0"))
    );
    assert_eq!(
        (answer["rule_index"].clone(), answer["variant"].clone()),
        (json!(1), json!(0))
    );
    let (_, answer) = preview(&app, code, json!({"time": later, "query": "a=1"})).await;
    assert_eq!(answer["location"], "https://t.example/own");
    assert_eq!(answer["rule"], Value::Null);

    // Unsaved rules: answered, checked, and not stored.
    let before = app.stored().await;
    let (_, answer) = preview(
        &app,
        code,
        json!({"time": later, "query": "src=sms",
               "rules": [{"if": {"query": [{"name": "src"}]}, "then": {"url": "https://t.example/sms"}}]}),
    )
    .await;
    assert_eq!(answer["location"], "https://t.example/sms", "{answer}");
    let (status, answer) = preview(
        &app,
        code,
        json!({"rules": [{"if": {"ip": ["nope"]}, "then": {"url": "https://t.example/"}}]}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        answer["error"]["message"],
        "rules[0].if.ip[0]: invalid CIDR"
    );
    let (status, _) = preview(&app, code, json!({"ip": "not-an-ip"})).await;
    assert_eq!(status, 422);
    let (status, _) = preview(&app, code, json!({"colour": "red"})).await;
    assert!(status == 400 || status == 422);
    assert_eq!(app.stored().await, before);
    let (status, _) = preview(&app, "nosuchlink", json!({})).await;
    assert_eq!(status, 404);

    // A messaging app's fetcher on a link with a card: the card, drawn for the rule's target.
    let carded = app
        .create(json!({
            "url": "https://t.example/own",
            "rules": [{"if": {"device": ["ios"]}, "then": {"url": "https://apps.example/ios"}}],
            "preview": {"title": "Sale", "description": "Today", "image": "https://cdn.example/i.jpg"}
        }))
        .await;
    let carded = carded["code"].as_str().unwrap();
    let (_, answer) = preview(&app, carded, json!({"user_agent": "WhatsApp/2.23.20.0 A"})).await;
    assert_eq!(
        (answer["answer"].clone(), answer["status"].clone()),
        (json!("card"), json!(200))
    );
    assert_eq!(answer["location"], "https://t.example/own");
    let (_, answer) = preview(&app, carded, json!({"user_agent": IPHONE})).await;
    assert_eq!(answer["answer"], "redirect");
}

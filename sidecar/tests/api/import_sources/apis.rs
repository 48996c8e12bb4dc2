//! Shlink, Kutt and Bitly through their APIs (recorded answers, see `source_server`).

use super::source_server::{self, KEY};
use super::{import, link_row, skipped};
use crate::helpers::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Shlink: codes with `.`/`~` kept, forwardQuery per link, validUntil/validSince/maxVisits,
/// tags, the same code on a second domain reported as a collision, individual visits stored so
/// stats answer them, the total kept in `visit_count`; a second run changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shlink_api_links_and_visits_are_kept() {
    let app = spawn_app(Backend::Sqlite).await;
    let source = source_server::start().await;
    let args = [
        "--from",
        "shlink",
        "--source-url",
        &source.url,
        "--source-key",
        KEY,
        "--source-domain",
        "s.old.example",
        "--page-size",
        "2",
    ];
    let (outcome, report) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(report["read"], 3, "{report}");
    assert_eq!(report["imported"], 2, "{report}");
    assert_eq!(skipped(&report, "collision"), 1, "{report}");
    assert_eq!(report["problems"][0]["code"], "shl-one");
    assert_eq!(report["problems"][0]["domain"], "go.old.example");
    assert_eq!(report["visits_imported"], 3, "{report}");
    // The second page was refused once with a 429 and asked again after Retry-After.
    assert_eq!(source.state.second_pages.load(Ordering::Relaxed), 2);

    let (target, flags, visits) = link_row(&app, "shl-one").await.unwrap();
    assert_eq!(target, "https://shop.example/spring?utm_source=sms");
    assert_eq!(flags & 1, 1, "Shlink's forwardQuery: true");
    // Three visits stored one by one, the source's total of 5 kept.
    assert_eq!(visits, 5);
    let (target, flags, _) = link_row(&app, "Ab.c~").await.unwrap();
    assert_eq!(target, "https://shop.example/tilde");
    assert_eq!(flags & 1, 0, "Shlink's forwardQuery: false");
    assert!(app.redis_get("shl-one").await.is_some());
    assert!(app.redis_record("Ab.c~").await.is_some());

    let link: Value = app.get_json("/links/shl-one").await;
    assert_eq!(link["tags"], serde_json::json!(["spring", "sms"]));
    assert_eq!(link["created_at"], "2024-03-01T10:20:30Z");
    assert_eq!(link["expires_at"], "2030-01-01T00:00:00Z");
    let stats: Value = app
        .get_json("/links/shl-one/stats?from=2024-03-01T00:00:00Z&to=2024-03-05T00:00:00Z")
        .await;
    assert_eq!(stats["totals"]["humans"], 3, "{stats}");
    let countries = app
        .db
        .texts("SELECT country FROM visits WHERE code = 'shl-one' AND country IS NOT NULL ORDER BY country")
        .await;
    assert_eq!(countries, ["DE", "FR"]);
    let titles = app
        .db
        .texts("SELECT title FROM imported_links WHERE code = 'shl-one'")
        .await;
    assert_eq!(titles, ["Spring sale"]);

    // Again: nothing changes, every link is "already imported", no visit counted twice.
    let stored = app.stored().await;
    let (outcome, again) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(again["imported"], 0, "{again}");
    assert_eq!(skipped(&again, "already_imported"), 2, "{again}");
    assert_eq!(skipped(&again, "collision"), 1, "{again}");
    assert_eq!(again["visits_imported"], 0, "{again}");
    assert_eq!(app.stored().await, stored);
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM visits").await, 3);
    assert_eq!(link_row(&app, "shl-one").await.unwrap().2, 5);

    // A wrong key: the source's refusal by its status (the answer itself is never quoted: the
    // console shows this error), and nothing written.
    let wrong = [
        "--from",
        "shlink",
        "--source-url",
        &source.url,
        "--source-key",
        "wrong",
    ];
    let (outcome, _) = import(&app, &wrong).await;
    let error = outcome.unwrap_err();
    assert!(
        error.contains("401 Unauthorized") && !error.contains("Invalid API key"),
        "{error}"
    );
}

/// Kutt: pages by limit/skip, the domain from `domain` or the short link, no query forwarding,
/// a password-protected link skipped (its bcrypt hash cannot be carried over), visit totals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kutt_api_links_are_kept() {
    let app = spawn_app(Backend::Sqlite).await;
    let source = source_server::start().await;
    let args = [
        "--from",
        "kutt",
        "--source-url",
        &source.url,
        "--source-key",
        KEY,
        "--page-size",
        "2",
    ];
    let (outcome, report) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 3, "{report}");
    assert_eq!(skipped(&report, "password_protected"), 1, "{report}");
    // A banned link stays out of reach: imported revoked (410), never working again.
    assert_eq!(app.resolve("spam1").await.status(), 410);
    assert_eq!(source.state.second_pages.load(Ordering::Relaxed), 2);
    let (target, flags, visits) = link_row(&app, "kt1").await.unwrap();
    assert_eq!(target, "https://kutt-target.example/a?x=1");
    assert_eq!(flags & 1, 0, "Kutt does not forward the query");
    assert_eq!(visits, 7);
    assert!(link_row(&app, "secret").await.is_none());
    let domains = app
        .db
        .texts("SELECT domain FROM imported_links ORDER BY code")
        .await;
    assert_eq!(
        domains,
        ["kutt.old.example", "k2.old.example", "kutt.old.example"]
    );
    let link: Value = app.get_json("/links/kt2").await;
    assert_eq!(link["expires_at"], "2031-01-01T00:00:00Z");
    // Old visits, time unknown: the import is the last visit we can vouch for (an idle-link
    // expiry counts from it); a link never visited keeps none.
    assert!(link["last_visit_at"].is_null());
    let kt1: Value = app.get_json("/links/kt1").await;
    let last =
        chrono::DateTime::parse_from_rfc3339(kt1["last_visit_at"].as_str().unwrap()).unwrap();
    assert!((chrono::Utc::now() - last.to_utc()).num_seconds().abs() < 60);
}

/// Bitly: pages by `pagination.next`, the bearer token, ids on bit.ly and a custom domain,
/// case kept (`AbC`), query forwarded, 301, clicks from the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitly_api_links_are_kept() {
    let app = spawn_app(Backend::Sqlite).await;
    let source = source_server::start().await;
    let args = [
        "--from",
        "bitly",
        "--source-url",
        &source.url,
        "--source-key",
        KEY,
        "--bitly-group",
        "Bg1aBcDeF2",
    ];
    let (outcome, report) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 3, "{report}");
    let (target, flags, visits) = link_row(&app, "3xYz9Ab").await.unwrap();
    assert_eq!(target, "https://brand.example/landing?utm_campaign=june");
    assert_eq!(flags & 1, 1, "Bitly forwards the query");
    assert_eq!(visits, 321);
    assert_eq!(link_row(&app, "summer").await.unwrap().2, 45);
    assert_eq!(
        link_row(&app, "AbC").await.unwrap().0,
        "https://brand.example/abc"
    );
    assert!(link_row(&app, "abc").await.is_none());
    let link: Value = app.get_json("/links/summer").await;
    assert_eq!(link["redirect"], 301);
    assert_eq!(link["created_at"], "2022-07-15T09:30:00Z");
    let response = app.resolve("3xYz9Ab?utm_source=sms").await;
    assert_eq!(response.status(), 301);
    assert_eq!(
        response.headers()["location"],
        "https://brand.example/landing?utm_campaign=june&utm_source=sms"
    );
    // `--forward-query false` overrides the source's behaviour (on a fresh database).
    let other = spawn_app(Backend::Sqlite).await;
    let (outcome, _) = import(&other, &[&args[..], &["--forward-query", "false"]].concat()).await;
    outcome.unwrap();
    assert_eq!(link_row(&other, "3xYz9Ab").await.unwrap().1 & 1, 0);

    // A wrong token: refused before anything is written.
    let (outcome, _) = import(
        &app,
        &[
            "--from",
            "bitly",
            "--source-url",
            &source.url,
            "--source-key",
            "nope",
            "--bitly-group",
            "Bg1aBcDeF2",
        ],
    )
    .await;
    assert!(outcome.unwrap_err().contains("403"));
}

/// A server answering every request with `answer(path)`, counting them and the ones that carried
/// an `Authorization` header.
async fn counting_server(
    answer: impl Fn(&str) -> Value + Clone + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(AtomicUsize::new(0));
    let (h, t) = (Arc::clone(&hits), Arc::clone(&tokens));
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            h.fetch_add(1, Ordering::SeqCst);
            if headers.contains_key("authorization") {
                t.fetch_add(1, Ordering::SeqCst);
            }
            let body = answer(uri.path());
            async move { axum::Json(body) }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits, tokens)
}

/// Bitly's `pagination.next` is followed only on the API's own origin (issue 51): a page naming
/// another host stops the import there, and that host never gets a request, nor the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitly_pagination_elsewhere_is_not_followed() {
    let app = spawn_app(Backend::Sqlite).await;
    let (elsewhere, elsewhere_hits, _) =
        counting_server(|_| json!({"links": [], "pagination": {"next": ""}})).await;
    let next = format!("{elsewhere}/v4/groups/Bg1aBcDeF2/bitlinks?search_after=x");
    let (source, _, tokens) = counting_server(move |path| match path.ends_with("/summary") {
        true => json!({"total_clicks": 1}),
        false => json!({
            "links": [{"id": "bit.ly/away1", "long_url": "https://brand.example/a"}],
            "pagination": {"next": next, "total": 2},
        }),
    })
    .await;
    let args = [
        "--from",
        "bitly",
        "--source-url",
        &source,
        "--source-key",
        KEY,
        "--bitly-group",
        "Bg1aBcDeF2",
    ];
    let (outcome, _) = import(&app, &args).await;
    let error = outcome.unwrap_err();
    assert!(error.contains("not on the source's origin"), "{error}");
    assert!(
        tokens.load(Ordering::SeqCst) >= 2,
        "the source itself was asked"
    );
    assert_eq!(elsewhere_hits.load(Ordering::SeqCst), 0, "not followed");
}

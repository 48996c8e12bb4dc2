//! `POST /domains/{domain}/reissue` (issue 55) on each backend: a new link for each link of the
//! drained domain's re-send list, on the domains that take new links, with its old link's
//! target, rules, lifecycle, ref, campaign and tags; a repeat with the same `Idempotency-Key`
//! answers the same mapping and issues nothing; refused whole over quota, and when the domain is
//! not drained, every domain is, or the key is missing or reused.

use crate::domain_failover::{create, operator, through_nginx, LIST, POOL};
use crate::helpers::*;
use crate::workspaces::{operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// A per-recipient link with everything a link may carry besides its code.
fn item(i: usize, campaign: &str) -> Value {
    json!({
        "url": format!("https://t.example/{i}"),
        "campaign": campaign,
        "ref": format!("r{i}"),
        "tags": ["sms", format!("batch{}", i % 3)],
        "redirect": 307,
        "forward_query": i % 2 == 0,
        "expires_at": "2030-01-01T00:00:00Z",
        "valid_since": "2026-01-01T00:00:00Z",
        "expired_url": "https://t.example/over",
        "max_visits": 5 + i,
        "password": format!("secret {i}"),
        "click_id_param": "cid",
        "rules": [
            {"if": {"device": ["ios"]}, "then": {"url": format!("https://apps.example/{i}")}},
            {"split": {"sticky": true, "variants": [
                {"weight": 3, "url": "https://a.example/"},
                {"weight": 1, "url": "https://b.example/", "redirect": 302}]}}
        ],
    })
}

/// The re-send list's codes.
async fn unclicked(app: &TestApp, query: &str) -> HashSet<String> {
    let response = through_nginx(
        app,
        Method::GET,
        &format!("/domains/s2.example/unclicked{query}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    (response.text().await.unwrap().lines())
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            line["code"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// A reissue request of `key` (the test's admin key without one) with `Idempotency-Key: idem`.
fn reissue(
    app: &TestApp,
    key: Option<&str>,
    query: &str,
    idem: Option<&str>,
) -> reqwest::RequestBuilder {
    let path = format!("/domains/s2.example/reissue{query}");
    let mut request = match key {
        None => through_nginx(app, Method::POST, &path),
        Some(key) => with_key(app, key, Method::POST, &path)
            .header("X-Shortlink-Public-Base", LIST)
            .header("X-Shortlink-Pool", POOL),
    };
    if let Some(idem) = idem {
        request = request.header("Idempotency-Key", idem);
    }
    request
}

/// The answer's lines by old code.
async fn mapping(response: reqwest::Response) -> HashMap<String, Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    (response.text().await.unwrap().lines())
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            (line["code"].as_str().unwrap().to_owned(), line)
        })
        .collect()
}

async fn refused(response: reqwest::Response, status: u16, code: &str) {
    assert_eq!(response.status(), status, "{code}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
}

/// A link's view without what is its own: what its replacement must have the same.
async fn kept(app: &TestApp, code: &str) -> Value {
    let mut view = app.get_json(&format!("/links/{code}")).await;
    let object = view.as_object_mut().unwrap();
    for own in [
        "code",
        "short_url",
        "created_at",
        "updated_at",
        "visit_count",
        "last_visit_at",
        "degraded_issuing",
    ] {
        object.remove(own);
    }
    view
}

async fn reissue_replaces_the_unclicked_links_once_on_healthy_domains(backend: Backend) {
    // Checks off: this sidecar's snapshot changes only by its own requests, at once.
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    let spring: Vec<Value> = (0..200).map(|i| item(i, "spring")).collect();
    let mut issued = create(&app, &spring).await;
    let autumn: Vec<Value> = (200..260).map(|i| item(i, "autumn")).collect();
    issued.extend(create(&app, &autumn).await);
    // Without a ref: never on the list.
    issued.extend(
        create(
            &app,
            &[json!({"url": "https://t.example/plain", "campaign": "spring"})],
        )
        .await,
    );
    let on_s2: Vec<String> = (issued.iter())
        .filter(|(_, url)| url.starts_with("https://s2.example/"))
        .map(|(code, _)| code.clone())
        .collect();
    assert!(on_s2.len() > 50, "{}", on_s2.len());
    // Clicked: their visit count as the visit consumer leaves it.
    let clicked: Vec<String> = on_s2[..10].iter().map(|c| format!("'{c}'")).collect();
    app.db
        .execute(&format!(
            "UPDATE links SET visit_count = 1 WHERE code IN ({})",
            clicked.join(",")
        ))
        .await;

    // The domain still takes new links: nothing to replace them with.
    refused(
        reissue(&app, None, "", Some("early")).send().await.unwrap(),
        409,
        "not_drained",
    )
    .await;
    operator(&app, "s2.example", "drain", None).await;
    refused(
        reissue(&app, None, "", None).send().await.unwrap(),
        400,
        "idempotency_key_required",
    )
    .await;

    let listed = unclicked(&app, "?campaign=spring").await;
    assert!(listed.len() > 20, "{}", listed.len());
    let links_before = app.db.scalar("SELECT COUNT(*) FROM links").await;

    // The campaign tool's issuer key reissues.
    let operator_key = operator_key(&app).await;
    let issuer = workspace_key(&app, &operator_key, "default", "issuer").await;
    let first = mapping(
        reissue(&app, Some(&issuer), "?campaign=spring", Some("spring-1"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(first.keys().cloned().collect::<HashSet<_>>(), listed);
    let mut new_codes = HashSet::new();
    for (old, line) in &first {
        assert_eq!(line["status"], 201, "{line}");
        assert_eq!(line["campaign"], "spring");
        let new = line["new_code"].as_str().unwrap();
        assert!(new_codes.insert(new.to_owned()), "{new} twice");
        let url = line["short_url"].as_str().unwrap();
        assert!(
            url == format!("https://s1.example/{new}")
                || url == format!("https://s9.example/{new}"),
            "{line}"
        );
        let old_view = kept(&app, old).await;
        assert_eq!(line["ref"], old_view["ref"]);
        assert_eq!(kept(&app, new).await, old_view, "{old} → {new}");
    }
    // The password too (never shown): the same digest.
    let pairs: Vec<(&String, &str)> = (first.iter())
        .map(|(old, line)| (old, line["new_code"].as_str().unwrap()))
        .collect();
    for (old, new) in pairs.iter().take(5) {
        let db = &app.db;
        let digest = |code: &str| {
            let sql = format!("SELECT password_digest FROM links WHERE code = '{code}'");
            async move { db.texts(&sql).await }
        };
        let (was, is) = (digest(old).await, digest(new).await);
        assert!(was[0].len() > 10);
        assert_eq!(was, is);
    }
    let links_after = app.db.scalar("SELECT COUNT(*) FROM links").await;
    assert_eq!(links_after, links_before + listed.len() as i64);
    // The new links are not on the drained domain: its list is what it was.
    assert_eq!(unclicked(&app, "?campaign=spring").await, listed);

    // A repeat answers the same mapping and issues nothing.
    let again = mapping(
        reissue(&app, Some(&issuer), "?campaign=spring", Some("spring-1"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again.len(), first.len());
    for (old, line) in &again {
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(line["new_code"], first[old]["new_code"]);
        assert_eq!(line["short_url"], first[old]["short_url"]);
    }
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM links").await,
        links_after
    );
    // The key with another request.
    refused(
        reissue(&app, Some(&issuer), "?campaign=autumn", Some("spring-1"))
            .send()
            .await
            .unwrap(),
        422,
        "idempotency_key_reused",
    )
    .await;
    // One audit row per request, with what it issued.
    let db = &app.db;
    let audited = |size: usize| {
        let sql = format!(
            "SELECT COUNT(*) FROM audit_log WHERE action = 'links.reissue' \
             AND object = 's2.example' AND batch_size = {size}"
        );
        async move { db.scalar(&sql).await }
    };
    assert_eq!((audited(listed.len()).await, audited(0).await), (1, 1));

    // Over the day's quota: refused before anything is issued.
    let autumn_listed = unclicked(&app, "?campaign=autumn").await;
    assert!(!autumn_listed.is_empty());
    let used = app.db.scalar("SELECT COUNT(*) FROM links").await;
    // Nothing is counted while a workspace has no quota: today's count starts at 0.
    let quota = with_key(&app, &operator_key, Method::PATCH, "/workspaces/default")
        .json(&json!({"quotas": {"links_per_day": autumn_listed.len() - 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(quota.status(), 200);
    refused(
        reissue(&app, None, "?campaign=autumn", Some("autumn-1"))
            .send()
            .await
            .unwrap(),
        429,
        "quota_exceeded",
    )
    .await;
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM links").await, used);

    // Every domain drained: no healthy domain to reissue on.
    operator(&app, "s1.example", "drain", None).await;
    operator(&app, "s9.example", "drain", None).await;
    refused(
        reissue(&app, None, "?campaign=autumn", Some("autumn-2"))
            .send()
            .await
            .unwrap(),
        409,
        "no_healthy_domain",
    )
    .await;
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM links").await, used);
}

/// A reissue of many pages whose client goes away after the first: what it issued stays, and a
/// repeat with the key answers those links (200) and issues the rest (201), each old link
/// replaced once.
async fn a_reissue_cut_short_is_finished_by_its_repeat(backend: Backend) {
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    for from in [0, 7_000] {
        let items: Vec<Value> = (from..from + 7_000)
            .map(|i| json!({"url": format!("https://t.example/{i}"), "ref": format!("r{i}")}))
            .collect();
        create(&app, &items).await;
    }
    operator(&app, "s2.example", "drain", None).await;
    let listed = unclicked(&app, "").await;
    // More pages (1,000 links each) than the answer runs ahead (4).
    assert!(listed.len() > 6_000, "{}", listed.len());
    let before = app.db.scalar("SELECT COUNT(*) FROM links").await;

    let mut cut = reissue(&app, None, "", Some("cut")).send().await.unwrap();
    assert_eq!(cut.status(), 200);
    assert!(!cut.chunk().await.unwrap().unwrap().is_empty());
    drop(cut);
    // The cut request ends by itself: its audit row says how many it issued.
    let reissues = "SELECT COUNT(*) FROM audit_log WHERE action = 'links.reissue'";
    assert!(
        eventually(std::time::Duration::from_secs(60), || async {
            app.db.scalar(reissues).await == 1
        })
        .await
    );
    let first = app
        .db
        .scalar("SELECT MAX(batch_size) FROM audit_log WHERE action = 'links.reissue'")
        .await;
    println!("the cut attempt issued {first} of {}", listed.len());
    // Usually a few pages of the list; all of it if the socket's buffers took every page
    // before the client went (the repeat then only answers).
    assert!(
        first >= 1 && first <= listed.len() as i64,
        "{first} of {}",
        listed.len()
    );
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM links").await,
        before + first
    );

    let again = mapping(reissue(&app, None, "", Some("cut")).send().await.unwrap()).await;
    assert_eq!(again.keys().cloned().collect::<HashSet<_>>(), listed);
    let answered = |status: u16| {
        (again.values())
            .filter(|line| line["status"] == status)
            .count()
    };
    assert_eq!(
        (answered(200) as i64, answered(201)),
        (first, listed.len() - first as usize)
    );
    let new_codes: HashSet<&Value> = again.values().map(|line| &line["new_code"]).collect();
    assert_eq!(new_codes.len(), listed.len());
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM links").await,
        before + listed.len() as i64
    );
}

/// A replacement is checked as a create is, the whole link (issue 81: the reissue built its new
/// link by hand and checked only the target and the expiry): a link whose rule now points at a
/// domain of the pool (a loop) is refused on its line, and nothing is issued for it.
async fn a_replacement_is_checked_as_a_create_is(backend: Backend) {
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    let items: Vec<Value> = (0..40)
        .map(|i| {
            json!({"url": format!("https://t.example/{i}"), "ref": format!("r{i}"),
                "rules": [{"if": {"device": ["ios"]}, "then": {"url": "https://s7.example/app"}}]})
        })
        .collect();
    create(&app, &items).await;
    operator(&app, "s2.example", "drain", None).await;
    let listed = unclicked(&app, "").await;
    assert!(!listed.is_empty());
    let before = app.db.scalar("SELECT COUNT(*) FROM links").await;
    // s7.example has joined the pool since: the rule would now send a tap back to the edge.
    let response = (app.api(Method::POST, "/domains/s2.example/reissue"))
        .header("X-Shortlink-Public-Base", LIST)
        .header("X-Shortlink-Pool", format!("{POOL} s7.example"))
        .header("Idempotency-Key", "loop")
        .send()
        .await
        .unwrap();
    let answer = mapping(response).await;
    assert_eq!(answer.keys().cloned().collect::<HashSet<_>>(), listed);
    for line in answer.values() {
        assert_eq!(line["status"], 422, "{line}");
        assert!(line["new_code"].is_null(), "{line}");
    }
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM links").await, before);
}

crate::on_each_backend!(
    reissue_replaces_the_unclicked_links_once_on_healthy_domains,
    a_reissue_cut_short_is_finished_by_its_repeat,
    a_replacement_is_checked_as_a_create_is,
);

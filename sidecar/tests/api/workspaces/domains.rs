//! Short domains grouped by workspace (issue 53): a domain is the workspace's whose part of the
//! issuing list names it (a pool domain no part names is the default's). A workspace's keys see
//! their own domains only, another's answer as a name never seen; the operator's key sees all,
//! labelled; and a domain's health is judged against its own workspace's traffic.

use super::*;
use crate::console::Browser;
use crate::domain_health::{add_clicks, changes, webhook_receiver, SECRET};
use reqwest::Method;
use std::time::Duration;

/// As nginx's API server sends it: the default's part, then each brand's (a retired domain
/// stays in its brand's part as `draining`).
const LISTS: &str = "https://s.example [brand-a] https://a1.brand-a.example \
                     https://a0.brand-a.example draining [brand-b] https://b1.brand-b.example";
const POOL: &str =
    "s.example pool-only.example a1.brand-a.example a0.brand-a.example b1.brand-b.example";

/// (workspace, domain) of each entry of a `/domains` answer, in its order.
fn listed(answer: &Value) -> Vec<(String, String)> {
    (answer["domains"].as_array().unwrap().iter())
        .map(|d| {
            let text = |field: &str| d[field].as_str().unwrap().to_owned();
            (text("workspace"), text("domain"))
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    (list.iter())
        .map(|(w, d)| (w.to_string(), d.to_string()))
        .collect()
}

#[tokio::test]
async fn each_workspace_sees_its_own_domains_and_the_operator_every_one_labelled() {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    let a = workspace_key(&app, &operator, "brand-a", "viewer").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    // A request through nginx names the pool and the lists (the test client sends nginx's
    // proxy secret).
    let answer = with_key(&app, &a, Method::GET, "/domains")
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", POOL)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let ours = answer.json::<Value>().await.unwrap();
    assert_eq!(
        listed(&ours),
        pairs(&[
            ("brand-a", "a0.brand-a.example"),
            ("brand-a", "a1.brand-a.example")
        ]),
        "{ours}"
    );
    let theirs = send_json(with_key(&app, &b, Method::GET, "/domains")).await;
    assert_eq!(
        listed(&theirs),
        pairs(&[("brand-b", "b1.brand-b.example")]),
        "{theirs}"
    );
    let default = send_json(with_key(&app, API_KEY, Method::GET, "/domains")).await;
    assert_eq!(
        listed(&default),
        pairs(&[("default", "pool-only.example"), ("default", "s.example")]),
        "{default}"
    );

    // Another workspace's domain is what a name never seen is: 404 unknown_domain.
    for (key, domain) in [
        (&b, "a1.brand-a.example"),
        (&b, "nobody.example"),
        (&a, "b1.brand-b.example"),
        (&a, "s.example"),
    ] {
        let answer = with_key(&app, key, Method::GET, &format!("/domains/{domain}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{domain}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unknown_domain", "{domain}: {body}");
    }
    let own = send_json(with_key(
        &app,
        &a,
        Method::GET,
        "/domains/a0.brand-a.example",
    ))
    .await;
    assert_eq!(own["workspace"], "brand-a", "{own}");

    // The operator reads every workspace's, by workspace; and still no workspace's links.
    let all = send_json(with_key(&app, &operator, Method::GET, "/domains")).await;
    assert_eq!(
        listed(&all),
        pairs(&[
            ("brand-a", "a0.brand-a.example"),
            ("brand-a", "a1.brand-a.example"),
            ("brand-b", "b1.brand-b.example"),
            ("default", "pool-only.example"),
            ("default", "s.example"),
        ]),
        "{all}"
    );
    let one = send_json(with_key(
        &app,
        &operator,
        Method::GET,
        "/domains/b1.brand-b.example",
    ))
    .await;
    assert_eq!(one["workspace"], "brand-b", "{one}");
    for (method, path) in [(Method::GET, "/links"), (Method::GET, "/stats")] {
        let answer = with_key(&app, &operator, method, path)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 403, "{path}");
    }

    // A list sent around nginx (no proxy secret) cannot claim another brand's domain.
    let forged = reqwest::Client::new()
        .get(app.url("/api/v1/domains"))
        .bearer_auth(&b)
        .header(
            "x-shortlink-public-base",
            "[brand-b] https://a1.brand-a.example",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 200);
    let forged: Value = forged.json().await.unwrap();
    assert_eq!(
        listed(&forged),
        pairs(&[("brand-b", "b1.brand-b.example")]),
        "{forged}"
    );

    // One domain in two workspaces' parts is a malformed list, named.
    let answer = with_key(&app, &a, Method::GET, "/domains")
        .header(
            "x-shortlink-public-base",
            "https://s.example [brand-a] https://a1.brand-a.example [brand-b] https://a1.brand-a.example",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_header", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("a1.brand-a.example"), "{message}");
}

/// Brand A's campaign is clicked a lot on one of its domains and not at all on its other (a
/// block); brand B's one domain gets the few clicks its quieter campaign gets. A's blocked
/// domain is found, B's is healthy: it is judged against B's traffic, not the mix (where its
/// share of all clicks looked far too low).
#[tokio::test]
async fn one_workspaces_clicks_never_flag_another_workspaces_domain() {
    let (hook, received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let hooked = [
        "--domain-webhook-url",
        &hook,
        "--domain-webhook-secret",
        SECRET,
    ];
    let app = spawn_app_with(
        Backend::Sqlite,
        &[&QUICK_DOMAIN_HEALTH[..], &hooked].concat(),
    )
    .await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a = workspace_key(&app, &operator, "brand-a", "issuer").await;
    let b = workspace_key(&app, &operator, "brand-b", "issuer").await;
    let lists = "https://s.example [brand-a] https://a1.example https://a2.example \
                 [brand-b] https://b1.example";
    for (key, links) in [(&a, 400), (&b, 200)] {
        let items: Vec<Value> = (0..links)
            .map(|i| json!({"url": format!("https://t.example/{i}")}))
            .collect();
        let answer = with_key(&app, key, Method::POST, "/links/batch")
            .header("x-shortlink-public-base", lists)
            .json(&items)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        answer.text().await.unwrap();
    }
    add_clicks(&app, "a1.example", 500).await;
    add_clicks(&app, "b1.example", 10).await;

    let state = |key: String, domain: &'static str| {
        let request = with_key(&app, &key, Method::GET, &format!("/domains/{domain}"));
        async move { send_json(request).await }
    };
    let found = eventually(Duration::from_secs(10), || async {
        state(a.clone(), "a2.example").await["state"] == "suspected-blocked"
    })
    .await;
    assert!(
        found,
        "{}",
        send_json(with_key(&app, &operator, Method::GET, "/domains")).await
    );
    // The check that found a2 judged b1 too, with every click already stored.
    let b1 = state(b.clone(), "b1.example").await;
    assert_eq!(b1["state"], "healthy", "{b1}");
    assert!(b1["issued"].as_u64().unwrap() >= 200, "{b1}");
    assert_eq!(b1["workspace"], "brand-b", "{b1}");
    assert_eq!(state(a.clone(), "a1.example").await["state"], "healthy");

    // The alert names the domain's workspace.
    assert!(
        eventually(Duration::from_secs(5), || async {
            !changes(&received, "a2.example").is_empty()
        })
        .await
    );
    let change = &changes(&received, "a2.example")[0];
    assert_eq!(change["workspace"], "brand-a", "{change}");
    assert_eq!(change["state"], "suspected-blocked", "{change}");
    assert!(changes(&received, "b1.example").is_empty());
}

/// The console's Domains page shows the signed-in workspace's domains, its part of the issuing
/// list and its pool domains, never another workspace's.
#[tokio::test]
async fn the_console_domains_page_shows_the_signed_in_workspaces_domains_only() {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    for (slug, ours, theirs) in [
        (
            "brand-a",
            ["a1.brand-a.example", "a0.brand-a.example (draining)"],
            ["b1.brand-b.example", "pool-only.example"],
        ),
        (
            "brand-b",
            ["b1.brand-b.example", "b1.brand-b.example"],
            ["a1.brand-a.example", "pool-only.example"],
        ),
    ] {
        let key = workspace_key(&app, &operator, slug, "viewer").await;
        let (status, page) = console_domains_page(&app, &key, (LISTS, POOL)).await;
        assert_eq!(status, 200);
        for domain in ours {
            assert!(page.contains(domain), "{slug}: no {domain}:\n{page}");
        }
        for domain in theirs {
            assert!(!page.contains(domain), "{slug} shows {domain}:\n{page}");
        }
    }
}

#[tokio::test]
async fn a_console_session_issues_on_its_workspaces_domains() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let key = workspace_key(&app, &operator, "brand-a", "admin").await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.sign_in(&key).await.status(), 303);
    let csrf = browser.csrf().await;
    let form = [
        ("url", "https://shop.brand-a.example/spring"),
        ("code", "spring-a"),
        ("csrf", csrf.as_str()),
    ];
    let request = (browser.request(Method::POST, "/console/create"))
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", POOL)
        .form(&form);
    let created = browser.send(request).await;
    assert!(created.status().is_redirection(), "{}", created.status());
    let request = (browser.request(Method::GET, "/console/links/spring-a"))
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", POOL);
    let page = browser.send(request).await.text().await.unwrap();
    // Brand A's only issuing domain: the default's would answer 404 to this code.
    assert!(
        page.contains("https://a1.brand-a.example/spring-a"),
        "{page}"
    );
    assert!(!page.contains("https://s.example/spring-a"), "{page}");
}

#[tokio::test]
async fn an_operator_session_sees_every_domain_by_workspace() {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    let (_, page) = console_domains_page(&app, &operator, (LISTS, POOL)).await;
    for (workspace, domain) in [
        ("brand-a", "a1.brand-a.example"),
        ("brand-a", "a0.brand-a.example"),
        ("brand-b", "b1.brand-b.example"),
        ("default", "pool-only.example"),
    ] {
        let row = format!("<td>{workspace}</td><td>{domain}</td>");
        assert!(page.contains(&row), "no {row}:\n{page}");
    }
}

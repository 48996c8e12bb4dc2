//! The operator's workspaces and a workspace admin's keys, and what a workspace means for a
//! link's record and for nginx's fallback.

use super::*;
use reqwest::Method;
use shortlink_wire::record;

#[tokio::test]
async fn the_operator_creates_changes_suspends_and_deletes_workspaces() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let created = create_workspace(&app, &operator, "brand-a").await;
    assert_eq!(created["slug"], "brand-a");
    assert!(created["quotas"]["links_per_day"].is_null());
    // Refused: a taken slug, a malformed one, unknown fields; the default cannot go.
    for (body, status, code) in [
        (json!({"slug": "brand-a"}), 409, "slug_taken"),
        (json!({"slug": "Brand_A"}), 422, "invalid_slug"),
        (json!({"slug": "a--b"}), 422, "invalid_slug"),
        (json!({"slug": "ok", "colour": "red"}), 422, "invalid_body"),
    ] {
        let answer = with_key(&app, &operator, Method::POST, "/workspaces")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), status, "{body}");
        let error: Value = answer.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{body}");
    }
    expect_status(
        with_key(&app, &operator, Method::DELETE, "/workspaces/default"),
        409,
    )
    .await;
    let list: Value = send_json(with_key(&app, &operator, Method::GET, "/workspaces")).await;
    let slugs: Vec<&str> = (list["workspaces"].as_array().unwrap().iter())
        .map(|w| w["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["default", "brand-a"]);

    // An operator key reaches no link; a workspace admin no workspace.
    expect_status(with_key(&app, &operator, Method::GET, "/links"), 403).await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    expect_status(
        with_key(&app, &admin, Method::GET, "/workspaces/brand-a"),
        403,
    )
    .await;
    let own: Value = send_json(with_key(&app, &admin, Method::GET, "/workspace")).await;
    assert_eq!(own["slug"], "brand-a");

    // Rename and quotas; suspended, its keys are refused and its links keep answering.
    let link = link_in(&app, &admin, json!({"url": "https://a.example/spring"})).await;
    let code = link["code"].as_str().unwrap();
    let changed: Value = send_json(
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a").json(
            &json!({"name": "Brand A Ltd", "quotas": {"links_per_day": 1000}, "suspended": true}),
        ),
    )
    .await;
    assert_eq!(changed["name"], "Brand A Ltd");
    assert_eq!(changed["quotas"]["links_per_day"], 1000);
    assert!(changed["suspended_at"].is_string());
    let answer = expect_status(with_key(&app, &admin, Method::GET, "/links"), 403).await;
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error"]["code"], "workspace_suspended");
    assert_eq!(app.resolve_on("brand-a", code).await.status(), 302);
    expect_status(
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
            .json(&json!({"suspended": false})),
        200,
    )
    .await;
    expect_status(with_key(&app, &admin, Method::GET, "/links"), 200).await;

    // Deleted with its data: the link no longer answers, in Redis or SQL; the key is gone.
    let deleted: Value = send_json(with_key(
        &app,
        &operator,
        Method::DELETE,
        "/workspaces/brand-a",
    ))
    .await;
    assert_eq!(
        (deleted["links"].as_u64(), deleted["keys"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(app.redis_record(code).await, None);
    assert_eq!(app.resolve_on("brand-a", code).await.status(), 404);
    expect_status(with_key(&app, &admin, Method::GET, "/links"), 401).await;
    assert_eq!(app.get_link(code).await.status(), 404);
}

#[tokio::test]
async fn a_workspace_admin_manages_its_own_keys() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let answer = expect_status(
        with_key(&app, &admin, Method::POST, "/keys")
            .json(&json!({"name": "campaign tool", "role": "issuer"})),
        201,
    )
    .await;
    let key: Value = answer.json().await.unwrap();
    let issuer = key["key"].as_str().unwrap().to_owned();
    // Its keys act in its workspace: the issuer's link is the admin's to read.
    let link = link_in(&app, &issuer, json!({"url": "https://a.example/tool"})).await;
    let code = link["code"].as_str().unwrap();
    expect_status(
        with_key(&app, &admin, Method::GET, &format!("/links/{code}")),
        200,
    )
    .await;
    // Neither operator nor resolve keys, nor issuers making keys.
    for role in ["operator", "resolve"] {
        let answer = with_key(&app, &admin, Method::POST, "/keys")
            .json(&json!({"name": "x", "role": role}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 422, "{role}");
    }
    expect_status(with_key(&app, &issuer, Method::GET, "/keys"), 403).await;
    let list: Value = send_json(with_key(&app, &admin, Method::GET, "/keys")).await;
    assert_eq!(list["keys"].as_array().unwrap().len(), 2);
    assert!(
        !list.to_string().contains("slk_"),
        "no key shown again: {list}"
    );
    let id = key["id"].as_i64().unwrap();
    expect_status(
        with_key(&app, &admin, Method::DELETE, &format!("/keys/{id}")),
        200,
    )
    .await;
    expect_status(with_key(&app, &issuer, Method::GET, "/links"), 401).await;
    // The default workspace's admin cannot revoke brand-a's key: as if it did not exist.
    expect_status(app.api(Method::DELETE, &format!("/keys/{id}")), 404).await;
}

#[tokio::test]
async fn a_record_names_its_workspace_and_the_fallback_answers_on_its_hosts_only() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let ours = link_in(&app, &admin, json!({"url": "https://a.example/x"})).await;
    let ours = ours["code"].as_str().unwrap().to_owned();
    let default = app.create_code("https://d.example/x").await;
    // The default workspace's record keeps the bytes it had before workspaces.
    let plain = app.redis_record(&default).await.unwrap();
    assert!(
        plain.starts_with(b"1|L|302|0|0|https://d.example/x"),
        "{plain:?}"
    );
    let named = record::decode(&app.redis_record(&ours).await.unwrap()).unwrap();
    assert_eq!(named.workspace().map(|w| w.as_str()), Some("brand-a"));
    // Revoked, its tombstone names it too.
    expect_status(
        with_key(&app, &admin, Method::DELETE, &format!("/links/{ours}")),
        200,
    )
    .await;
    let tombstone = record::decode(&app.redis_record(&ours).await.unwrap()).unwrap();
    assert_eq!(tombstone.workspace().map(|w| w.as_str()), Some("brand-a"));

    let live = link_in(&app, &admin, json!({"url": "https://a.example/y"})).await;
    let live = live["code"].as_str().unwrap().to_owned();
    let key = app.resolve_key().await;
    // `host`: the workspace nginx maps the host to, sent as nginx sends it (`ws=<name>`).
    let resolve = |code: String, host: Option<&'static str>| {
        let mut request = app
            .client
            .get(app.url(&format!("/api/v1/resolve/{code}")))
            .bearer_auth(key);
        if let Some(host) = host {
            request = request.header("x-shortlink-workspace", format!("ws={host}"));
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(resolve(live.clone(), Some("brand-a")).await, 302);
    assert_eq!(
        resolve(live.clone(), None).await,
        404,
        "a request that does not say whose host it is"
    );
    for host in ["brand-b", "default", ""] {
        assert_eq!(resolve(live.clone(), Some(host)).await, 404, "{host:?}");
        assert_eq!(
            resolve(ours.clone(), Some(host)).await,
            404,
            "revoked, on {host:?}"
        );
    }
    assert_eq!(resolve(ours.clone(), Some("brand-a")).await, 410);
    assert_eq!(resolve(default.clone(), Some("default")).await, 302);
    assert_eq!(resolve(default, Some("brand-a")).await, 404);
}

#[tokio::test]
async fn a_workspaces_quotas_and_a_keys_own_rate_hold_for_it_alone() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    expect_status(
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
            .json(&json!({"quotas": {"links_per_day": 3, "webhooks": 0}})),
        200,
    )
    .await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let count = || async { app.stored().await.links };
    let before = count().await;
    // A batch that does not fit is refused before anything is issued.
    let items: Vec<Value> = (0..4)
        .map(|i| json!({"url": format!("https://a.example/{i}")}))
        .collect();
    let answer = with_key(&app, &admin, Method::POST, "/links/batch")
        .json(&items)
        .send()
        .await
        .unwrap();
    let results: Value = answer.json().await.unwrap();
    for result in results["results"].as_array().unwrap() {
        assert_eq!(result["status"], 429, "{result}");
        assert_eq!(result["error"]["code"], "quota_exceeded", "{result}");
    }
    assert_eq!(
        count().await,
        before,
        "nothing of a refused batch is stored"
    );
    for i in 0..3 {
        link_in(
            &app,
            &admin,
            json!({"url": format!("https://a.example/one/{i}")}),
        )
        .await;
    }
    let answer = expect_status(
        with_key(&app, &admin, Method::POST, "/links")
            .json(&json!({"url": "https://a.example/four"})),
        429,
    )
    .await;
    assert!(answer.headers().contains_key("retry-after"));
    assert!(answer.headers().contains_key("ratelimit-policy"));
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error"]["code"], "quota_exceeded");
    // The default workspace has no quota: its own links are not counted with brand-a's.
    app.create_code("https://d.example/free").await;

    // A key of its own rate: 1 request a second, a burst of 2.
    let answer = expect_status(
        with_key(&app, &admin, Method::POST, "/keys").json(
            &json!({"name": "slow tool", "role": "viewer", "rate": {"per_second": 1, "burst": 2}}),
        ),
        201,
    )
    .await;
    let slow: Value = answer.json().await.unwrap();
    assert_eq!(slow["rate_per_second"], 1);
    let slow = slow["key"].as_str().unwrap().to_owned();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let answer = with_key(&app, &slow, Method::GET, "/links")
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(&statuses[..2], [200, 200], "{statuses:?}");
    assert!(statuses[2..].contains(&429), "{statuses:?}");
    // The admin's own requests are not throttled by its viewer's rate.
    expect_status(with_key(&app, &admin, Method::GET, "/links"), 200).await;
    expect_status(
        with_key(&app, &admin, Method::POST, "/keys")
            .json(&json!({"name": "x", "role": "viewer", "rate": {"per_second": 1}})),
        422,
    )
    .await;
}

#[tokio::test]
async fn a_workspaces_links_are_issued_on_its_own_domains() {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    let a = workspace_key(&app, &operator, "brand-a", "issuer").await;
    let b = workspace_key(&app, &operator, "brand-b", "issuer").await;
    // As nginx's API server sends it: the default's list, then brand-a's; brand-b has none.
    let lists = "https://s.example [brand-a] https://a1.brand-a.example";
    let create = |key: String| {
        let request = with_key(&app, &key, Method::POST, "/links")
            .header("x-shortlink-public-base", lists)
            .json(&json!({"url": "https://shop.example/x"}));
        async move {
            let answer = expect_status(request, 201).await;
            answer.json::<Value>().await.unwrap()
        }
    };
    let ours = create(a).await;
    let code = ours["code"].as_str().unwrap();
    assert_eq!(
        ours["short_url"],
        format!("https://a1.brand-a.example/{code}")
    );
    let default = create(API_KEY.to_owned()).await;
    let code = default["code"].as_str().unwrap();
    assert_eq!(default["short_url"], format!("https://s.example/{code}"));
    // Never a URL on another workspace's domain, where it would not answer.
    let theirs = create(b).await;
    assert!(theirs["short_url"].is_null(), "{theirs}");
}

/// Audit rows of `key`'s view, oldest first, as `(workspace_id, actor_name, action, object,
/// changes)`.
async fn audit_rows(app: &TestApp, key: &str) -> Vec<(i64, String, String, String, Value)> {
    let page: Value = send_json(with_key(app, key, Method::GET, "/audit?limit=500")).await;
    let mut rows: Vec<_> = (page["rows"].as_array().unwrap().iter())
        .map(|row| {
            (
                row["workspace_id"].as_i64().unwrap(),
                row["actor_name"].as_str().unwrap().to_owned(),
                row["action"].as_str().unwrap().to_owned(),
                row["object"].as_str().unwrap().to_owned(),
                row["changes"].clone(),
            )
        })
        .collect();
    rows.reverse();
    rows
}

#[tokio::test]
async fn workspace_and_key_changes_through_the_api_are_in_the_audit_log() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let brand = app.storage().await.workspace_by_slug("brand-a").await;
    let brand_id = brand.unwrap().unwrap().id.get();
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    expect_status(
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
            .json(&json!({"name": "Brand A Ltd", "quotas": {"links_per_day": 1000}})),
        200,
    )
    .await;
    // A change to nothing records nothing.
    expect_status(
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
            .json(&json!({"name": "Brand A Ltd"})),
        200,
    )
    .await;
    let tool: Value = send_json(with_key(&app, &admin, Method::POST, "/keys").json(
        &json!({"name": "campaign tool", "role": "issuer", "rate": {"per_second": 5, "burst": 10}}),
    ))
    .await;
    let tool_id = tool["id"].as_i64().unwrap();
    for _ in 0..2 {
        expect_status(
            with_key(&app, &admin, Method::DELETE, &format!("/keys/{tool_id}")),
            200,
        )
        .await;
    }
    create_workspace(&app, &operator, "brand-b").await;
    expect_status(
        with_key(&app, &operator, Method::DELETE, "/workspaces/brand-b"),
        200,
    )
    .await;

    // The brand's admin sees its own chain: the key the operator gave it, then its own.
    let own = audit_rows(&app, &admin).await;
    let actions: Vec<(&str, &str)> = (own.iter())
        .map(|(_, actor, action, _, _)| (actor.as_str(), action.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("operator", "key.create"),
            ("brand-a-admin", "key.create"),
            ("brand-a-admin", "key.revoke"),
        ],
        "{own:?}"
    );
    assert!(own.iter().all(|row| row.0 == brand_id));
    assert_eq!(own[1].3, tool_id.to_string());
    assert_eq!(own[1].4["role"], json!([null, "issuer"]));
    assert_eq!(own[1].4["rate_per_second"], json!([null, 5]));

    // The operator sees the workspaces' changes in the installation's chain, and every key.
    let all = audit_rows(&app, &operator).await;
    let installation: Vec<(&str, &str)> = (all.iter())
        .filter(|row| row.0 == 0)
        .map(|(_, _, action, object, _)| (action.as_str(), object.as_str()))
        .collect();
    assert_eq!(
        installation,
        [
            ("workspace.create", "brand-a"),
            ("workspace.update", "brand-a"),
            ("workspace.create", "brand-b"),
            ("workspace.delete", "brand-b"),
        ],
        "{all:?}"
    );
    let update = all.iter().find(|row| row.2 == "workspace.update").unwrap();
    assert_eq!(update.4["name"], json!(["Brand brand-a", "Brand A Ltd"]));
    assert_eq!(update.4["quotas"][1]["links_per_day"], 1000);
    // Never a key, nor its hash.
    let text = format!("{all:?}");
    assert!(!text.contains("slk_"), "{text}");
    assert!(!text.contains(&shortlink_api::hash_api_key(&admin)));
}

#[tokio::test]
async fn the_command_line_creates_a_workspace_with_its_quotas_and_changes_them() {
    let app = spawn_app(Backend::Sqlite).await;
    app.run_cli(&[
        "workspaces",
        "create",
        "brand-c",
        "--name",
        "Brand C",
        "--links-per-day",
        "10",
        "--webhook-subscriptions",
        "3",
    ])
    .await;
    app.run_cli(&[
        "workspaces",
        "quotas",
        "brand-c",
        "--compose-recipients",
        "500",
        "--webhook-subscriptions",
        "4",
    ])
    .await;
    let storage = app.storage().await;
    let workspace = storage.workspace_by_slug("brand-c").await.unwrap().unwrap();
    assert_eq!(workspace.name, "Brand C");
    // `quotas` replaces them as a whole: what it does not name goes back to the setting.
    assert_eq!(
        workspace.quotas,
        shortlink_store::Quotas {
            links_per_day: None,
            compose_recipients: Some(500),
            webhooks: Some(4),
            key_rate_per_second: None,
            key_rate_burst: None,
        }
    );
}

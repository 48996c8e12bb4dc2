//! The console with workspaces (issue 53): one session holding keys of several workspaces and
//! switching between them, the workspace admin's page with its keys, and an operator key's
//! pages (workspaces, their keys, the audit log of every chain) and nothing else.

use crate::console::{csrf_of, location, Browser};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, send_json, with_key, workspace_key};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use shortlink_store::audit::{AuditFilter, AuditRecord};

crate::on_each_backend!(
    a_session_switches_between_workspaces_and_loses_a_revoked_one,
    the_workspace_page_creates_and_revokes_keys_with_audit_rows,
    an_operator_session_manages_workspaces_and_sees_no_links,
);

/// A link with `code` in the workspace of `key`.
async fn link_in(app: &TestApp, key: &str, code: &str) {
    let body = json!({"url": format!("https://{code}.example/"), "code": code});
    crate::workspaces::link_in(app, key, body).await;
}

/// The id of the key named `name` in workspace `slug`, as the operator lists them.
async fn key_id(app: &TestApp, operator: &str, slug: &str, name: &str) -> i64 {
    let keys = send_json(with_key(
        app,
        operator,
        Method::GET,
        &format!("/workspaces/{slug}/keys"),
    ))
    .await;
    (keys["keys"].as_array().unwrap().iter())
        .find(|key| key["name"] == name)
        .and_then(|key| key["id"].as_i64())
        .unwrap_or_else(|| panic!("no key {name} in {keys}"))
}

/// The audit rows of `action`, every chain.
async fn audit_rows(app: &TestApp, action: &str) -> Vec<AuditRecord> {
    let filter = AuditFilter {
        workspace_id: None,
        action: Some(action.to_owned()),
        actor: None,
        object: None,
        since_ms: None,
        until_ms: None,
        before_id: None,
        limit: 100,
    };
    app.storage().await.list_audit(&filter).await.unwrap()
}

/// Adds `key` to the browser's session with the "Add a workspace" form.
async fn add_workspace(browser: &mut Browser<'_>, key: &str) -> reqwest::Response {
    let page = browser.page("/console/sign-in").await;
    assert!(page.contains("Add a workspace"), "{page}");
    let csrf = csrf_of(&page);
    browser
        .post("/console/sign-in", &[("key", key), ("csrf", &csrf)])
        .await
}

/// Follows a redirect answer once; returns the final answer.
async fn follow(browser: &mut Browser<'_>, answer: reqwest::Response) -> reqwest::Response {
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let to = location(&answer).to_owned();
    browser.get(&to).await
}

async fn a_session_switches_between_workspaces_and_loses_a_revoked_one(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a_admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b_admin = workspace_key(&app, &operator, "brand-b", "admin").await;
    let b_viewer = workspace_key(&app, &operator, "brand-b", "viewer").await;
    link_in(&app, &a_admin, "a-spring").await;
    link_in(&app, &b_admin, "b-autumn").await;

    let mut browser = Browser::new(&app);
    assert_eq!(
        browser.sign_in(&a_admin).await.status(),
        StatusCode::SEE_OTHER
    );
    let links = browser.page("/console/links").await;
    assert!(links.contains("a-spring") && !links.contains("b-autumn"));
    assert!(
        !links.contains("/console/switch"),
        "one workspace: no switcher"
    );
    assert!(links.contains("brand-a"));

    // B's viewer joins the session and is the active key: B's links only, A's are not found.
    let added = add_workspace(&mut browser, &b_viewer).await;
    assert_eq!(location(&added), "/console/");
    let links = browser.page("/console/links").await;
    assert!(
        links.contains("b-autumn") && !links.contains("a-spring"),
        "{links}"
    );
    assert!(links.contains("action=\"/console/switch\""), "{links}");
    assert!(links.contains("value=\"brand-a\""));
    assert_eq!(
        browser.get("/console/links/a-spring").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        browser.get("/console/create").await.status(),
        StatusCode::FORBIDDEN,
        "the viewer's role, not A's admin's"
    );

    // The switcher: its token is required; then A's pages again.
    let csrf = browser.csrf().await;
    let refused = browser.post("/console/switch", &[("to", "brand-a")]).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let unknown = (browser.post("/console/switch", &[("to", "brand-c"), ("csrf", &csrf)])).await;
    assert_eq!(unknown.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let switched = (browser.post("/console/switch", &[("to", "brand-a"), ("csrf", &csrf)])).await;
    assert_eq!(location(&switched), "/console/");
    let links = browser.page("/console/links").await;
    assert!(
        links.contains("a-spring") && !links.contains("b-autumn"),
        "{links}"
    );
    assert_eq!(
        browser.get("/console/links/b-autumn").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        browser.get("/console/create").await.status(),
        StatusCode::OK
    );

    // Signing in again with a key of a workspace the session has replaces that one.
    let added = add_workspace(&mut browser, &b_admin).await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let page = browser.page("/console/").await;
    assert_eq!(page.matches("<option").count(), 2, "{page}");
    assert!(page.contains("brand-b-admin (admin"), "{page}");

    // B's key revoked through the API while B is active: B leaves the session, A goes on.
    let id = key_id(&app, &operator, "brand-b", "brand-b-admin").await;
    let revoked = with_key(
        &app,
        &operator,
        Method::DELETE,
        &format!("/workspaces/brand-b/keys/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(revoked.status(), 200);
    let after = browser.get("/console/links").await;
    assert_eq!(after.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&after), "/console/?left=brand-b");
    let overview = browser.page("/console/?left=brand-b").await;
    assert!(
        overview.contains("Workspace brand-b left this session"),
        "{overview}"
    );
    let page = browser.page("/console/links").await;
    assert!(
        page.contains("a-spring") && !page.contains("b-autumn"),
        "{page}"
    );
    assert!(!page.contains("/console/switch"), "B left: {page}");

    // Sign-out ends the whole session.
    let added = add_workspace(&mut browser, &b_viewer).await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let csrf = browser.csrf().await;
    let out = browser.post("/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(location(&out), "/console/sign-in");
    for path in ["/console/", "/console/links"] {
        let answer = browser.get(path).await;
        assert_eq!(location(&answer), "/console/sign-in", "{path}");
    }
}

async fn the_workspace_page_creates_and_revokes_keys_with_audit_rows(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/workspace").await;
    assert!(page.contains("<code>default</code>"), "{page}");
    assert!(page.contains("(setting default)"), "{page}");
    assert!(
        !page.contains("used today"),
        "no quota, nothing counted: {page}"
    );
    let csrf = csrf_of(&page);

    // With a daily quota, today's links are counted and shown.
    let operator = operator_key(&app).await;
    let quota = with_key(&app, &operator, Method::PATCH, "/workspaces/default")
        .json(&json!({"quotas": {"links_per_day": 5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(quota.status(), 200);
    app.create_code("https://one.example/").await;
    app.create_code("https://two.example/").await;
    let page = browser.page("/console/workspace").await;
    assert!(page.contains("5, 2 used today"), "{page}");

    // Refused: no token; a blank name or a burst without a rate (nothing stored).
    let form = |csrf: &str, name: &str, rate: &str, burst: &str| -> Vec<(&'static str, String)> {
        vec![
            ("csrf", csrf.to_owned()),
            ("name", name.to_owned()),
            ("role", "issuer".to_owned()),
            ("per_second", rate.to_owned()),
            ("burst", burst.to_owned()),
        ]
    };
    let keys_before = app.storage().await.list_api_keys(None).await.unwrap().len();
    for (bad, status) in [
        (form("", "campaign tool", "", ""), StatusCode::FORBIDDEN),
        (form(&csrf, "  ", "", ""), StatusCode::UNPROCESSABLE_ENTITY),
        (
            form(&csrf, "tool", "", "5"),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let answer = browser.post("/console/workspace/keys", &pairs(&bad)).await;
        assert_eq!(answer.status(), status, "{bad:?}");
    }
    assert_eq!(
        app.storage().await.list_api_keys(None).await.unwrap().len(),
        keys_before
    );

    // Created: shown once, it works, and the audit row names the console user.
    let good = form(&csrf, "campaign tool", "5", "10");
    let answer = browser.post("/console/workspace/keys", &pairs(&good)).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let secret = shown_key(&answer.text().await.unwrap());
    let with_new = with_key(&app, &secret, Method::GET, "/links")
        .send()
        .await
        .unwrap();
    assert_eq!(with_new.status(), 200);
    let listed = browser.page("/console/workspace").await;
    assert!(listed.contains("campaign tool") && listed.contains("5/s, burst 10"));
    assert!(!listed.contains(&secret), "never shown again");
    let created = audit_rows(&app, "key.create").await;
    let row = (created.iter())
        .find(|row| row.changes.contains("campaign tool"))
        .expect("a key.create row");
    assert_eq!(row.actor_kind, "console");
    assert_eq!(row.workspace_id, 1);
    assert!(!row.changes.contains(&secret));

    // Revoked after a confirmation page: the key is refused, the row is there.
    let id = row.object.clone();
    let confirm = (browser.page(&format!("/console/workspace/keys/{id}/revoke"))).await;
    assert!(confirm.contains("Revoke key campaign tool?"));
    let path = format!("/console/workspace/keys/{id}/revoke");
    let refused = browser.post(&path, &[]).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let revoked = browser.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(location(&revoked), "/console/workspace");
    let with_new = with_key(&app, &secret, Method::GET, "/links")
        .send()
        .await
        .unwrap();
    assert_eq!(with_new.status(), 401);
    let rows = audit_rows(&app, "key.revoke").await;
    assert!(rows
        .iter()
        .any(|r| r.object == id && r.actor_kind == "console"));

    // A viewer gets the 403 page, for the page and its forms.
    let viewer = workspace_key_of_default(&app).await;
    let mut other = Browser::new(&app);
    other.sign_in(&viewer).await;
    assert!(!other
        .page("/console/")
        .await
        .contains("/console/workspace\""));
    let viewer_csrf = other.csrf().await;
    assert_eq!(
        other.get("/console/workspace").await.status(),
        StatusCode::FORBIDDEN
    );
    let good = form(&viewer_csrf, "campaign tool", "5", "10");
    let answer = other.post("/console/workspace/keys", &pairs(&good)).await;
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);

    // Revoking the key the session uses signs this workspace out.
    let own = (app.storage().await.list_api_keys(None).await.unwrap())
        .into_iter()
        .find(|key| key.key_hash == shortlink_api::hash_api_key(API_KEY))
        .unwrap();
    let path = format!("/console/workspace/keys/{}/revoke", own.id);
    let out = browser.post(&path, &[("csrf", &csrf)]).await;
    let after = follow(&mut browser, out).await;
    assert_eq!(after.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&after), "/console/sign-in");
}

/// A viewer key of the default workspace, made by its admin through the API.
async fn workspace_key_of_default(app: &TestApp) -> String {
    let answer = with_key(app, API_KEY, Method::POST, "/keys")
        .json(&json!({"name": "desk", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let key: Value = answer.json().await.unwrap();
    key["key"].as_str().unwrap().to_owned()
}

/// A form's fields as the browser posts them.
fn pairs<'a>(form: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    form.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The key a "key created" page shows once.
fn shown_key(page: &str) -> String {
    let secret = (page.split("id=\"new-key\"").nth(1))
        .and_then(|rest| rest.split('>').nth(1))
        .and_then(|rest| rest.split('<').next())
        .expect("the key on the page");
    assert!(secret.starts_with("slk_"), "{secret}");
    secret.to_owned()
}

async fn an_operator_session_manages_workspaces_and_sees_no_links(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://default.example/").await;
    let operator = operator_key(&app).await;
    let mut browser = Browser::new(&app);
    let signed_in = browser.sign_in(&operator).await;
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    let overview = follow(&mut browser, signed_in).await;
    assert_eq!(location(&overview), "/console/workspaces");
    let page = browser.page("/console/workspaces").await;
    assert!(
        page.contains("default") && page.contains("(operator)"),
        "{page}"
    );
    assert!(!page.contains("/console/links"), "{page}");
    let csrf = csrf_of(&page);

    // No workspace page answers it: each one sends it to its own.
    for path in [
        "/console/".to_owned(),
        "/console/links".to_owned(),
        format!("/console/links/{code}"),
        "/console/campaigns".to_owned(),
        "/console/webhooks".to_owned(),
        "/console/workspace".to_owned(),
    ] {
        let answer = browser.get(&path).await;
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&answer), "/console/workspaces", "{path}");
    }
    let create = (browser.post(
        "/console/create",
        &[("csrf", &csrf), ("url", "https://x.example/")],
    ))
    .await;
    assert_eq!(location(&create), "/console/workspaces");
    assert_eq!(app.stored().await.links, 1);

    // Create: refused without the token or with a bad slug; then made, with a quota.
    let fields = |csrf: &str| -> Vec<(&'static str, String)> {
        let fields = [
            ("slug", "brand-c"),
            ("name", "Brand C"),
            ("links_per_day", "500"),
        ];
        let mut fields: Vec<_> = fields.map(|(k, v)| (k, v.to_owned())).into();
        fields.push(("csrf", csrf.to_owned()));
        fields
    };
    let no_token = browser
        .post("/console/workspaces", &pairs(&fields("")))
        .await;
    assert_eq!(no_token.status(), StatusCode::FORBIDDEN);
    let bad = (browser.post(
        "/console/workspaces",
        &[("slug", "Brand C"), ("csrf", &csrf)],
    ))
    .await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let made = browser
        .post("/console/workspaces", &pairs(&fields(&csrf)))
        .await;
    assert_eq!(location(&made), "/console/workspaces/brand-c");
    let page = browser.page("/console/workspaces/brand-c").await;
    assert!(page.contains("Brand C") && page.contains("500"), "{page}");
    let brand_c_in_the_api = || {
        send_json(with_key(
            &app,
            &operator,
            Method::GET,
            "/workspaces/brand-c",
        ))
    };
    let api = brand_c_in_the_api().await;
    assert_eq!(api["quotas"]["links_per_day"], 500);

    // Its first admin key, shown once; it signs in to brand-c.
    let answer = browser
        .post(
            "/console/workspaces/brand-c/keys",
            &[
                ("csrf", &csrf),
                ("name", "brand c admin"),
                ("role", "admin"),
            ],
        )
        .await;
    assert_eq!(answer.status(), StatusCode::OK);
    let secret = shown_key(&answer.text().await.unwrap());
    let mut client = Browser::new(&app);
    assert_eq!(
        client.sign_in(&secret).await.status(),
        StatusCode::SEE_OTHER
    );
    // Signed in to it: the header names the workspace as its page does.
    assert!(client.page("/console/").await.contains("(admin, Brand C)"));
    assert!(audit_rows(&app, "key.create")
        .await
        .iter()
        .any(|row| { row.changes.contains("brand c admin") && row.actor_kind == "console" }));

    // Rename and quotas; suspend (its console session is out) and resume.
    let changed = browser
        .post(
            "/console/workspaces/brand-c/change",
            &[
                ("csrf", &csrf),
                ("name", "Brand C Ltd"),
                ("links_per_day", ""),
                ("webhooks", "3"),
            ],
        )
        .await;
    assert_eq!(location(&changed), "/console/workspaces/brand-c");
    let api = brand_c_in_the_api().await;
    assert_eq!(api["name"], "Brand C Ltd");
    assert!(api["quotas"]["links_per_day"].is_null());
    assert_eq!(api["quotas"]["webhooks"], 3);
    let suspend = (browser.post(
        "/console/workspaces/brand-c/suspend",
        &[("csrf", &csrf), ("suspended", "true")],
    ))
    .await;
    assert_eq!(suspend.status(), StatusCode::SEE_OTHER);
    let out = client.get("/console/").await;
    assert_eq!(location(&out), "/console/sign-in");
    let api = brand_c_in_the_api().await;
    assert!(api["suspended_at"].is_string());
    let resume = (browser.post(
        "/console/workspaces/brand-c/suspend",
        &[("csrf", &csrf), ("suspended", "false")],
    ))
    .await;
    assert_eq!(resume.status(), StatusCode::SEE_OTHER);
    let api = brand_c_in_the_api().await;
    assert!(api["suspended_at"].is_null());
    assert!(!audit_rows(&app, "workspace.update").await.is_empty());

    // The operator's audit page shows every chain; a workspace admin's page not the installation's.
    let audit = browser.page("/console/audit").await;
    assert!(
        audit.contains("workspace.create") && audit.contains("key.create"),
        "{audit}"
    );
    let mut admin = Browser::new(&app);
    admin.sign_in(API_KEY).await;
    assert!(!admin
        .page("/console/audit")
        .await
        .contains("workspace.create"));
    assert_eq!(
        admin.get("/console/workspaces").await.status(),
        StatusCode::FORBIDDEN
    );

    // Delete: the typed slug must match; then its data goes.
    let confirm = browser.page("/console/workspaces/brand-c/delete").await;
    assert!(confirm.contains("Type the slug"));
    let wrong = (browser.post(
        "/console/workspaces/brand-c/delete",
        &[("csrf", &csrf), ("confirm", "brand")],
    ))
    .await;
    assert_eq!(wrong.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let kept = with_key(&app, &operator, Method::GET, "/workspaces/brand-c")
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200);
    let no_token = (browser.post(
        "/console/workspaces/brand-c/delete",
        &[("confirm", "brand-c")],
    ))
    .await;
    assert_eq!(no_token.status(), StatusCode::FORBIDDEN);
    let deleted = (browser.post(
        "/console/workspaces/brand-c/delete",
        &[("csrf", &csrf), ("confirm", "brand-c")],
    ))
    .await;
    assert_eq!(location(&deleted), "/console/workspaces");
    let gone = with_key(&app, &operator, Method::GET, "/workspaces/brand-c")
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    assert!(!audit_rows(&app, "workspace.delete").await.is_empty());
    assert!(!browser
        .page("/console/workspaces")
        .await
        .contains("brand-c"));

    // Beside a workspace's key in one session, the operator is one more place in the switcher.
    let page = browser.page("/console/sign-in").await;
    let added = (browser.post(
        "/console/sign-in",
        &[("key", API_KEY), ("csrf", &csrf_of(&page))],
    ))
    .await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let links = browser.page("/console/links").await;
    assert!(
        links.contains(&code) && links.contains("operator (all workspaces)"),
        "{links}"
    );
    let switched = (browser.post("/console/switch", &[("to", "-operator"), ("csrf", &csrf)])).await;
    assert_eq!(switched.status(), StatusCode::SEE_OTHER);
    let links = browser.get("/console/links").await;
    assert_eq!(location(&links), "/console/workspaces");
    let out = browser.post("/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(location(&out), "/console/sign-in");
    let after = browser.get("/console/workspaces").await;
    assert_eq!(location(&after), "/console/sign-in");
}

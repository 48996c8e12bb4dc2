//! Twilio auth tokens are sealed in SQL (issue 77): a row read raw holds no auth token, the
//! signature is still checked with it, a row from before sealing is sealed at the next start
//! and keeps working, and a sealed value moved onto another token opens nothing.

use super::*;
use shortlink_messaging::receipts::twilio::signature as twilio_signature;

/// POSTs `file` (a Twilio form) to token `token`'s callback for `code`, signed with `secret`.
async fn signed(app: &TestApp, token: &str, code: &str, secret: &str, file: &str) -> u16 {
    let url = app.url(&format!("/callbacks/{token}/twilio?code={code}"));
    let form = fixture(file);
    let params: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let answer = (app.client.post(&url))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "x-twilio-signature",
            twilio_signature(secret, &url, &params),
        )
        .body(form)
        .send()
        .await
        .unwrap();
    answer.status().as_u16()
}

async fn stored(app: &TestApp, id: &str) -> String {
    let sql = format!("SELECT twilio_auth_token FROM callback_tokens WHERE id = '{id}'");
    app.db.texts(&sql).await.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twilio_auth_tokens_are_sealed_and_legacy_rows_resealed() {
    let dir = testkit::temp_dir();
    let database_url = Backend::Sqlite.fresh_database_url(dir.path());
    let app = spawn_app_at(
        Backend::Sqlite,
        database_url.clone(),
        testkit::temp_dir(),
        &[],
    )
    .await;
    let code = app.create_code("https://shop.example/t").await;
    let secret = "twilio_auth_0123456789abcdef0123";
    let (id, token) = callback_token(&app, API_KEY, "twilio", Some(secret)).await;
    let raw = stored(&app, &id).await;
    assert!(raw.starts_with("v1:") && !raw.contains(secret), "{raw}");
    let sent = "twilio-status-sent.form";
    assert_eq!(signed(&app, &token, &code, secret, sent).await, 201);
    assert_eq!(
        signed(&app, &token, &code, "another-secret", sent).await,
        403
    );

    // A sealed value moved onto another token (a row copied) opens nothing: refused.
    let (other_id, other) = callback_token(&app, API_KEY, "twilio", Some("other-secret")).await;
    let moved =
        format!("UPDATE callback_tokens SET twilio_auth_token = '{raw}' WHERE id = '{other_id}'");
    assert_eq!(app.db.execute(&moved).await, 1);
    assert_eq!(signed(&app, &other, &code, secret, sent).await, 403);

    // A row written before sealing: plain text, read as such, sealed by the next start.
    let legacy = format!(
        "UPDATE callback_tokens SET twilio_auth_token = 'legacy-plain-secret' WHERE id = '{id}'"
    );
    assert_eq!(app.db.execute(&legacy).await, 1);
    let delivered = "twilio-status-delivered.form";
    assert_eq!(
        signed(&app, &token, &code, "legacy-plain-secret", delivered).await,
        201
    );
    drop(app);
    let app = spawn_app_at(Backend::Sqlite, database_url, testkit::temp_dir(), &[]).await;
    let raw = stored(&app, &id).await;
    assert!(raw.starts_with("v1:") && !raw.contains("legacy"), "{raw}");
    let undelivered = "twilio-status-undelivered-30003.form";
    assert_eq!(
        signed(&app, &token, &code, "legacy-plain-secret", undelivered).await,
        201
    );
}

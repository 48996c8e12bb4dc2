//! Sent links survive a module configured with another code secret, and a backup restored onto a
//! fresh machine (docs/BACKUP.md).

use serde_json::json;
use shortlink_e2e::{location, NginxOptions, System};
use testkit::RedisServer;

/// Not the sidecar's `CODE_SECRET`.
const OTHER_SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

#[test]
fn a_module_with_another_secret_never_answers_404_to_a_valid_code() {
    let system = System::start_with(NginxOptions {
        code_secret: Some(OTHER_SECRET),
        ..NginxOptions::default()
    });
    let codes: Vec<String> = (0..8)
        .map(|i| system.create(json!({ "url": format!("https://example.com/{i}") })))
        .collect();
    let before = system.nginx.counters();

    // Under the module's secret most of these fail the check character; they are looked up
    // anyway and answered from Redis.
    for (i, code) in codes.iter().enumerate() {
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status(), 302, "/{code}");
        assert_eq!(location(&response), format!("https://example.com/{i}"));
    }
    // A valid code Redis does not hold (yet): not a 404 from the module, but the fallback,
    // where the sidecar answers from SQL.
    let missing = system.create(json!({"url": "https://example.com/missing"}));
    system.redis.cli(&["DEL", &format!("sl:c:{missing}")]);
    let response = system.nginx.get("s2.test", &format!("/{missing}"));
    assert_eq!(response.status(), 302);
    assert_eq!(location(&response), "https://example.com/missing");

    let after = system.nginx.counters();
    assert!(
        after["scheme_mismatch"] > before["scheme_mismatch"],
        "{after:?}"
    );
    assert!(after["fallbacks"] > before["fallbacks"], "{after:?}");
    assert_eq!(after["check_rejects"], before["check_rejects"]);
    let logged = system.nginx.error_log_lines("names code scheme");
    assert_eq!(logged.len(), 1, "once per change: {logged:?}");
    assert!(logged[0].contains("[error]"), "{logged:?}");
}

#[test]
fn without_a_fallback_a_scheme_mismatch_is_a_503_not_a_404() {
    let system = System::start_with(NginxOptions {
        code_secret: Some(OTHER_SECRET),
        fallback: "off",
        cache: "off",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/x"}));
    system.redis.cli(&["DEL", &format!("sl:c:{code}")]);
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        503
    );
    assert_eq!(system.nginx.counters()["scheme_mismatch"], 1);
}

#[test]
fn a_backup_restored_onto_a_fresh_machine_keeps_every_link() {
    let old = System::start();
    let mut sent: Vec<(String, u16, String)> = Vec::new();
    for i in 0..5 {
        let url = format!("https://example.com/single/{i}");
        sent.push((old.create(json!({ "url": url })), 302, url));
    }
    let (status, batch) = old.api().post(
        "/links/batch",
        &json!((0..20)
            .map(|i| json!({"url": format!("https://example.com/batch/{i}"), "redirect": 301}))
            .collect::<Vec<_>>()),
    );
    assert_eq!(status, 200, "{batch}");
    for (i, result) in batch["results"].as_array().unwrap().iter().enumerate() {
        let code = result["link"]["code"].as_str().unwrap().to_owned();
        sent.push((code, 301, format!("https://example.com/batch/{i}")));
    }
    let alias = old.create(json!({"url": "https://example.com/alias", "code": "spring-sale"}));
    sent.push((alias, 302, "https://example.com/alias".to_owned()));
    let revoked = old.create(json!({"url": "https://example.com/revoked"}));
    assert_eq!(old.api().delete(&format!("/links/{revoked}")).0, 200);

    // The backup, taken while the sidecar serves; the secret file is kept with it.
    let backup = testkit::temp_dir();
    let file = backup.path().join("shortlink.db");
    let output = old.sidecar_cli(&["backup", "--to", file.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    drop(old);

    // A fresh machine: an empty state directory with the restored database, a fresh Redis.
    let dir = testkit::temp_dir();
    std::fs::copy(&file, dir.path().join("shortlink.db")).unwrap();
    let new = System::start_in(dir, RedisServer::start(), NginxOptions::default());
    for (code, status, url) in &sent {
        let response = new.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status(), *status, "/{code}");
        assert_eq!(location(&response), *url, "/{code}");
    }
    assert_eq!(
        new.nginx.get("s2.test", &format!("/{revoked}")).status(),
        410
    );
    let counters = new.nginx.counters();
    assert_eq!(counters["fallbacks"], 0, "answered from the refilled Redis");
    assert_eq!(counters["scheme_mismatch"], 0);
    // New links get codes of their own.
    let fresh = new.create(json!({"url": "https://example.com/after-restore"}));
    assert!(sent.iter().all(|(code, _, _)| *code != fresh));
    assert_ne!(fresh, revoked);
}

//! Secrets on disk and nginx's fallback key (issue 26): the key nginx sends to
//! `/api/v1/resolve/{code}` has the `resolve` role, sits in an include of mode 0600 (never in
//! nginx.conf), and can resolve but not create links.

use serde_json::{json, Value};
use shortlink_e2e::{http_client, run_as_nobody, NginxOptions, System};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_fallback_key_is_private_and_only_resolves() {
    let mut system = System::start_with(NginxOptions {
        cache: "off",
        ..NginxOptions::default()
    });
    let prefix = system.nginx.prefix.clone();
    let key_conf = prefix.join("resolve-key.conf");
    let secrets = [key_conf.clone(), prefix.join("code-secret")];
    for file in &secrets {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let included = std::fs::read_to_string(&key_conf).unwrap();
    assert!(included.contains(&system.resolve_key), "{included}");
    for file in ["nginx.conf", "domains.conf", "error-pages.conf"] {
        let text = std::fs::read_to_string(prefix.join(file)).unwrap();
        assert!(!text.contains(&system.resolve_key), "the key is in {file}");
    }

    // A local user: with the directories open to everyone, the secrets' own modes keep them out,
    // while a file of mode 0644 beside them is readable (the check itself works).
    std::fs::set_permissions(system.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let readable = prefix.join("domains.conf");
    match run_as_nobody("cat", &[readable.as_os_str()]) {
        Some(output) => {
            assert!(output.status.success(), "nobody reads domains.conf");
            for file in &secrets {
                let output = run_as_nobody("cat", &[file.as_os_str()]).unwrap();
                assert!(!output.status.success(), "nobody read {}", file.display());
            }
        }
        None => eprintln!("not root: cannot switch to nobody; checked the file modes only"),
    }

    // The key, stolen, cannot issue a link (the phishing link through nginx's API server).
    let api = format!("http://127.0.0.1:{}/api/v1", system.nginx.api_port);
    let response = http_client()
        .post(format!("{api}/links"))
        .bearer_auth(&system.resolve_key)
        .json(&json!({"url": "https://attacker.example/phish"}))
        .send()
        .unwrap();
    assert_eq!(response.status(), 403);
    let error: Value = response.json().unwrap();
    assert_eq!(error["error"]["code"], "forbidden");

    // What it is for: with Redis down, nginx's fallback resolves through the sidecar with it.
    let code = system.create(json!({"url": "https://example.com/fallback"}));
    system.redis.kill();
    let before = system.nginx.counters()["fallbacks"];
    let response = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(response.status(), 302);
    assert_eq!(
        response.headers()["location"],
        "https://example.com/fallback"
    );
    assert_eq!(system.nginx.counters()["fallbacks"], before + 1);
}

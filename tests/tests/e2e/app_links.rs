//! iOS universal links and Android App Links through the real nginx: the apps configured once in
//! apps.conf are claimed on every pool domain, at the two well-known paths, as JSON of Apple's and
//! Google's published formats, with no redirect; a domain added to the pool serves them after the
//! reload that adds it; `nginx -t` refuses a malformed fingerprint; codes still redirect.

use serde_json::{json, Value};
use shortlink_e2e::System;
use std::time::Duration;
use testkit::wait_until;

const APPLE: &str = "/.well-known/apple-app-site-association";
const ANDROID: &str = "/.well-known/assetlinks.json";
const FINGERPRINT: &str =
    "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5";

fn apps_conf(fingerprint: &str) -> String {
    format!(
        "shortlink_apple_app ABCDE12345.com.example.shop \"/*\" \"NOT /promo/*\";\n\
         shortlink_apple_app ABCDE12345.com.example.beta;\n\
         shortlink_android_app com.example.shop {fingerprint};\n"
    )
}

/// The file at `path` on `host`: 200, JSON by its content type, no redirect, parsed.
fn served(system: &System, host: &str, path: &str) -> Value {
    let response = system.nginx.get(host, path);
    assert_eq!(response.status().as_u16(), 200, "{host}{path}");
    assert!(response.headers().get("location").is_none());
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json",
        "{host}{path}"
    );
    serde_json::from_slice(&response.bytes().unwrap()).expect("valid JSON")
}

#[test]
fn every_pool_domain_claims_the_apps_from_one_configuration() {
    let system = System::start();
    let code = system.create(json!({"url": "https://shop.example/"}));
    for path in [APPLE, ANDROID] {
        assert_eq!(
            system.nginx.get("s1.test", path).status().as_u16(),
            404,
            "no app configured yet: {path}"
        );
    }

    let apps = system.nginx.prefix.join("apps.conf");
    std::fs::write(&apps, apps_conf(FINGERPRINT)).unwrap();
    system.nginx.reload_and_retire_old_workers();
    // The reload returned once the old workers exited; the new ones answer every file on every
    // domain.
    let everywhere = |hosts: &[&str]| {
        wait_until(Duration::from_secs(10), || {
            hosts.iter().all(|host| {
                [APPLE, ANDROID]
                    .iter()
                    .all(|path| system.nginx.get(host, path).status() == 200)
            })
        })
    };
    assert!(
        everywhere(&["s1.test", "s2.test"]),
        "the reload did not bring the files; log:\n{}",
        system.nginx.error_log()
    );

    for host in ["s1.test", "s2.test"] {
        let apple = served(&system, host, APPLE);
        let details = &apple["applinks"]["details"];
        assert_eq!(details.as_array().unwrap().len(), 2);
        assert_eq!(details[0]["appIDs"], json!(["ABCDE12345.com.example.shop"]));
        assert_eq!(
            details[0]["components"],
            json!([{"/": "/*"}, {"/": "/promo/*", "exclude": true}])
        );
        assert_eq!(details[0]["appID"], "ABCDE12345.com.example.shop");
        assert_eq!(details[0]["paths"], json!(["/*", "NOT /promo/*"]));
        assert_eq!(details[1]["components"], json!([{"/": "/*"}]));

        let android = served(&system, host, ANDROID);
        assert_eq!(
            android,
            json!([{
                "relation": ["delegate_permission/common.handle_all_urls"],
                "target": {
                    "namespace": "android_app",
                    "package_name": "com.example.shop",
                    "sha256_cert_fingerprints": [FINGERPRINT],
                }
            }])
        );
        // Verifiers add no query, but one changes nothing.
        assert_eq!(served(&system, host, &format!("{APPLE}?v=1")), apple);
        // The files sit beside the codes, which still redirect.
        assert_eq!(
            system
                .nginx
                .get(host, &format!("/{code}"))
                .status()
                .as_u16(),
            302
        );
    }
    assert_eq!(
        system.nginx.get("not-ours.test", APPLE).status().as_u16(),
        404,
        "only pool domains claim the apps"
    );
    assert_eq!(
        system
            .nginx
            .get("s1.test", "/.well-known/other.json")
            .status()
            .as_u16(),
        404
    );

    // A domain added to the pool claims them after the reload that adds it.
    let domains = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    let domains = domains.replace("s1.test s2.test", "s1.test s2.test s3.test");
    std::fs::write(system.nginx.domains_file(), domains).unwrap();
    system.nginx.reload_and_retire_old_workers();
    assert!(everywhere(&["s1.test", "s2.test", "s3.test"]));
    assert_eq!(
        served(&system, "s3.test", ANDROID)[0]["target"]["package_name"],
        "com.example.shop"
    );

    // A fingerprint cut short never reaches a verifier: the configuration test names it.
    std::fs::write(&apps, apps_conf(&FINGERPRINT[..20])).unwrap();
    let (ok, output) = system.nginx.test_config();
    assert!(
        !ok && output.contains("shortlink_android_app") && output.contains("fingerprint"),
        "{output}"
    );
}

//! iOS universal links and Android App Links through the real nginx: the apps configured once in
//! apps.conf are claimed on every pool domain, at the two well-known paths, as JSON of Apple's and
//! Google's published formats, with no redirect; a domain added to the pool serves them after the
//! reload that adds it; `nginx -t` refuses a malformed fingerprint; codes still redirect. With
//! workspaces, each brand's hosts claim that brand's apps only, and an apps.conf from before
//! workspaces is the default workspace's.

use serde_json::{json, Value};
use shortlink_e2e::{templates_with, NginxOptions, System};
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

const A_HOST: &str = "s1.brand-a.test";
const B_HOST: &str = "s1.brand-b.test";
/// Mapped to a workspace that names no app.
const C_HOST: &str = "s1.brand-c.test";
/// Mapped to "": no workspace at all.
const EMPTY_HOST: &str = "s1.empty.test";
const OTHER_FINGERPRINT: &str =
    "AA:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5";

/// The Apple app IDs a host's file names (none: a 404).
fn apple_ids(system: &System, host: &str) -> Vec<String> {
    let response = system.nginx.get(host, APPLE);
    if response.status().as_u16() == 404 {
        return Vec::new();
    }
    let apple = served(system, host, APPLE);
    (apple["applinks"]["details"].as_array().unwrap().iter())
        .map(|app| app["appID"].as_str().unwrap().to_owned())
        .collect()
}

/// The Android packages a host's file names (none: a 404).
fn android_packages(system: &System, host: &str) -> Vec<String> {
    let response = system.nginx.get(host, ANDROID);
    if response.status().as_u16() == 404 {
        return Vec::new();
    }
    (served(system, host, ANDROID).as_array().unwrap().iter())
        .map(|app| app["target"]["package_name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn each_brands_hosts_claim_its_own_apps_and_an_old_apps_conf_stays_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    templates_with(
        dir.path(),
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} brand-a; {B_HOST} brand-b; {C_HOST} brand-c; {EMPTY_HOST} \"\";"),
    );
    let system = System::start_with(NginxOptions {
        conf_dir: Some(dir.path().to_owned()),
        pool: Some(
            ["s1.test", A_HOST, B_HOST, C_HOST, EMPTY_HOST]
                .map(str::to_owned)
                .to_vec(),
        ),
        ..NginxOptions::default()
    });
    // An apps.conf written before workspaces (the default's), then each brand's own lines.
    let apps = format!(
        "{}\
         shortlink_apple_app workspace=brand-a AAAAA11111.com.brand-a.shop;\n\
         shortlink_android_app workspace=brand-a com.brand_a.shop {OTHER_FINGERPRINT};\n\
         shortlink_apple_app workspace=brand-b BBBBB22222.com.brand-b.app \"/*\";\n",
        apps_conf(FINGERPRINT)
    );
    std::fs::write(system.nginx.prefix.join("apps.conf"), apps).unwrap();
    system.nginx.reload_and_retire_old_workers();
    assert!(
        wait_until(Duration::from_secs(10), || {
            system.nginx.get(A_HOST, APPLE).status() == 200
        }),
        "the reload did not bring the files; log:\n{}",
        system.nginx.error_log()
    );

    let default_apps = ["ABCDE12345.com.example.shop", "ABCDE12345.com.example.beta"];
    assert_eq!(apple_ids(&system, "s1.test"), default_apps);
    assert_eq!(android_packages(&system, "s1.test"), ["com.example.shop"]);
    assert_eq!(apple_ids(&system, A_HOST), ["AAAAA11111.com.brand-a.shop"]);
    assert_eq!(android_packages(&system, A_HOST), ["com.brand_a.shop"]);
    let a_android = served(&system, A_HOST, ANDROID);
    assert_eq!(
        a_android[0]["target"]["sha256_cert_fingerprints"],
        json!([OTHER_FINGERPRINT])
    );
    assert_eq!(apple_ids(&system, B_HOST), ["BBBBB22222.com.brand-b.app"]);
    for (host, path) in [
        (B_HOST, ANDROID),
        (C_HOST, APPLE),
        (C_HOST, ANDROID),
        (EMPTY_HOST, APPLE),
        (EMPTY_HOST, ANDROID),
        ("not-ours.test", APPLE),
    ] {
        assert_eq!(
            system.nginx.get(host, path).status().as_u16(),
            404,
            "{host}{path}"
        );
    }
    // A brand's code still redirects on its own host beside its files.
    let code = system.create(json!({"url": "https://shop.example/default"}));
    assert_eq!(
        system
            .nginx
            .get("s1.test", &format!("/{code}"))
            .status()
            .as_u16(),
        302
    );

    // A malformed workspace name is refused by the configuration test, naming the directive.
    std::fs::write(
        system.nginx.prefix.join("apps.conf"),
        "shortlink_apple_app workspace=Brand-A AAAAA11111.com.brand-a.shop;\n",
    )
    .unwrap();
    let (ok, output) = system.nginx.test_config();
    assert!(
        !ok && output.contains("shortlink_apple_app") && output.contains("workspace name"),
        "{output}"
    );
}

//! Issue 40 end to end: 100,000 links imported from another shortener (a generic CSV, through the
//! importer's one write path) each answer through nginx as the old shortener answered them,
//! checked by `verify-import` against the redirect server (with each link's domain as `Host`),
//! and a sample asked directly.
//!
//! Only codes a pool domain looks up are used: aliases (`[A-Za-z0-9_-]{3,64}`, not of the
//! generated shape) and codes of the generated shape with a valid check character (as 1 Bitly
//! code in 62 has). One- and two-character codes, `.`, `~` and bad check characters need an
//! imported domain's server of its own (`shortlink_imported_codes`): imported_codes.rs, and
//! migration_guide.rs for the whole YOURLS path through scripts/run.

use serde_json::{json, Value};
use shortlink_e2e::{status_and_location, System, CODE_SECRET, POOL};
use std::fmt::Write;

const LINKS: u64 = 100_000;

#[test]
fn a_hundred_thousand_imported_links_redirect_as_before_through_nginx() {
    let system = System::start();
    let secret = shortcode::parse_hex_secret(CODE_SECRET).unwrap();
    let scheme = shortcode::CodeScheme::new(&secret, shortcode::DEFAULT_BODY_LEN, true).unwrap();
    let code = |i: u64| {
        if i % 100 == 0 {
            // Far from our sequence, as another shortener's code of our shape is.
            scheme.encode(3_000_000_000 + i).unwrap()
        } else {
            format!("old-{i:x}")
        }
    };
    let mut csv = String::from("code,url,domain,created_at,visits\n");
    for i in 0..LINKS {
        let domain = POOL[(i % 2) as usize];
        writeln!(
            csv,
            "{},https://old.example/p/{i}?utm_source=sms,{domain},2023-01-01T00:00:00Z,{}",
            code(i),
            i % 5
        )
        .unwrap();
    }
    let dir = testkit::temp_dir();
    let file = dir.path().join("old-links.csv");
    std::fs::write(&file, csv).unwrap();
    let report = dir.path().join("import.json");
    let file = file.to_str().unwrap();

    let output = system.sidecar_cli(&[
        "import",
        "--from",
        "csv",
        file,
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "import: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["imported"], LINKS, "{report}");

    let edge = format!("http://127.0.0.1:{}", system.nginx.redirect_port);
    let output = system.sidecar_cli(&[
        "verify-import",
        "--from",
        "csv",
        file,
        "--edge",
        &edge,
        "--concurrency",
        "32",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "verify-import: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("{LINKS} answer as before, 0 differ")),
        "{stdout}"
    );

    // A sample asked directly, on its own domain and on the other: one code, every pool domain.
    for i in [1, 100, 4_242, LINKS - 1] {
        let want = format!("https://old.example/p/{i}?utm_source=sms");
        for host in POOL {
            let response = system.nginx.get(host, &format!("/{}", code(i)));
            assert_eq!(
                status_and_location(&response),
                (302, want.clone()),
                "{i} on {host}"
            );
        }
    }

    // New links still get fresh codes, none of them an imported one.
    let new = system.create(json!({"url": "https://new.example/"}));
    assert!(!new.starts_with("old-"));
    assert!((0..LINKS).step_by(100).all(|i| code(i) != new));
}

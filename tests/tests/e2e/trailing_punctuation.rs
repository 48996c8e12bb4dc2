//! Links that survive trailing punctuation (issue 70): a short link a phone's auto-linker took
//! with the `.` or `)` after it, or a Chinese text's `。`, answers as the link, through the module
//! and, with Redis stopped, through nginx's fallback (the sidecar); counted as `recovered`. Paths
//! that are punctuation alone, or stripped to no link, stay 404s. Requests go over a bare socket:
//! an HTTP client would escape the raw characters itself.

use std::time::Duration;

use serde_json::json;
use shortlink_e2e::{raw_http, System};
use shortlink_wire::trailing::TRAILING;

const TARGET: &str = "https://shop.example/spring";
const ALIAS: &str = "spring-sale";
const ALIAS_TARGET: &str = "https://shop.example/sale";

fn escaped(c: char, upper: bool) -> String {
    let mut utf8 = [0; 4];
    c.encode_utf8(&mut utf8)
        .bytes()
        .map(|b| match upper {
            true => format!("%{b:02X}"),
            false => format!("%{b:02x}"),
        })
        .collect()
}

/// The paths a text makes of `/<code>`: every character of the table raw (but the space and `?`,
/// which a request line cannot carry in a path) and percent-encoded in either case, and runs.
fn glued(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for c in TRAILING {
        if !matches!(c, ' ' | '?') {
            paths.push(format!("/{code}{c}"));
        }
        paths.push(format!("/{code}{}", escaped(c, true)));
        paths.push(format!("/{code}{}", escaped(c, false)));
    }
    for run in [",)", "...", "%E3%80%82%E2%80%9D", ")%e3%80%82.", "。」"] {
        paths.push(format!("/{code}{run}"));
    }
    paths
}

/// Status and `Location` of `GET <path>` on the redirect server, the path sent byte for byte.
fn answer(system: &System, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: s1.test\r\nConnection: close\r\n\r\n");
    let response = raw_http(
        system.nginx.redirect_port,
        request.as_bytes(),
        Duration::from_secs(5),
    );
    let location = response.header("location").unwrap_or_default().to_owned();
    (response.status, location)
}

/// Every glued path of both links redirects to its link's target; the others answer 404.
fn assert_table(system: &System, code: &str, not_links: &[String]) -> usize {
    let mut asked = 0;
    for (code, target) in [(code, TARGET), (ALIAS, ALIAS_TARGET)] {
        for path in glued(code) {
            assert_eq!(answer(system, &path), (302, target.to_owned()), "{path}");
            asked += 1;
        }
    }
    for path in not_links {
        assert_eq!(answer(system, path).0, 404, "{path}");
    }
    asked
}

#[test]
fn a_link_with_glued_punctuation_redirects_through_the_module_and_the_fallback() {
    let mut system = System::start();
    let code = system.create(json!({"url": TARGET}));
    system.create(json!({"url": ALIAS_TARGET, "code": ALIAS}));
    // Punctuation alone, stripped to a code no link has, or punctuation inside the path.
    let not_links = [
        "/.".to_owned(),
        "/%E3%80%82".to_owned(),
        "/,)".to_owned(),
        "/no-such-link.".to_owned(),
        format!("/{code}x."),
        format!("/{code}.x"),
        format!("/{code}%E3%80"),
        format!("/{code}+"),
    ];

    let before = system.nginx.counters();
    let asked = assert_table(&system, &code, &not_links) as u64;
    let after = system.nginx.counters();
    assert_eq!(after["recovered"], before["recovered"] + asked);
    assert_eq!(after["redirects"], before["redirects"] + asked);
    assert_eq!(after["fallbacks"], before["fallbacks"]);

    system.redis.stop();
    let before = system.nginx.counters();
    assert_table(&system, &code, &not_links);
    let after = system.nginx.counters();
    // Every stripped path that was a code shape went to the sidecar, which found the link.
    assert!(
        after["fallbacks"] >= before["fallbacks"] + asked,
        "{before:?} {after:?}"
    );
}

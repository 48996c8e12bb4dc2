//! Compose end to end (issue 37): a campaign composed through nginx's internal API server, then
//! every issued link followed on the redirect server, with the scheme in the text and without;
//! a dry run issues nothing.

use shortlink_e2e::{status_and_location, System};

const TEMPLATE: &str = "Hi {{name}}, \u{2019}20% off\u{2019} today: {{link}} STOP to end";

/// The compose path with its query (`reqwest` is built here without its `query` feature).
fn compose_path(query: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let pairs: Vec<String> = (query.iter())
        .map(|(name, value)| format!("{name}={}", encode(value)))
        .collect();
    format!("/compose?{}", pairs.join("&"))
}

fn recipients() -> String {
    [
        r#"{"phone": "06 12 34 56 78", "ref": "r1", "variables": {"name": "Ann"}, "url": "https://example.com/a?x=1"}"#,
        r#"{"phone": "not a number", "ref": "r2", "variables": {"name": "Bo"}, "url": "https://example.com/b"}"#,
        r#"{"phone": "+44 7400 123456", "ref": "r3", "variables": {"name": "Cy"}, "url": "https://example.com/c"}"#,
    ]
    .join("\n")
}

fn links_stored(system: &System) -> usize {
    let (status, page) = system.api().get("/links?limit=1000");
    assert_eq!(status, 200);
    page["links"].as_array().expect("links").len()
}

#[test]
fn composed_links_redirect_through_nginx_and_a_dry_run_issues_nothing() {
    let system = System::start();
    let query = [
        ("template", TEMPLATE),
        ("country", "FR"),
        ("replace_lookalikes", "true"),
    ];
    let dry = [query[0], query[1], query[2], ("dry_run", "true")];
    let (status, lines) = system.api().post_ndjson(&compose_path(&dry), recipients());
    assert_eq!(status, 200, "{lines:?}");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[..3].iter().all(|line| line.get("code").is_none()));
    assert_eq!(links_stored(&system), 0, "a dry run issues nothing");

    let (status, lines) = system
        .api()
        .post_ndjson(&compose_path(&query), recipients());
    assert_eq!(status, 200, "{lines:?}");
    assert_eq!(lines[1]["error"]["code"], "invalid_phone");
    for (line, target) in [
        (&lines[0], "https://example.com/a?x=1"),
        (&lines[2], "https://example.com/c"),
    ] {
        assert_eq!(line["status"], 201, "{line}");
        assert_eq!(line["encoding"], "GSM-7", "look-alikes replaced: {line}");
        let short_url = line["short_url"].as_str().unwrap();
        let text = line["text"].as_str().unwrap();
        assert!(text.contains(&format!(" {short_url} ")), "{text}");
        follow(&system, short_url, target);
    }
    assert_eq!(lines[3]["summary"]["composed"], 2);
    assert_eq!(lines[3]["summary"]["replaced"], 2);
    assert_eq!(links_stored(&system), 2);
    // The same dry run measured what the real one sent.
    let (_, dry_lines) = system.api().post_ndjson(&compose_path(&dry), recipients());
    assert_eq!(dry_lines[3]["summary"], lines[3]["summary"]);

    // Without the scheme: the text carries host/code, and that is what a phone opens.
    let stripped = [query[0], query[1], ("strip_scheme", "true")];
    let (_, lines) = system
        .api()
        .post_ndjson(&compose_path(&stripped), recipients());
    let short_url = lines[0]["short_url"].as_str().unwrap();
    let bare = short_url.split_once("://").unwrap().1;
    let text = lines[0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(" {bare} ")) && !text.contains("://"),
        "{text}"
    );
    follow(
        &system,
        &format!("http://{bare}"),
        "https://example.com/a?x=1",
    );
}

/// `short_url` answers a redirect to `target` on the real nginx (by its host name).
fn follow(system: &System, short_url: &str, target: &str) {
    let (host, code) = short_url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('/'))
        .expect("a short URL");
    let host = host.split(':').next().unwrap();
    let response = system.nginx.get(host, &format!("/{code}"));
    assert_eq!(
        status_and_location(&response),
        (302, target.to_owned()),
        "{short_url}"
    );
}

#[test]
fn a_hostile_template_through_nginx_is_refused_with_nothing_issued() {
    let system = System::start();
    for template in [
        "Hi {{name}, {{link}}",
        "Hi {{nmae}} {{link}}",
        &"x".repeat(2_000),
    ] {
        let query = [("template", template), ("country", "FR")];
        let (status, lines) = system
            .api()
            .post_ndjson(&compose_path(&query), recipients());
        assert_eq!(status, 422, "{template}");
        assert_eq!(lines[0]["error"]["code"], "invalid_template", "{lines:?}");
    }
    assert_eq!(links_stored(&system), 0);
}

/// A campaign far larger than the 64 KiB nginx holds for single requests goes through nginx's
/// API server streamed, as a batch does: 20,000 recipients (~2.4 MB) in a dry run, each answered.
#[test]
fn a_large_compose_streams_through_nginx() {
    const RECIPIENTS: usize = 20_000;
    let system = System::start();
    let body: Vec<String> = (0..RECIPIENTS)
        .map(|i| {
            format!(
                r#"{{"phone": "+44 7400 {:06}", "ref": "r{i}", "variables": {{"name": "N{i}"}}, "url": "https://example.com/p/{i}?utm_source=sms&utm_medium=bulk"}}"#,
                i % 1_000_000
            )
        })
        .collect();
    let query = [("template", TEMPLATE), ("dry_run", "true")];
    let (status, lines) = system
        .api()
        .post_ndjson(&compose_path(&query), body.join("\n"));
    assert_eq!(status, 200, "{:?}", lines.first());
    assert_eq!(
        lines.len(),
        RECIPIENTS + 1,
        "a line per recipient and the summary"
    );
    assert_eq!(links_stored(&system), 0, "a dry run issues nothing");
}

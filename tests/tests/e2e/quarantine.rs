//! Quarantine after the fact (issue 79), through nginx with two workers sharing the edge's
//! zone: a threat feed's new entry turns a live, cached link into the warning page (451, no
//! target) within 60 s on every worker; a release brings the redirect back; the entry coming
//! back quarantines again; and with Redis stopped the fallback never redirects it. The page's
//! report button and a home page's form reach the operator's queue.

use std::time::{Duration, Instant};

use serde_json::json;
use shortlink_e2e::{http_client, NginxOptions, System};
use testkit::wait_until;

/// The bound from a feed's change to the warning everywhere.
const WITHIN: Duration = Duration::from_secs(60);

/// One click on a connection of its own (so that either worker may take it): status,
/// `Location` and body.
fn click(system: &System, code: &str) -> (u16, String, Vec<u8>) {
    let response = http_client()
        .get(format!(
            "http://127.0.0.1:{}/{code}",
            system.nginx.redirect_port
        ))
        .header("Host", "s1.test")
        .header("Connection", "close")
        .send()
        .expect("redirect request");
    let status = response.status().as_u16();
    let location = (response.headers().get("location"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, location, response.bytes().unwrap().to_vec())
}

/// Ten clicks in a row all answered `status` (both workers take some).
fn answers(system: &System, code: &str, status: u16) -> bool {
    (0..10).all(|_| click(system, code).0 == status)
}

fn write_hosts(path: &std::path::Path, hosts: &[&str]) {
    let body: String = hosts
        .iter()
        .map(|host| format!("0.0.0.0 {host}\n"))
        .collect();
    std::fs::write(path, body).unwrap();
}

#[test]
fn a_feed_update_quarantines_a_cached_link_on_every_worker_and_the_fallback() {
    let conf = testkit::temp_dir();
    shortlink_e2e::templates_with(
        conf.path(),
        "shortlink_cache @CACHE@;",
        "shortlink_cache_zone shortlink_edge 1m;",
    );
    let mut system = System::start_with(NginxOptions {
        cache: "size=1000 ttl=1h negative_ttl=1s",
        workers: 2,
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    });
    let feed = conf.path().join("threat-hosts.txt");
    write_hosts(&feed, &["malware.example"]);
    let spec = format!("e2e=hosts:{}", feed.display());
    system.restart_sidecar_with(&["--threat-feeds", &spec, "--threat-refresh", "1s"]);
    let bad = system.create(json!({"url": "https://www.bad.example/offer"}));
    let good = system.create(json!({"url": "https://good.example/offer"}));
    // Both cached, by both workers.
    assert!(answers(&system, &bad, 302) && answers(&system, &good, 302));

    write_hosts(&feed, &["malware.example", "bad.example"]);
    let since = Instant::now();
    assert!(
        wait_until(WITHIN, || answers(&system, &bad, 451)),
        "not quarantined within 60 s"
    );
    eprintln!(
        "quarantined on both workers {:?} after the feed changed",
        since.elapsed()
    );
    let (_, location, page) = click(&system, &bad);
    assert_eq!(location, "");
    assert_eq!(page, shortlink_wire::record::quarantine_page());
    assert!(answers(&system, &good, 302));

    // The page's report button (its own path, `?report`) and the home page's form reach the
    // operator's queue with the code and the host, never the target.
    let client = http_client();
    let base = format!("http://127.0.0.1:{}", system.nginx.redirect_port);
    let button = client
        .post(format!("{base}/{bad}?report"))
        .header("Host", "s1.test")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("")
        .send()
        .unwrap();
    assert_eq!(button.status(), 200);
    let typed = format!("code=https%3A%2F%2Fs1.test%2F{good}");
    let home = client
        .post(format!("{base}/report-abuse"))
        .header("Host", "s2.test")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(typed)
        .send()
        .unwrap();
    assert_eq!(home.status(), 200);
    let queue = system.sidecar_cli(&["abuse-reports"]);
    let queue = String::from_utf8(queue.stdout).unwrap();
    assert!(queue.contains(&format!("s1.test\t{bad}")), "{queue}");
    assert!(queue.contains(&format!("s2.test\t{good}")), "{queue}");
    assert!(!queue.contains("bad.example"), "{queue}");

    // Released by the workspace's admin: the redirect again, from the cache's next fill.
    let (status, body) = system
        .api()
        .post(&format!("/links/{bad}/release"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(wait_until(WITHIN, || answers(&system, &bad, 302)));

    // The entry leaves the feed and comes back: quarantined again.
    write_hosts(&feed, &["malware.example"]);
    let (_, quarantines) = system.api().get("/quarantines");
    assert!(
        wait_until(WITHIN, || {
            system.api().get("/quarantines").1["quarantines"]
                .as_array()
                .is_some_and(Vec::is_empty)
        }),
        "the release was not forgotten: {quarantines}"
    );
    write_hosts(&feed, &["malware.example", "bad.example"]);
    assert!(wait_until(WITHIN, || answers(&system, &bad, 451)));

    // Redis stopped: the module's fallback answers from SQL, never the target.
    system.redis.stop();
    let until = Instant::now() + Duration::from_secs(3);
    let mut seen = std::collections::HashMap::<u16, usize>::new();
    while Instant::now() < until {
        let (status, location, _) = click(&system, &bad);
        assert!(status == 451 || status == 503, "{status} {location}");
        *seen.entry(status).or_default() += 1;
    }
    eprintln!("answers for the quarantined link with Redis down: {seen:?}");
    assert!(
        seen.contains_key(&451),
        "the fallback never answered: {seen:?}"
    );
}

/// The example include for an imported domain (nginx/imported-domain.conf.template), rendered
/// as an operator would, in the pool's `servers.d/` on the redirect port.
fn serve_imported_domain(system: &System, domain: &str) {
    let template =
        shortlink_e2e::paths::workspace_dir().join("nginx/imported-domain.conf.template");
    let prefix = system.nginx.prefix.display().to_string();
    let listen = format!("127.0.0.1:{}", system.nginx.redirect_port);
    let mut text = std::fs::read_to_string(template).unwrap();
    for (name, value) in [
        ("REDIRECT_LISTEN", listen.as_str()),
        ("IMPORTED_DOMAIN", domain),
        ("TRUSTED_PROXY", "127.0.0.1"),
        ("PREFIX", prefix.as_str()),
    ] {
        text = text.replace(&format!("@{name}@"), value);
    }
    assert!(!text.contains("@PREFIX@"), "every placeholder replaced");
    let servers = system.nginx.prefix.join("servers.d");
    std::fs::create_dir_all(&servers).unwrap();
    std::fs::write(servers.join(format!("{domain}.conf")), text).unwrap();
    system.nginx.reload_and_retire_old_workers();
}

#[test]
fn an_imported_domain_takes_abuse_reports_as_the_pool_domains_do() {
    let system = System::start_with(NginxOptions::default());
    serve_imported_domain(&system, "old.test");
    let code = system.create(json!({"url": "https://shop.example/offer"}));
    let client = http_client();
    let base = format!("http://127.0.0.1:{}", system.nginx.redirect_port);
    let form = |request: reqwest::blocking::RequestBuilder, body: String| {
        let answer = (request.header("Host", "old.test"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .unwrap();
        answer.status().as_u16()
    };
    // The warning page's button (the old shortener's trailing slash too) and the home page's
    // form, through the imported domain's own server.
    assert_eq!(
        form(client.post(format!("{base}/{code}/?report")), String::new()),
        200
    );
    let typed = format!("code=http%3A%2F%2Fold.test%2F{code}");
    assert_eq!(
        form(client.post(format!("{base}/report-abuse")), typed),
        200
    );
    // Only POST reaches the sidecar.
    assert_eq!(
        (client.get(format!("{base}/report-abuse")))
            .header("Host", "old.test")
            .send()
            .unwrap()
            .status(),
        403
    );
    let queue = system.sidecar_cli(&["abuse-reports"]);
    let queue = String::from_utf8(queue.stdout).unwrap();
    assert_eq!(
        queue.matches(&format!("old.test\t{code}")).count(),
        2,
        "{queue}"
    );
    assert!(!queue.contains("shop.example"), "{queue}");
}

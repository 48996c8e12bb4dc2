//! Issue 20 through the real edge: the sidecar's domain health job probing this system's nginx
//! (DNS from a resolver in the test, the certificate nginx presents for each pool domain over
//! HTTPS, the canary link redirecting through nginx), and the issuing list nginx's
//! `$shortlink_public_base` map sends to the sidecar (weights, draining, malformed lists).
//! Issue 32: right after a start, every domain is listed (`unknown`) and checked at once.

use serde_json::{json, Value};
use shortlink_e2e::prometheus::samples;
use shortlink_e2e::tls::{local_ca, not_after, reissue};
use shortlink_e2e::{Api, NginxOptions, System, API_KEY, POOL};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::wait_until;

const CANARY_TARGET: &str = "https://canary.example/ok";

/// A DNS server on loopback answering every A question with 127.0.0.1 (the edge), in a thread
/// that lives as long as the test process. Returns its `ip:port`.
fn dns_server() -> String {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the DNS server");
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let query = &buf[..n];
            // The question's name ends at its zero byte; type and class follow (4 bytes).
            let Some(name_end) = query
                .get(12..)
                .and_then(|q| q.iter().position(|&b| b == 0))
                .map(|at| 12 + at)
                .filter(|end| query.len() >= end + 5)
            else {
                continue;
            };
            let mut answer = query[..name_end + 5].to_vec();
            answer[2] |= 0x80; // a response
            answer[7] = 1; // one answer: the question's name, A, IN, TTL 60, 127.0.0.1
            answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            let _ = socket.send_to(&answer, from);
        }
    });
    addr.to_string()
}

/// `GET /api/v1/domains` through nginx's API server, by domain.
fn domains(api: &Api) -> BTreeMap<String, Value> {
    let (status, body) = api.get("/domains");
    assert_eq!(status, 200, "{body}");
    body["domains"]
        .as_array()
        .unwrap_or_else(|| panic!("no domains in {body}"))
        .iter()
        .map(|d| (d["domain"].as_str().unwrap().to_owned(), d.clone()))
        .collect()
}

fn expires_at(status: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    status["certificate_expires_at"]
        .as_str()
        .map(|at| chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc())
}

/// The module's Prometheus page and the sidecar's, as Prometheus scrapes them from the operator's
/// listeners (nginx's status server, the sidecar's `--metrics-listen`).
fn pages(system: &System) -> (String, String) {
    let client = shortlink_e2e::http_client();
    let get = |url: String| {
        let response = client.get(&url).send().expect("scrape");
        assert_eq!(response.status(), 200, "{url}");
        response.text().unwrap()
    };
    (
        get(system.nginx.status_url("?format=prometheus")),
        get(system.sidecar.metrics_url()),
    )
}

#[test]
fn pool_domains_are_healthy_through_nginx_and_a_certificate_near_expiry_degrades_its_domain() {
    let certs = testkit::temp_dir();
    let root = local_ca(certs.path(), &POOL);
    let mut system = System::start_with(NginxOptions {
        tls_certs: Some(certs.path().to_owned()),
        ..NginxOptions::default()
    });
    let canary = system.create(json!({"url": CANARY_TARGET}));
    let dns = dns_server();
    // The probes name nginx's ports, known only now: the sidecar starts again with them.
    let redirect_edge = format!("127.0.0.1:{}", system.nginx.redirect_port);
    let tls_edge = format!("127.0.0.1:{}", system.nginx.tls_port);
    let root_path = root.display().to_string();
    system.restart_sidecar_with(&[
        "--domain-health-every",
        "200ms",
        "--domain-health-resolver",
        &dns,
        "--edge-addresses",
        "127.0.0.1",
        "--canary-edge",
        &redirect_edge,
        "--canary-code",
        &canary,
        "--canary-target",
        CANARY_TARGET,
        "--certificate-edge",
        &tls_edge,
        "--certificate-ca",
        &root_path,
    ]);
    let api = system.api();
    // The job checks the pool as nginx sends it (X-Shortlink-Pool) with any API request.
    let (status, body) = api.get("/links");
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.get("/domains/s9.test");
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "unknown_domain", "{body}");

    let cert_of = |domain: &str| certs.path().join(domain).join("cert.pem");
    let expected: BTreeMap<&str, _> = POOL.iter().map(|d| (*d, not_after(&cert_of(d)))).collect();
    let all_healthy = || {
        let found = domains(&api);
        found.len() == POOL.len()
            && POOL.iter().all(|domain| {
                found.get(*domain).is_some_and(|status| {
                    status["state"] == "healthy"
                        && expires_at(status) == Some(expected[domain])
                        && status["reasons"] == json!([])
                })
            })
    };
    assert!(
        wait_until(Duration::from_secs(20), all_healthy),
        "not every pool domain became healthy with its certificate's notAfter {expected:?}:\n{:#?}\nsidecar log:\n{}",
        domains(&api),
        system.sidecar.process.log_text()
    );

    // The canary went through the real nginx: this test sent no redirect of its own, yet each
    // pool domain's counters show redirects.
    let (module, sidecar) = pages(&system);
    let module = samples(&module);
    for domain in POOL {
        let key = format!("shortlink_domain_redirects_total{{domain=\"{domain}\"}}");
        assert!(module.get(&key).is_some_and(|n| *n >= 1.0), "{key}");
    }
    // The certificate gauge holds the served notAfter.
    let sidecar = samples(&sidecar);
    for domain in POOL {
        let key =
            format!("shortlink_domain_certificate_expiry_timestamp_seconds{{domain=\"{domain}\"}}");
        assert_eq!(
            sidecar.get(&key).copied(),
            Some(expected[domain].timestamp() as f64),
            "{key}"
        );
    }

    // The canary answering another target through nginx degrades every domain; put back, they
    // recover.
    let (status, body) = api.patch(
        &format!("/links/{canary}"),
        &json!({"url": "https://canary.example/moved"}),
    );
    assert_eq!(status, 200, "{body}");
    let canary_wrong = || {
        domains(&api).values().all(|status| {
            status["state"] == "degraded"
                && status["reasons"]
                    == json!(["canary: answered 302 to https://canary.example/moved"])
        })
    };
    assert!(
        wait_until(Duration::from_secs(20), canary_wrong),
        "{:#?}",
        domains(&api)
    );
    let (status, body) = api.patch(&format!("/links/{canary}"), &json!({"url": CANARY_TARGET}));
    assert_eq!(status, 200, "{body}");
    assert!(
        wait_until(Duration::from_secs(20), all_healthy),
        "{:#?}",
        domains(&api)
    );

    // s1.test's certificate replaced by one expiring in 5 days, nginx reloaded: s1.test is
    // degraded for its certificate, s2.test stays healthy.
    reissue(certs.path(), "s1.test", 5);
    let soon = not_after(&cert_of("s1.test"));
    assert!(soon < expected["s1.test"]);
    system.nginx.reload();
    let reason = format!(
        "certificate: expires in 4 days ({})",
        soon.format("%Y-%m-%d %H:%M UTC")
    );
    // A client of its own per read: an old worker closes its idle keep-alive connections as it
    // goes, and a request sent on one of them fails.
    let s1_degraded = || {
        let found = domains(&system.api());
        let (s1, s2) = (&found["s1.test"], &found["s2.test"]);
        s1["state"] == "degraded"
            && s1["reasons"] == json!([reason])
            && expires_at(s1) == Some(soon)
            && s2["state"] == "healthy"
            && expires_at(s2) == Some(expected["s2.test"])
    };
    assert!(
        wait_until(Duration::from_secs(20), s1_degraded),
        "s1.test not degraded by {reason:?}:\n{:#?}\nnginx:\n{}",
        domains(&system.api()),
        system.nginx.error_log()
    );
    let (_, sidecar) = pages(&system);
    assert_eq!(
        samples(&sidecar)
            .get("shortlink_domain_certificate_expiry_timestamp_seconds{domain=\"s1.test\"}")
            .copied(),
        Some(soon.timestamp() as f64)
    );
}

/// The issuing list nginx sends, replaced in domains.conf (`default "<list>";` of the
/// `$shortlink_public_base` map) and reloaded.
fn set_public_base(system: &System, from: &str, to: &str) {
    let path = system.nginx.domains_file();
    let text = std::fs::read_to_string(&path).unwrap();
    let (old, new) = (format!("default \"{from}\";"), format!("default \"{to}\";"));
    assert!(text.contains(&old), "no {old} in domains.conf:\n{text}");
    std::fs::write(&path, text.replace(&old, &new)).unwrap();
    system.nginx.reload();
}

#[test]
fn a_malformed_weight_list_in_nginx_refuses_creates_by_name_and_stores_nothing() {
    // Each list, then what the error must name. The first is rendered at start; the others
    // replace it with a reload.
    let cases = [
        (
            "http://s1.test weight=abc http://s2.test",
            "has \"weight=abc\"; a weight is a whole number from 1 to 1000",
        ),
        (
            "http://s1.test weight=0 http://s2.test weight=0",
            "has \"weight=0\"; a weight is a whole number from 1 to 1000",
        ),
        (
            "http://s1.test draining http://s2.test draining",
            "has every base draining: no domain to issue on",
        ),
        (
            "http://s1.test weight=3 weight=1 http://s2.test",
            "gives http://s1.test two weights",
        ),
    ];
    let system = System::start_with(NginxOptions {
        public_base: Some(cases[0].0.to_owned()),
        ..NginxOptions::default()
    });
    let mut previous: Option<&str> = None;
    for (list, reason) in cases {
        if let Some(previous) = previous {
            set_public_base(&system, previous, list);
        }
        previous = Some(list);
        let message = format!("the x-shortlink-public-base header {reason}");
        let expected = json!({"error": {"code": "invalid_header", "message": message}});
        // After a reload, old workers may answer with the previous (equally malformed) list a
        // little longer, and close their keep-alive connections as they go: each request takes
        // a connection of its own, one that fails is asked again, and all three must answer
        // the new list's error.
        // A create; a listing, which builds short URLs from the same list (the same error, not
        // a wrong URL); a batch streamed through nginx, refused whole before any item.
        let origin = format!("http://127.0.0.1:{}/api/v1", system.nginx.api_port);
        let requests = [
            (
                "create",
                "POST",
                "/links",
                "application/json",
                r#"{"url":"https://example.com/weights"}"#,
            ),
            ("list", "GET", "/links", "application/json", ""),
            (
                "batch",
                "POST",
                "/links/batch",
                "application/x-ndjson",
                "{\"url\":\"https://example.com/b1\"}\n{\"url\":\"https://example.com/b2\"}\n",
            ),
        ];
        let answer = |(_, method, path, content_type, body): (&str, &str, &str, &str, &str)| {
            let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let response = (shortlink_e2e::http_client())
                .request(method, format!("{origin}{path}"))
                .bearer_auth(shortlink_e2e::API_KEY)
                .header("content-type", content_type)
                .body(body.to_owned())
                .send()
                .ok()?;
            let status = response.status().as_u16();
            Some((
                status,
                serde_json::from_str::<Value>(&response.text().ok()?).ok()?,
            ))
        };
        let mut last = Vec::new();
        let refused = wait_until(Duration::from_secs(10), || {
            last = requests
                .iter()
                .map(|request| (request.0, answer(*request)))
                .collect();
            (last.iter()).all(|(_, answered)| answered == &Some((400, expected.clone())))
        });
        assert!(refused, "{list:?}: answered {last:?}, not {expected}");
    }
    // Nothing stored: the sidecar itself (no list from nginx) has no link.
    let (status, body) = system.sidecar.api().get("/links");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["links"], json!([]), "{body}");
}

#[test]
fn weighted_issuing_through_nginx_follows_the_weights_and_skips_a_draining_domain() {
    const CREATES: usize = 2000;
    const THREADS: usize = 4;
    let list = "http://s1.test weight=3 http://s2.test weight=1 http://s3.test draining";
    let system = System::start_with(NginxOptions {
        pool: Some(vec!["s1.test".into(), "s2.test".into(), "s3.test".into()]),
        public_base: Some(list.to_owned()),
        ..NginxOptions::default()
    });
    let created: Vec<(String, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let api = system.api();
                scope.spawn(move || {
                    (0..CREATES / THREADS)
                        .map(|i| {
                            let body = json!({"url": format!("https://example.com/w/{t}/{i}")});
                            let (status, json) = api.post("/links", &body);
                            assert_eq!(status, 201, "{json}");
                            (
                                json["code"].as_str().unwrap().to_owned(),
                                json["short_url"].as_str().unwrap().to_owned(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(created.len(), CREATES);
    let mut by_host: BTreeMap<String, usize> = BTreeMap::new();
    for (code, short_url) in &created {
        let host = short_url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix(&format!("/{code}")))
            .unwrap_or_else(|| panic!("short_url {short_url} of {code}"));
        *by_host.entry(host.to_owned()).or_default() += 1;
    }
    println!("{CREATES} creates over s1:s2 = 3:1, s3 draining: {by_host:?}");
    let s1 = by_host.get("s1.test").copied().unwrap_or(0);
    let s2 = by_host.get("s2.test").copied().unwrap_or(0);
    assert_eq!(by_host.get("s3.test"), None, "a draining domain got links");
    assert_eq!(s1 + s2, CREATES, "{by_host:?}");
    // 75% ± 3 points (about 3 standard deviations of 2,000 draws).
    assert!((1440..=1560).contains(&s1), "s1.test got {s1} of {CREATES}");

    // The sidecar counted each link under the domain it was issued on.
    let (_, sidecar) = pages(&system);
    let sidecar = samples(&sidecar);
    for (domain, count) in [("s1.test", s1), ("s2.test", s2)] {
        let key = format!("shortlink_links_issued_total{{domain=\"{domain}\"}}");
        assert_eq!(sidecar.get(&key).copied(), Some(count as f64), "{key}");
    }
    assert_eq!(
        sidecar.get("shortlink_links_issued_total{domain=\"s3.test\"}"),
        None
    );

    // A read shows the URL the create handed out; every code still answers on the draining
    // domain (it stays in the pool).
    let (code, short_url) = &created[0];
    let (status, body) = system.api().get(&format!("/links/{code}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["short_url"], json!(short_url));
    for (code, _) in created.iter().take(5) {
        let response = system.nginx.get("s3.test", &format!("/{code}"));
        assert_eq!(response.status(), 302, "{code} on s3.test");
    }
}

#[test]
fn spread_by_campaign_through_nginx_keeps_each_campaign_on_one_domain() {
    let list = "http://s1.test weight=3 http://s2.test weight=1 spread=campaign";
    let system = System::start_with(NginxOptions {
        public_base: Some(list.to_owned()),
        ..NginxOptions::default()
    });
    let api = system.api();
    let host_of = |json: &Value| -> String {
        let (code, short_url) = (
            json["code"].as_str().unwrap(),
            json["short_url"].as_str().unwrap(),
        );
        short_url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix(&format!("/{code}")))
            .unwrap_or_else(|| panic!("short_url {short_url} of {code}"))
            .to_owned()
    };
    let mut campaign_hosts = std::collections::BTreeSet::new();
    for c in 0..12 {
        let campaign = format!("spring-{c}");
        let hosts: std::collections::BTreeSet<String> = (0..10)
            .map(|i| {
                let body =
                    json!({"url": format!("https://example.com/c/{c}/{i}"), "campaign": campaign});
                let (status, json) = api.post("/links", &body);
                assert_eq!(status, 201, "{json}");
                host_of(&json)
            })
            .collect();
        assert_eq!(hosts.len(), 1, "campaign {campaign} on {hosts:?}");
        campaign_hosts.extend(hosts);
    }
    // Campaigns themselves spread over both domains; links without a campaign go per link.
    assert_eq!(campaign_hosts.len(), 2, "{campaign_hosts:?}");
    let loose: std::collections::BTreeSet<String> = (0..40)
        .map(|i| {
            let (status, json) = api.post(
                "/links",
                &json!({"url": format!("https://example.com/l/{i}")}),
            );
            assert_eq!(status, 201, "{json}");
            host_of(&json)
        })
        .collect();
    assert_eq!(loose.len(), 2, "{loose:?}");
}

/// A canary edge that holds each probe until `release` is set, then redirects it to
/// [`CANARY_TARGET`]: a check cannot finish (and set a state) before the test has looked at the
/// domains unchecked. Returns its `ip:port`.
fn held_edge(release: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the edge");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let release = Arc::clone(&release);
            std::thread::spawn(move || {
                // Within the probe's 3 s timeout.
                wait_until(Duration::from_secs(2), || release.load(Ordering::Relaxed));
                let mut head = [0u8; 2048];
                let _ = stream.read(&mut head);
                let answer = format!(
                    "HTTP/1.1 302 Found\r\nLocation: {CANARY_TARGET}\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    addr.to_string()
}

/// Signs in to the console on the internal API server (sign-in form, then its session cookie)
/// without naming the pool: only the console pages do that. Returns the session's `Cookie`.
fn console_session(system: &System) -> String {
    let client = shortlink_e2e::http_client();
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let cookie_of = |response: &reqwest::blocking::Response, name: &str| -> String {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.split(';').next()?.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {name} cookie: {:?}", response.headers()))
    };
    let form = client.get(format!("{console}/sign-in")).send().unwrap();
    assert_eq!(form.status(), 200);
    let csrf = cookie_of(&form, "shortlink_console_signin");
    let signed_in = client
        .post(format!("{console}/sign-in"))
        .header("cookie", format!("shortlink_console_signin={csrf}"))
        // The key and the hex token need no escaping.
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={API_KEY}&csrf={csrf}"))
        .send()
        .unwrap();
    assert_eq!(signed_in.status(), 303, "sign-in");
    format!(
        "shortlink_console={}",
        cookie_of(&signed_in, "shortlink_console")
    )
}

#[test]
fn right_after_start_every_domain_is_listed_unknown_and_its_first_check_runs_at_once() {
    // s3.test is issued on but not in nginx's pool (a list being edited): listed all the same.
    let mut system = System::start_with(NginxOptions {
        public_base: Some("http://s1.test weight=3 http://s3.test".to_owned()),
        ..NginxOptions::default()
    });
    let expected = ["s1.test", "s2.test", "s3.test"];
    let release = Arc::new(AtomicBool::new(false));
    let edge = held_edge(Arc::clone(&release));
    // A fresh sidecar: nothing named yet, its start-up check found no domain to check, and the
    // next tick is a minute away (the default, spelled out).
    system.restart_sidecar_with(&[
        "--domain-health-every",
        "60s",
        "--canary-edge",
        &edge,
        "--canary-code",
        "canary",
        "--canary-target",
        CANARY_TARGET,
    ]);
    let api = system.api();
    let cookie = console_session(&system);
    let console_domains = || {
        let response = shortlink_e2e::http_client()
            .get(format!(
                "http://127.0.0.1:{}/console/domains",
                system.nginx.api_port
            ))
            .header("cookie", &cookie)
            .send()
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().unwrap()
    };

    // The first request naming the pool, a user opening the Domains page: every domain, unknown.
    let page = console_domains();
    for domain in expected {
        assert!(
            page.contains(&format!(
                "<td>{domain}</td><td class=\"state\">unknown</td>"
            )),
            "{domain} not listed as unknown:\n{page}"
        );
    }
    assert!(page.contains("<td>not yet</td>"), "{page}");
    let listed = domains(&api);
    assert_eq!(listed.keys().collect::<Vec<_>>(), expected, "{listed:#?}");
    for status in listed.values() {
        assert_eq!(status["state"], "unknown", "{status}");
        assert_eq!(status["last_probe"], Value::Null, "{status}");
        assert_eq!(status["reasons"], json!([]), "{status}");
    }
    let (status, body) = api.get("/domains/s3.test");
    assert_eq!((status, &body["state"]), (200, &json!("unknown")), "{body}");

    // That request started the first check: it ends as soon as the edge answers, not at the
    // next tick a minute later.
    release.store(true, Ordering::Relaxed);
    let checked = || {
        let found = domains(&api);
        found.len() == expected.len() && found.values().all(|s| !s["last_probe"].is_null())
    };
    assert!(
        wait_until(Duration::from_secs(15), checked),
        "no first check within 15 s:\n{:#?}\nsidecar log:\n{}",
        domains(&api),
        system.sidecar.process.log_text()
    );
    for (domain, status) in domains(&api) {
        assert_eq!(status["state"], "healthy", "{domain}: {status}");
    }
    let page = console_domains();
    for domain in expected {
        assert!(
            page.contains(&format!(
                "<td>{domain}</td><td class=\"state\">healthy</td>"
            )),
            "{domain} not healthy on the page:\n{page}"
        );
    }
}

/// Issue 51: the pool headers count only from nginx. Sent straight to the sidecar's port (without
/// nginx's `X-Shortlink-Proxy-Secret`, or with a wrong one), any names in them are never listed
/// nor checked; nginx's own requests name its pool.
#[test]
fn pool_names_sent_straight_to_the_sidecar_are_never_checked() {
    let system = System::start();
    let client = shortlink_e2e::http_client();
    let direct = format!("http://127.0.0.1:{}/api/v1/links", system.sidecar.port);
    for secret in ["", "not-nginx-secret-0123456789"] {
        let mut request = client
            .get(&direct)
            .bearer_auth(API_KEY)
            .header("X-Shortlink-Pool", "junk1.test s1.test")
            .header("X-Shortlink-Public-Base", "https://junk2.test");
        if !secret.is_empty() {
            request = request.header("X-Shortlink-Proxy-Secret", secret);
        }
        let answer = request.send().expect("reach the sidecar");
        assert_eq!(answer.status(), 200);
    }
    // Through nginx: its pool (and the issuing base it sends), never the names above.
    let listed = domains(&system.api());
    for domain in POOL {
        assert!(listed.contains_key(domain), "{listed:?}");
    }
    for junk in ["junk1.test", "junk2.test"] {
        assert!(!listed.contains_key(junk), "{junk} listed: {listed:?}");
    }
}

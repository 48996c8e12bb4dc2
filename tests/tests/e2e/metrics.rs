//! The module's status page in the Prometheus format: counters per pool host, never mixed between
//! hosts, anything else under "other", the Redis round-trip histogram, and a page `promtool check
//! metrics` accepts. The plain format stays as it was.

use serde_json::json;
use shortlink_e2e::prometheus::samples;
use shortlink_e2e::tls::local_ca;
use shortlink_e2e::{Api, NginxOptions, System, API_KEY, POOL};
use std::io::Write;
use std::process::{Command, Stdio};

fn prometheus_page(system: &System, query: &str, accept: Option<&str>) -> (String, String) {
    let mut request = shortlink_e2e::http_client().get(system.nginx.status_url(query));
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let response = request.send().expect("read the status page");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    (content_type, response.text().unwrap())
}

/// `promtool check metrics` (Debian's `prometheus` package, installed by scripts/setup) on `text`.
pub fn promtool_check_metrics(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (scripts/setup installs Debian's prometheus package)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn per_domain_counters_keep_hosts_apart_and_pass_promtool() {
    // HTTPS on the pool and the sidecar's certificate probe on it: the sidecar's page then has
    // every family the deployment files use, the certificate expiry among them.
    let certs = testkit::temp_dir();
    let root = local_ca(certs.path(), &POOL);
    let mut system = System::start_with(NginxOptions {
        tls_certs: Some(certs.path().to_owned()),
        ..NginxOptions::default()
    });
    let (edge, root) = (
        format!("127.0.0.1:{}", system.nginx.tls_port),
        root.display().to_string(),
    );
    // A threat feed (issue 79), so that its families have a series.
    let feed = certs.path().join("threat-hosts.txt");
    std::fs::write(&feed, "0.0.0.0 malware.example\n").unwrap();
    let feed = format!("e2e=hosts:{}", feed.display());
    system.restart_sidecar_with(&[
        "--threat-feeds",
        &feed,
        "--domain-health-every",
        "200ms",
        "--certificate-edge",
        &edge,
        "--certificate-ca",
        &root,
        "--webhook-allow-private",
        "--webhook-poll",
        "50ms",
    ]);
    // A click webhook subscription, so that its per-subscription families have a series: its
    // receiver is a socket that never answers (the POSTs time out; only the metrics matter).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let receiver = format!("http://{}/hook", silent.local_addr().unwrap());
    let (status, body) = system.api().post(
        "/webhooks",
        &json!({"url": receiver, "secret": "metrics-test-secret-0123456789"}),
    );
    assert_eq!(status, 201, "{body}");
    let code = system.create(json!({"url": "https://example.com/metrics"}));
    let gone = system.create(json!({"url": "https://example.com/revoked"}));
    let (status, body) = system.api().delete(&format!("/links/{gone}"));
    assert!((200..300).contains(&status), "revoke: {status} {body}");
    let path = format!("/{code}");
    for _ in 0..3 {
        assert_eq!(system.nginx.get("s1.test", &path).status(), 302);
    }
    assert_eq!(system.nginx.get("s2.test", &path).status(), 302);
    assert_eq!(
        system.nginx.get("s2.test", &format!("/{gone}")).status(),
        410
    );
    assert_eq!(
        system.nginx.get("s2.test", "/no-such-code-here").status(),
        404
    );
    assert_eq!(system.nginx.get("elsewhere.test", &path).status(), 404);

    let (content_type, text) = prometheus_page(&system, "?format=prometheus", None);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let s = samples(&text);
    let get = |metric: &str, domain: &str| -> f64 {
        let key = format!("shortlink_domain_{metric}_total{{domain=\"{domain}\"}}");
        *s.get(&key).unwrap_or_else(|| panic!("no {key} in\n{text}"))
    };
    assert_eq!(get("requests", "s1.test"), 3.0);
    assert_eq!(get("redirects", "s1.test"), 3.0);
    assert_eq!(get("not_found", "s1.test"), 0.0);
    assert_eq!(get("gone", "s1.test"), 0.0);
    assert_eq!(get("requests", "s2.test"), 3.0);
    assert_eq!(get("redirects", "s2.test"), 1.0);
    assert_eq!(get("gone", "s2.test"), 1.0);
    assert_eq!(get("not_found", "s2.test"), 1.0);
    // The code is cached after its first lookup, whichever host asked.
    assert_eq!(
        get("cache_hits", "s1.test") + get("cache_hits", "s2.test"),
        3.0
    );
    assert_eq!(get("requests", "other"), 1.0);
    assert_eq!(get("not_found", "other"), 1.0);
    assert_eq!(get("redirects", "other"), 0.0);
    assert!(!text.contains("elsewhere.test"), "{text}");
    assert_eq!(s["shortlink_requests_total"], 7.0);
    assert_eq!(s["shortlink_redirects_total"], 4.0);
    // Lookups that went to Redis: the code once, the expired one once, the unknown one once.
    let lookups = s["shortlink_redis_latency_seconds_count"];
    assert_eq!(lookups, s["shortlink_cache_misses_total"], "{text}");
    assert!(lookups >= 2.0, "{text}");
    assert_eq!(
        s["shortlink_redis_latency_seconds_bucket{le=\"+Inf\"}"],
        lookups
    );
    promtool_check_metrics(&text);

    // What Prometheus sends when it scrapes, without the query.
    let accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4";
    let (_, scraped) = prometheus_page(&system, "", Some(accept));
    assert!(scraped.contains("# TYPE shortlink_domain_requests_total counter"));

    // The plain page is unchanged: `name value` lines of the totals only.
    let (content_type, plain) = prometheus_page(&system, "", None);
    assert_eq!(content_type, "text/plain");
    assert!(plain.starts_with("requests 7\nredirects 4\n"), "{plain}");
    assert!(!plain.contains("domain"), "{plain}");
    assert_eq!(system.nginx.counters()["redirects"], 4);

    let (status, _) = system
        .api()
        .post("/links", &json!({"url": "ftp://example.com/"}));
    assert_eq!(status, 422);

    // The sidecar's page, on its metrics listener (the operator's), once the health job has
    // probed the pool's certificates (it learnt the pool from the creates above).
    let url = system.sidecar.metrics_url();
    let scrape = || {
        let response = shortlink_e2e::http_client().get(&url).send().unwrap();
        assert_eq!(response.status(), 200);
        response.text().unwrap()
    };
    let mut sidecar = scrape();
    let probed = testkit::wait_until(std::time::Duration::from_secs(20), || {
        sidecar = scrape();
        POOL.iter().all(|domain| {
            sidecar.contains(&format!(
                "shortlink_domain_certificate_expiry_timestamp_seconds{{domain=\"{domain}\"}} "
            ))
        }) && sidecar.contains("shortlink_webhook_lag_seconds{")
    });
    assert!(probed, "no certificate expiry for the pool:\n{sidecar}");
    assert!(
        sidecar.contains("shortlink_links_created_total{via=\"single\"} 2"),
        "{sidecar}"
    );
    assert!(
        sidecar.contains("shortlink_links_issued_total{domain=\"s1.test\"} 2"),
        "{sidecar}"
    );
    promtool_check_metrics(&sidecar);
    assert_eq!(system.nginx.get("s1.test", "/metrics").status(), 404);

    // A bad value is refused by nginx -t; `off` stops per-domain counting, totals go on.
    let domains = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    std::fs::write(
        system.nginx.domains_file(),
        format!("{domains}\nshortlink_status_domains maybe;\n"),
    )
    .unwrap();
    let (valid, output) = system.nginx.test_config();
    assert!(!valid, "{output}");
    assert!(output.contains("it must be \"on\" or \"off\""), "{output}");
    std::fs::write(
        system.nginx.domains_file(),
        format!("{domains}\nshortlink_status_domains off;\n"),
    )
    .unwrap();
    system.nginx.reload();
    let domain_redirects = || {
        let (_, page) = prometheus_page(&system, "?format=prometheus", None);
        samples(&page)["shortlink_domain_redirects_total{domain=\"s1.test\"}"]
    };
    // Old workers count until they stop accepting: wait for redirects the table did not see.
    assert!(testkit::wait_until(
        std::time::Duration::from_secs(10),
        || {
            let before = domain_redirects();
            (0..5).all(|_| system.nginx.get("s1.test", &path).status() == 302)
                && domain_redirects() == before
        }
    ));
    let before = (domain_redirects(), system.nginx.counters()["redirects"]);
    for _ in 0..5 {
        assert_eq!(system.nginx.get("s1.test", &path).status(), 302);
    }
    assert_eq!(
        domain_redirects(),
        before.0,
        "counted with shortlink_status_domains off"
    );
    assert_eq!(system.nginx.counters()["redirects"], before.1 + 5);

    // Every shortlink series the deployment files use is one of the two pages' families.
    let families: Vec<&str> = text
        .lines()
        .chain(sidecar.lines())
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split(' ').next())
        .collect();
    for file in ["prometheus/alerts.yml", "grafana/shortlink.json"] {
        let path = shortlink_e2e::paths::workspace_dir()
            .join("deploy")
            .join(file);
        let body = std::fs::read_to_string(&path).unwrap();
        for name in metric_names(&body) {
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(&name);
            assert!(
                families.contains(&family),
                "{file} uses {name}, which no page has"
            );
        }
    }
}

/// A JSON answer's status and `error.code` ("" when the body is not a JSON error).
fn refused(request: reqwest::blocking::RequestBuilder) -> (u16, String) {
    let response = request.send().expect("send");
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().unwrap_or_default();
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, code)
}

/// `/metrics` and `/shortlink_status` name every workspace's domains: on the API server every
/// brand's tool reaches they are a JSON 404 whatever key comes along (the operator's too: the
/// operator's listeners are elsewhere), and they answer on the operator's listeners only.
#[test]
fn metrics_and_status_answer_on_the_operators_listeners_only() {
    let system = System::start();
    let output =
        system.sidecar_cli(&["keys", "create", "--name", "operator", "--role", "operator"]);
    assert!(output.status.success(), "{output:?}");
    let operator_key = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let api = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let operator = Api::new(api.clone(), &operator_key);
    let (status, body) = operator.post("/workspaces", &json!({"slug": "brand-a"}));
    assert_eq!(status, 201, "{body}");
    let (status, created) = operator.post(
        "/workspaces/brand-a/keys",
        &json!({"name": "brand-a tool", "role": "admin"}),
    );
    assert_eq!(status, 201, "{created}");
    let brand_key = created["key"].as_str().unwrap().to_owned();
    let code = system.create(json!({"url": "https://example.com/operator-only"}));
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );

    let client = shortlink_e2e::http_client();
    let sidecar_api = format!("http://127.0.0.1:{}", system.sidecar.port);
    for path in [
        "/metrics",
        "/shortlink_status",
        "/shortlink_status?format=prometheus",
    ] {
        for key in [
            None,
            Some(API_KEY),
            Some(&brand_key[..]),
            Some(&operator_key[..]),
        ] {
            for base in [&api, &sidecar_api] {
                let mut request = client.get(format!("{base}{path}"));
                if let Some(key) = key {
                    request = request.bearer_auth(key);
                }
                let answer = refused(request);
                assert_eq!(answer, (404, "not_found".into()), "{base}{path} ({key:?})");
            }
        }
    }

    // The operator's listeners: nginx's status server and the sidecar's metrics listener.
    let status = client.get(system.nginx.status_url("")).send().unwrap();
    assert_eq!(status.status(), 200);
    assert!(status.text().unwrap().starts_with("requests "));
    let (_, prometheus) = prometheus_page(&system, "?format=prometheus", None);
    assert!(
        prometheus.contains("shortlink_domain_redirects_total{domain=\"s1.test\"} 1"),
        "{prometheus}"
    );
    let metrics = client.get(system.sidecar.metrics_url()).send().unwrap();
    assert_eq!(metrics.status(), 200);
    let metrics = metrics.text().unwrap();
    assert!(
        metrics.contains("shortlink_links_created_total{via=\"single\"} 1"),
        "{metrics}"
    );
    // Neither is a way into the API.
    let status_api = format!("http://127.0.0.1:{}/api/v1/links", system.nginx.status_port);
    let metrics_api = system
        .sidecar
        .metrics_url()
        .replace("/metrics", "/api/v1/links");
    for url in [status_api, metrics_api] {
        let answer = refused(client.get(&url).bearer_auth(API_KEY));
        assert_eq!(answer, (404, "not_found".into()), "{url}");
    }
}

/// `shortlink_*` identifiers in a file.
fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("shortlink_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let before = rest[..at].chars().last();
        if !matches!(before, Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '/') {
            names.push(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// `promtool` on the deployment files: the scrape config and the rules are valid, and the unit
/// tests prove the suspected-blocked and certificate alerts fire (and stay quiet otherwise).
#[test]
fn deployment_rules_pass_promtool() {
    let dir = shortlink_e2e::paths::workspace_dir().join("deploy/prometheus");
    for args in [
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ] {
        let output = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run promtool (scripts/setup installs Debian's prometheus package)");
        assert!(
            output.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("../grafana/shortlink.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    assert!(dashboard["panels"]
        .as_array()
        .is_some_and(|p| !p.is_empty()));
}

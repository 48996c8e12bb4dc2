//! Issue 55 through the real edge: two active domains and a standby in nginx's issuing list, the
//! health job checking every 200 ms. Links issued on both through nginx's API server, phone
//! clicks through nginx's redirect server on one only: the other is drained within a check, new
//! links go to the clicked domain and the standby and none to it; its re-send list is its
//! unclicked links, and `reissue` gives each a new link on a healthy domain that redirects,
//! through nginx, to the same target (a repeat answers the same links). A second sidecar on the
//! same database and Redis agrees, and the drain is one transition: one audit row.

use serde_json::{json, Value};
use shortlink_e2e::{NginxOptions, Sidecar, System, API_KEY, PROXY_SECRET};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use testkit::wait_until;

const LIST: &str = "http://s1.test http://s2.test http://s9.test standby";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 \
                     (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
/// Bound of every wait: many checks, on a loaded machine.
const SETTLE: Duration = Duration::from_secs(30);

/// A request to nginx's API server with the test's admin key.
fn api_request(
    system: &System,
    method: reqwest::Method,
    path: &str,
) -> reqwest::blocking::RequestBuilder {
    let url = format!("http://127.0.0.1:{}/api/v1{path}", system.nginx.api_port);
    (shortlink_e2e::http_client().request(method, url))
        .bearer_auth(API_KEY)
        .timeout(Duration::from_secs(60))
}

/// A request to `other`, a sidecar nginx does not front, as nginx's API server sends one: the
/// issuing list and the pool, taken as nginx's for the proxy secret.
fn other_request(
    other: &Sidecar,
    method: reqwest::Method,
    path: &str,
) -> reqwest::blocking::RequestBuilder {
    let url = format!("http://127.0.0.1:{}/api/v1{path}", other.port);
    (shortlink_e2e::http_client().request(method, url))
        .bearer_auth(API_KEY)
        .header("X-Shortlink-Public-Base", LIST)
        .header("X-Shortlink-Pool", "s1.test s2.test s9.test")
        .header("X-Shortlink-Proxy-Secret", PROXY_SECRET)
        .timeout(Duration::from_secs(60))
}

fn other_mode(other: &Sidecar, domain: &str) -> String {
    let response = other_request(other, reqwest::Method::GET, &format!("/domains/{domain}"))
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().unwrap();
    body["drain"]["mode"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// An NDJSON answer's lines.
fn lines(response: reqwest::blocking::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    let text = response.text().unwrap();
    (text.lines())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn host(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    rest.split('/').next().unwrap_or_default().to_owned()
}

/// Issues `items` through nginx in one batch: (code, host, target) of each.
fn issue(system: &System, items: impl Iterator<Item = Value>) -> Vec<(String, String, String)> {
    let body: String = items.map(|item| format!("{item}\n")).collect();
    let (status, results) = system.api().post_ndjson("/links/batch", body);
    assert_eq!(status, 200);
    (results.iter())
        .map(|result| {
            assert_eq!(result["status"], 201, "{result}");
            let link = &result["link"];
            (
                link["code"].as_str().unwrap().to_owned(),
                host(link["short_url"].as_str().unwrap()),
                link["url"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn mode(system: &System, domain: &str) -> String {
    let (status, body) = system.api().get(&format!("/domains/{domain}"));
    assert_eq!(status, 200, "{body}");
    body["drain"]["mode"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn reissue(system: &System, key: &str) -> Vec<Value> {
    let path = "/domains/s2.test/reissue?campaign=spring";
    let response = api_request(system, reqwest::Method::POST, path)
        .header("Idempotency-Key", key)
        .send()
        .unwrap();
    lines(response)
}

#[test]
fn a_domain_whose_clicks_stop_is_drained_and_its_recipients_get_new_links() {
    let mut system = System::start_with(NginxOptions {
        pool: Some(vec!["s1.test".into(), "s2.test".into(), "s9.test".into()]),
        public_base: Some(LIST.to_owned()),
        ..NginxOptions::default()
    });
    system.restart_sidecar_watching_domains(&[
        "--domain-health-min-issued",
        "20",
        "--domain-drain-healthy-checks",
        "2",
    ]);
    // Every domain named (nginx sends the pool with each request); the standby's links get no
    // clicks in this test: pinned, so that the job does not drain it too.
    let (status, body) = system.api().post("/domains/s9.test/pin", &json!(null));
    assert_eq!(status, 200, "{body}");
    // A second machine's sidecar, with the same flags; its first request names the pool to its
    // health job, as nginx's would.
    let other_dir = tempfile::tempdir().unwrap();
    let other = system.second_sidecar(&other_dir);
    // It reads the drain state at its own checks (every 200 ms here).
    assert!(
        wait_until(SETTLE, || other_mode(&other, "s9.test") == "pinned"),
        "the second sidecar does not see s9 pinned:\n{}",
        other.process.log_text()
    );

    let item = |i: usize| json!({"url": format!("https://t.example/{i}"), "campaign": "spring", "ref": format!("r{i}")});
    let before = issue(&system, (0..300).map(item));
    let on = |links: &[(String, String, String)], domain: &str| -> Vec<String> {
        (links.iter())
            .filter(|(_, host, _)| host == domain)
            .map(|(code, ..)| code.clone())
            .collect()
    };
    let (s1, s2) = (on(&before, "s1.test"), on(&before, "s2.test"));
    assert!(
        s1.len() > 80 && s2.len() > 80,
        "{} / {}",
        s1.len(),
        s2.len()
    );
    assert!(
        on(&before, "s9.test").is_empty(),
        "no standby in normal times"
    );

    // Human clicks through nginx on s1's links only, each recipient from a network of their
    // own (one network reaching many recipients' links at once is a sweep, docs/BOTS.md).
    let clicked_at = Instant::now();
    for (i, code) in s1.iter().take(80).enumerate() {
        let address = format!("198.18.{i}.9");
        let response = (system.nginx).get_with(
            "s1.test",
            &format!("/{code}"),
            &[
                ("User-Agent", PHONE),
                ("Accept-Language", "en"),
                ("X-Forwarded-For", &address),
            ],
        );
        assert_eq!(response.status(), 302, "{code}");
    }
    assert!(
        wait_until(SETTLE, || mode(&system, "s2.test") == "drained"),
        "s2 not drained: {}\n{}",
        system.api().get("/domains/s2.test").1,
        system.sidecar.process.log_text()
    );
    println!(
        "s2.test drained {:?} after the clicks",
        clicked_at.elapsed()
    );
    let (_, s2_status) = system.api().get("/domains/s2.test");
    assert!(
        (s2_status["drain"]["reason"].as_str().unwrap_or_default())
            .starts_with("suspected-blocked"),
        "{s2_status}"
    );
    assert_eq!(mode(&system, "s1.test"), "active");

    // The other sidecar agrees, and the drain was claimed once: one audit row for both.
    assert!(
        wait_until(SETTLE, || other_mode(&other, "s2.test") == "drained"),
        "the second sidecar does not see s2 drained:\n{}",
        other.process.log_text()
    );
    // The health job's transitions are in the installation's chain: an operator reads them.
    let output = system.sidecar_cli(&["keys", "create", "--name", "ops", "--role", "operator"]);
    assert!(output.status.success(), "{output:?}");
    let operator_key = String::from_utf8(output.stdout).unwrap();
    let origin = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let operator = shortlink_e2e::Api::new(origin, operator_key.trim());
    let (status, audit) = operator.get("/audit?action=domain.drain");
    assert_eq!(status, 200, "{audit}");
    let drains: Vec<&Value> = (audit["rows"].as_array().unwrap().iter())
        .filter(|row| row["object"] == "s2.test")
        .collect();
    assert_eq!(drains.len(), 1, "{audit}");

    // New links: on the clicked domain and the standby, none on the drained one.
    let after = issue(
        &system,
        (1000..1300).map(|i| json!({"url": format!("https://t.example/{i}")})),
    );
    let mut by_host: BTreeMap<String, usize> = BTreeMap::new();
    for (_, host, _) in &after {
        *by_host.entry(host.clone()).or_default() += 1;
    }
    assert_eq!(by_host.get("s2.test"), None, "{by_host:?}");
    let body: String = (2000..2100)
        .map(|i| format!("{}\n", json!({"url": format!("https://t.example/{i}")})))
        .collect();
    let response = other_request(&other, reqwest::Method::POST, "/links/batch")
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .unwrap();
    let issued_by_other = lines(response);
    assert_eq!(issued_by_other.len(), 100);
    for result in &issued_by_other {
        let short_url = result["link"]["short_url"].as_str().unwrap();
        assert_ne!(host(short_url), "s2.test", "{result}");
    }
    assert!(
        by_host.get("s1.test") > Some(&50) && by_host.get("s9.test") > Some(&50),
        "{by_host:?}"
    );

    // The re-send list: exactly s2's links of the campaign (none was clicked).
    let listed = lines(
        api_request(
            &system,
            reqwest::Method::GET,
            "/domains/s2.test/unclicked?campaign=spring",
        )
        .send()
        .unwrap(),
    );
    let listed_codes: HashSet<String> = (listed.iter())
        .map(|line| line["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed_codes, s2.iter().cloned().collect::<HashSet<_>>());

    // Reissued: each on a healthy domain, redirecting through nginx to its old link's target.
    let targets: HashMap<&String, &String> = before.iter().map(|(c, _, t)| (c, t)).collect();
    let first = reissue(&system, "resend-1");
    assert_eq!(first.len(), s2.len());
    for line in &first {
        assert_eq!(line["status"], 201, "{line}");
        let old = line["code"].as_str().unwrap().to_owned();
        assert!(listed_codes.contains(&old), "{line}");
        let new = line["new_code"].as_str().unwrap();
        let on = host(line["short_url"].as_str().unwrap());
        assert!(on == "s1.test" || on == "s9.test", "{line}");
        let response = (system.nginx).get(&on, &format!("/{new}"));
        assert_eq!(response.status(), 302, "{line}");
        assert_eq!(
            response.headers()["location"].to_str().unwrap(),
            targets[&old].as_str(),
            "{line}"
        );
    }
    // A repeat answers the same links.
    let again = reissue(&system, "resend-1");
    let by_old = |answer: &[Value]| -> HashMap<String, Value> {
        (answer.iter())
            .map(|line| {
                (
                    line["code"].as_str().unwrap().to_owned(),
                    line["new_code"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(by_old(&again), by_old(&first));
}

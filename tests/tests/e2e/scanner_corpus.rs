//! Issue 78's labelled corpus (`tests/corpus/visitors.jsonl`: people, previews, scanners and
//! bots, each from its public source) replayed through nginx: each visit's message delivered
//! `delay_s` before its click (a receipt posted just before it), from its address
//! (`X-Forwarded-For`, which the pool's trusted proxy setting takes), on a `max_visits: 1` link
//! of its own. Through the module, the stored verdicts (the consumer judging with the ASN table
//! `scripts/fetch-geo` keeps in the target directory): previews, scanners and bots kept out of
//! the people at least 99% of the time, people kept at least 99.5%. On both paths, the module
//! and the fallback (the module's Redis unreachable; its redirects make no visit events), the
//! same thresholds on who spends a cap among the visits the click-time signals can judge (the
//! client's network included: the module's `shortlink_hosting_networks`, the fallback's
//! `--geoip-asn-dir`). A sweep protects caps only once noticed, which depends on timing: its
//! visits are judged by the stored verdicts alone.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use shortlink_e2e::{paths, NginxOptions, System};
use testkit::RedisServer;

fn corpus() -> Vec<Value> {
    let path = paths::workspace_dir().join("tests/corpus/visitors.jsonl");
    let text = std::fs::read_to_string(&path).expect("read the corpus");
    let entries: Vec<Value> = (text.lines())
        .map(|line| serde_json::from_str(line).expect("a corpus line"))
        .collect();
    for entry in &entries {
        assert!(
            entry["source"].as_str().is_some_and(|s| !s.is_empty()),
            "no source: {entry}"
        );
    }
    entries
}

/// The signals the module and the fallback read at click time (docs/BOTS.md): the visits they
/// must not spend a cap on.
const AT_CLICK: &[&str] = &["agent", "no_agent", "method", "headers", "network"];

/// Replays the corpus on `system`; answers the links' codes.
fn replay(system: &System, entries: &[Value]) -> Vec<String> {
    let api = system.api();
    let mut codes = Vec::new();
    for (i, _) in entries.iter().enumerate() {
        codes.push(system.create(json!({
            "url": "https://shop.example/offer",
            "campaign": "corpus",
            "ref": format!("r{i}"),
            "max_visits": 1
        })));
    }
    for (i, entry) in entries.iter().enumerate() {
        let delay = entry["delay_s"].as_i64().unwrap();
        let delivered = chrono::Utc::now() - chrono::Duration::seconds(delay);
        let receipt = json!({"code": codes[i], "message_id": format!("m{i}"),
                             "state": "delivered", "at": delivered.to_rfc3339()});
        let (status, body) = api.post("/deliveries", &receipt);
        assert!(status == 200 || status == 201, "{status} {body}");
        let text = |key: &str| entry[key].as_str().unwrap();
        let mut headers = vec![("X-Forwarded-For", text("address"))];
        if !text("ua").is_empty() {
            headers.push(("User-Agent", text("ua")));
        }
        if !text("lang").is_empty() {
            headers.push(("Accept-Language", text("lang")));
        }
        let method = reqwest::Method::from_bytes(text("method").as_bytes()).unwrap();
        let answer =
            (system.nginx).request_with(method, "s1.test", &format!("/{}", codes[i]), &headers);
        assert_eq!(answer.status(), 302, "{entry}");
    }
    codes
}

/// Whether each link's cap was spent: (label, "human" for spent, else "machine"), for the
/// entries the click-time signals can judge and the people.
fn spent(
    system: &System,
    entries: &[Value],
    codes: &[String],
    at_click: &[&str],
) -> (Vec<Value>, Vec<(String, String)>) {
    let judged = |entry: &Value| {
        entry["label"] == "human" || at_click.contains(&entry["signal"].as_str().unwrap())
    };
    (entries.iter().zip(codes))
        .filter(|(entry, _)| judged(entry))
        .map(|(entry, code)| {
            let key = shortlink_wire::keys::visit_count_key(code);
            let spent = system.redis.cli_raw(&["EXISTS", &key]) == "1";
            let verdict = if spent { "human" } else { "machine" };
            (
                entry.clone(),
                (
                    entry["label"].as_str().unwrap().to_owned(),
                    verdict.to_owned(),
                ),
            )
        })
        .unzip()
}

/// Each entry's stored verdict: (label, audience).
fn stored(system: &System, entries: &[Value], codes: &[String]) -> Vec<(String, String)> {
    let api = system.api();
    let mut feed = Vec::new();
    let stored = testkit::wait_until(Duration::from_secs(60), || {
        feed = api.get_ndjson("/visits?limit=10000");
        feed.len() >= entries.len()
    });
    assert!(stored, "{} of {} visits stored", feed.len(), entries.len());
    let audience: HashMap<&str, &str> = (feed.iter())
        .map(|e| (e["code"].as_str().unwrap(), e["audience"].as_str().unwrap()))
        .collect();
    (entries.iter().zip(codes))
        .map(|(entry, code)| {
            let label = entry["label"].as_str().unwrap().to_owned();
            (label, audience[code.as_str()].to_owned())
        })
        .collect()
}

/// The issue's thresholds over `verdicts` (label, verdict), naming the misjudged.
fn assert_thresholds(path: &str, entries: &[Value], verdicts: &[(String, String)]) {
    let people = verdicts.iter().filter(|(label, _)| label == "human");
    let (people, kept) = people.fold((0, 0), |(n, k), (_, v)| {
        (n + 1, k + usize::from(v == "human"))
    });
    let machines = verdicts.iter().filter(|(label, _)| label != "human");
    let (machines, out) = machines.fold((0, 0), |(n, o), (_, v)| {
        (n + 1, o + usize::from(v != "human"))
    });
    let wrong: Vec<String> = (entries.iter().zip(verdicts))
        .filter(|(_, (label, verdict))| (label == "human") != (verdict == "human"))
        .map(|(entry, (_, verdict))| format!("{} judged {verdict}", entry["what"]))
        .collect();
    assert!(
        people >= 40 && machines >= 30,
        "{people} people, {machines} machines"
    );
    assert!(
        out as f64 >= 0.99 * machines as f64 && kept as f64 >= 0.995 * people as f64,
        "{path}: {out}/{machines} machines out, {kept}/{people} people kept; wrong: {wrong:#?}"
    );
}

/// The fetched ASN table's folder, as the module's and the sidecar's flags name it.
fn asn_dir() -> String {
    let dir = paths::fetched_geo_dir().join("asn");
    dir.to_str().unwrap().to_owned()
}

#[test]
fn the_corpus_is_judged_within_the_issues_thresholds_on_the_module() {
    let asn = asn_dir();
    let options = NginxOptions {
        hosting_networks: Some(asn.clone()),
        ..NginxOptions::default()
    };
    let system = System::start_on_with(RedisServer::start(), options, &["--geoip-asn-dir", &asn]);
    let entries = corpus();
    let codes = replay(&system, &entries);
    let (judged, caps) = spent(&system, &entries, &codes, AT_CLICK);
    assert_thresholds("module's caps", &judged, &caps);
    let verdicts = stored(&system, &entries, &codes);
    assert_thresholds("stored verdicts", &entries, &verdicts);
}

#[test]
fn the_corpus_is_judged_within_the_issues_thresholds_on_the_fallback() {
    let asn = asn_dir();
    let options = NginxOptions {
        redis_addr: Some("127.0.0.1:1".to_owned()),
        ..NginxOptions::default()
    };
    let system = System::start_on_with(RedisServer::start(), options, &["--geoip-asn-dir", &asn]);
    let fallbacks = system.nginx.counters()["fallbacks"];
    let entries = corpus();
    let codes = replay(&system, &entries);
    assert!(system.nginx.counters()["fallbacks"] > fallbacks);
    let (judged, caps) = spent(&system, &entries, &codes, AT_CLICK);
    assert_thresholds("fallback's caps", &judged, &caps);
}

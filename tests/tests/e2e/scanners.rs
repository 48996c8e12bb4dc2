//! Issue 78: a one-time link (`max_visits: 1`) is spent by the person it was sent to, not by the
//! machines that fetch it first. Each machine gets what a person would get at that moment (the
//! target, then the 410), so no scanner is shown anything else; only the person's click spends
//! the cap. The module's path, then the fallback's (the module's Redis unreachable).

use std::time::Duration;

use serde_json::json;
use shortlink_e2e::{paths, status_and_location, NginxOptions, System};
use shortlink_wire::keys::visit_count_key;
use testkit::RedisServer;

const TARGET: &str = "https://shop.example/one-time-code";
const DESKTOP_CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// Request headers, as `(name, value)`.
type Headers = &'static [(&'static str, &'static str)];

/// The machines of the issue, in the order they come after a message is delivered: a name, the
/// method and the headers.
const MACHINES: [(&str, &str, Headers); 5] = [
    // A scanner's first request: HEAD, with a desktop browser's agent and language.
    (
        "HEAD",
        "HEAD",
        &[
            ("User-Agent", DESKTOP_CHROME),
            ("Accept-Language", "en-US,en;q=0.9"),
        ],
    ),
    // A scanner sending a browser's agent without the headers that browser always sends.
    (
        "browser agent, no language",
        "GET",
        &[("User-Agent", DESKTOP_CHROME)],
    ),
    // A messaging app's preview fetcher.
    ("preview", "GET", &[("User-Agent", "WhatsApp/2.23.20.0 A")]),
    // A security gateway naming itself.
    (
        "named scanner",
        "GET",
        &[("User-Agent", "Mozilla/5.0 (compatible; Barracuda Sentinel)")],
    ),
    // A script.
    ("script", "GET", &[("User-Agent", "python-requests/2.31.0")]),
];

/// The recipient's phone.
const PERSON: &[(&str, &str)] = &[
    ("User-Agent", IPHONE),
    ("Accept-Language", "en-GB,en;q=0.9"),
];

fn click(system: &System, code: &str, method: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let response = system
        .nginx
        .request_with(method, "s1.test", &format!("/{code}"), headers);
    status_and_location(&response)
}

/// Every machine, then the person twice, then the machines again: the cap is the person's.
fn machines_then_the_person(system: &System, code: &str) {
    for (name, method, headers) in MACHINES {
        assert_eq!(
            click(system, code, method, headers),
            (302, TARGET.to_owned()),
            "{name} gets the person's answer"
        );
    }
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(code)]),
        "0",
        "no machine spent a click"
    );
    assert_eq!(click(system, code, "GET", PERSON), (302, TARGET.to_owned()));
    assert_eq!(click(system, code, "GET", PERSON).0, 410, "the cap was 1");
    for (name, method, headers) in MACHINES {
        assert_eq!(
            click(system, code, method, headers).0,
            410,
            "{name} gets the person's answer once it is over"
        );
    }
}

#[test]
fn a_one_time_link_is_spent_by_the_person_not_by_the_machines_before() {
    let system = System::start();
    let code = system.create(json!({"url": TARGET, "max_visits": 1}));
    machines_then_the_person(&system, &code);

    // Every redirected fetch is kept, with its verdict and why (the 410s are filed apart, as
    // every link's are): the machines', then the person's tap.
    let mut feed = Vec::new();
    let stored = testkit::wait_until(Duration::from_secs(20), || {
        feed = system.api().get_ndjson("/visits");
        feed.len() == MACHINES.len() + 1
    });
    assert!(stored, "visits did not arrive: {feed:?}");
    let verdicts: Vec<(String, Vec<String>)> = (feed.iter())
        .map(|event| {
            let reasons = event["reasons"].as_array().expect("reasons").iter();
            let reasons = reasons.map(|r| r.as_str().unwrap().to_owned()).collect();
            (event["audience"].as_str().unwrap().to_owned(), reasons)
        })
        .collect();
    let expected = |audience: &str, reason: &str| {
        let reasons = [reason].into_iter().filter(|r| !r.is_empty());
        (audience.to_owned(), reasons.map(str::to_owned).collect())
    };
    let machines = [
        expected("scanner", "method"),
        expected("scanner", "headers"),
        expected("preview", "agent"),
        expected("scanner", "agent"),
        expected("bot", "agent"),
    ];
    assert_eq!(verdicts, [&machines[..], &[expected("human", "")]].concat());
}

#[test]
fn a_one_time_link_survives_a_scanner_from_a_cloud_network() {
    // The module and the consumer read the same networks: the pinned ASN table (`scripts/fetch-geo`)
    // with the shipped list, and the operator's file adding a block of its own.
    let asn = paths::fetched_geo_dir().join("asn");
    let file = tempfile::NamedTempFile::new().unwrap();
    let (asn, operators) = (asn.to_str().unwrap(), file.path().to_str().unwrap());
    std::fs::write(
        operators,
        "198.19.255.0/24 # a scanner farm the operator found\n",
    )
    .unwrap();
    let options = NginxOptions {
        hosting_networks: Some(format!("{asn} {operators}")),
        ..NginxOptions::default()
    };
    let flags = ["--geoip-asn-dir", asn, "--hosting-networks", operators];
    let system = System::start_on_with(RedisServer::start(), options, &flags);
    let code = system.create(json!({"url": TARGET, "max_visits": 1}));
    // A scanner in every way a person: a phone's agent and language, a GET; only its address
    // (Amazon's AS16509 in the table, then the operator's block) says where it runs.
    let scanner = |address| {
        let headers = [("X-Forwarded-For", address), PERSON[0], PERSON[1]];
        click(&system, &code, "GET", &headers)
    };
    for address in ["1.44.96.50", "198.19.255.7"] {
        assert_eq!(scanner(address), (302, TARGET.to_owned()), "{address}");
    }
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&code)]),
        "0",
        "no scanner spent a click"
    );
    let person = [("X-Forwarded-For", "81.2.69.142"), PERSON[0], PERSON[1]];
    assert_eq!(
        click(&system, &code, "GET", &person),
        (302, TARGET.to_owned())
    );
    assert_eq!(
        click(&system, &code, "GET", &person).0,
        410,
        "the cap was 1"
    );

    let mut feed = Vec::new();
    let stored = testkit::wait_until(Duration::from_secs(20), || {
        feed = system.api().get_ndjson("/visits");
        feed.len() == 3
    });
    assert!(stored, "visits did not arrive: {feed:?}");
    let verdicts: Vec<(&str, &serde_json::Value)> = (feed.iter())
        .map(|event| (event["audience"].as_str().unwrap(), &event["reasons"]))
        .collect();
    let network = json!(["network"]);
    let none = json!([]);
    assert_eq!(
        verdicts,
        [
            ("scanner", &network),
            ("scanner", &network),
            ("human", &none)
        ]
    );

    // A bad line in the operator's file fails the configuration test, naming the directive.
    std::fs::write(operators, "AS16509\n10.0.0.0/33\n").unwrap();
    let (ok, output) = system.nginx.test_config();
    assert!(
        !ok && output.contains("shortlink_hosting_networks") && output.contains("line 2"),
        "{output}"
    );
}

#[test]
fn the_fallback_spends_a_one_time_link_on_the_person_too() {
    // The module's Redis unreachable: every click goes to nginx's fallback (the sidecar, whose
    // Redis holds the count).
    let options = NginxOptions {
        redis_addr: Some("127.0.0.1:1".to_owned()),
        ..NginxOptions::default()
    };
    let system = System::start_with(options);
    let code = system.create(json!({"url": TARGET, "max_visits": 1}));
    let fallbacks = system.nginx.counters()["fallbacks"];
    machines_then_the_person(&system, &code);
    assert!(system.nginx.counters()["fallbacks"] > fallbacks);
}

#[test]
fn the_fallback_judges_the_network_too() {
    // The module's Redis unreachable; the sidecar (the fallback) reads the same ASN table and
    // hosting list the module and the consumer read.
    let asn = paths::fetched_geo_dir().join("asn");
    let file = tempfile::NamedTempFile::new().unwrap();
    let (asn, operators) = (asn.to_str().unwrap(), file.path().to_str().unwrap());
    std::fs::write(operators, "198.19.255.0/24\n").unwrap();
    let options = NginxOptions {
        redis_addr: Some("127.0.0.1:1".to_owned()),
        ..NginxOptions::default()
    };
    let flags = ["--geoip-asn-dir", asn, "--hosting-networks", operators];
    let system = System::start_on_with(RedisServer::start(), options, &flags);
    let code = system.create(json!({"url": TARGET, "max_visits": 1}));
    let fallbacks = system.nginx.counters()["fallbacks"];
    // Scanners with a person's agent, language and method, from Amazon (AS16509 in the table)
    // and from the operator's block: the person's answer, the cap not spent.
    for address in ["1.44.96.50", "198.19.255.7"] {
        let headers = [("X-Forwarded-For", address), PERSON[0], PERSON[1]];
        let answer = click(&system, &code, "GET", &headers);
        assert_eq!(answer, (302, TARGET.to_owned()), "{address}");
    }
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&code)]),
        "0",
        "no scanner spent a click"
    );
    let person = [("X-Forwarded-For", "81.2.69.142"), PERSON[0], PERSON[1]];
    let answer = click(&system, &code, "GET", &person);
    assert_eq!(answer, (302, TARGET.to_owned()));
    assert_eq!(
        click(&system, &code, "GET", &person).0,
        410,
        "the cap was 1"
    );
    assert!(system.nginx.counters()["fallbacks"] > fallbacks);
}

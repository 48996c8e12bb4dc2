//! Issue 78: a sweep (one network with one agent fetching five recipients' links of a campaign
//! within seconds) is seen only in hindsight, by the visit consumer. Once it is, the module
//! spares the caps of the sweep's further fetches: a one-time link the sweep reaches next is
//! still the recipient's, 302 then 410.

use std::time::Duration;

use serde_json::json;
use shortlink_e2e::{status_and_location, System};
use shortlink_wire::keys::{visit_count_key, SWEEPS};

const TARGET: &str = "https://shop.example/one-time-code";
const DESKTOP_CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// A sweeper that looks like a person in every request: a desktop Chrome's agent and language,
/// a GET (plain HTTP: no fetch metadata is expected), from a residential address no hosting
/// list names.
const SWEEPER: &[(&str, &str)] = &[
    ("X-Forwarded-For", "81.2.69.160"),
    ("User-Agent", DESKTOP_CHROME),
    ("Accept-Language", "en-US,en;q=0.9"),
];

/// The recipient's phone, on another network.
const RECIPIENT: &[(&str, &str)] = &[
    ("X-Forwarded-For", "175.16.199.4"),
    ("User-Agent", IPHONE),
    ("Accept-Language", "en-GB,en;q=0.9"),
];

fn get(system: &System, code: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let response = system.nginx.request_with(
        reqwest::Method::GET,
        "s1.test",
        &format!("/{code}"),
        headers,
    );
    status_and_location(&response)
}

fn spent(system: &System, code: &str) -> String {
    system.redis.cli_raw(&["GET", &visit_count_key(code)])
}

#[test]
fn a_noticed_sweep_keeps_the_caps_of_its_next_links() {
    let system = System::start();
    let link = |max_visits: u32| {
        let body = json!({"url": TARGET, "max_visits": max_visits, "campaign": "spring"});
        system.create(body)
    };
    let swept: Vec<String> = (0..5).map(|_| link(1)).collect();
    // A link of the campaign the sweeper keeps fetching until the module knows the sweep (each
    // fetch before then spends one of its thousand), and the one-time link it reaches after.
    let (probe, next) = (link(1000), link(1));

    // Before the consumer sees five, nothing tells these fetches from people's: they spend.
    for code in &swept {
        assert_eq!(get(&system, code, SWEEPER), (302, TARGET.to_owned()));
        assert_eq!(spent(&system, code), "1", "{code}");
    }
    // The consumer publishes the sweep: the default workspace's, the sweeper's /24 and agent.
    let published = testkit::wait_until(Duration::from_secs(20), || {
        system
            .redis
            .cli_raw(&["HKEYS", SWEEPS])
            .contains("81.2.69.0")
    });
    let flags = system.redis.cli_raw(&["HKEYS", SWEEPS]);
    assert!(published, "no sweep published: {flags:?}");
    assert!(flags.starts_with("default\n81.2.69.0\n"), "{flags:?}");
    // The worker reads the flags every quarter second: the probe's count stops rising then.
    let mut before = spent(&system, &probe);
    let spared = testkit::wait_until(Duration::from_secs(10), || {
        assert_eq!(get(&system, &probe, SWEEPER), (302, TARGET.to_owned()));
        let after = spent(&system, &probe);
        std::mem::replace(&mut before, after.clone()) == after
    });
    assert!(spared, "the sweeper's fetches still spend the probe's cap");

    // The sweep reaches the next one-time link: the target, the cap kept for the recipient.
    assert_eq!(get(&system, &next, SWEEPER), (302, TARGET.to_owned()));
    assert_eq!(spent(&system, &next), "", "the sweeper spent nothing");
    assert_eq!(get(&system, &next, RECIPIENT), (302, TARGET.to_owned()));
    assert_eq!(get(&system, &next, RECIPIENT).0, 410, "the cap was 1");
    // No cloaking: the sweeper gets the recipient's answer once it is over too.
    assert_eq!(get(&system, &next, SWEEPER).0, 410);
}

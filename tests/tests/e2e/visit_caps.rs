//! `max_visits` set through the sidecar's API, answered by the real module: exactly the cap is
//! redirected, then the link answers like an expired one; revoking takes its counter along.

use serde_json::json;
use shortlink_e2e::{status_and_location, NginxOptions, System};
use shortlink_wire::keys::visit_count_key;

const TARGET: &str = "https://shop.example/flash";
const SOLD_OUT: &str = "https://shop.example/sold-out";

/// A click whose `INCR` reply comes after `shortlink_timeout` (300 ms in the kit) is counted
/// once and answered by its number: the module awaits the count it sent rather than hand the
/// click to the fallback, which counted it again and answered the sold-out target to the one
/// click the cap allows. A busy machine delays replies so (issue 82); `CLIENT PAUSE ... WRITE`
/// holds the `INCR` on purpose, for less than the connection's 1 s read timeout, while the
/// record's read goes through.
#[test]
fn a_click_whose_count_comes_late_is_counted_once() {
    let system = System::start();
    let capped = system.create(json!({"url": TARGET, "max_visits": 1, "expired_url": SOLD_OUT}));
    let counter = visit_count_key(&capped);
    assert_eq!(
        system.redis.cli_raw(&["CLIENT", "PAUSE", "700", "WRITE"]),
        "OK"
    );
    let response = system.nginx.click("s1.test", &format!("/{capped}"));
    assert_eq!(status_and_location(&response), (302, TARGET.to_owned()));
    assert_eq!(system.redis.cli_raw(&["GET", &counter]), "1");
    let response = system.nginx.click("s1.test", &format!("/{capped}"));
    assert_eq!(status_and_location(&response), (302, SOLD_OUT.to_owned()));
    assert_eq!(system.redis.cli_raw(&["GET", &counter]), "2");
}

/// A click whose count reached Redis and whose reply never came back (Redis restarting
/// mid-command, a connection cut) is counted once: the module hands the fallback the click's
/// token with the click, and the fallback's count with the same token finds the click counted.
/// Before, the fallback counted it again, and a one-time link answered its one recipient with the
/// sold-out target (issue 82). A proxy between nginx and Redis lets the count through and cuts
/// the connection before its reply.
#[test]
fn a_click_whose_count_reply_is_lost_is_counted_once() {
    let (system, proxy) = System::behind_proxy(NginxOptions::default());
    let capped = system.create(json!({"url": TARGET, "max_visits": 1, "expired_url": SOLD_OUT}));
    let counter = visit_count_key(&capped);
    proxy.cut_reply_to(counter.as_bytes());
    let before = system.nginx.counters();
    let response = system.nginx.click("s1.test", &format!("/{capped}"));
    assert_eq!(proxy.cuts(), 1, "the count's reply was cut");
    assert_eq!(
        system.nginx.counters()["fallbacks"],
        before["fallbacks"] + 1,
        "the fallback answered"
    );
    assert_eq!(status_and_location(&response), (302, TARGET.to_owned()));
    assert_eq!(system.redis.cli_raw(&["GET", &counter]), "1");
    let response = system.nginx.click("s1.test", &format!("/{capped}"));
    assert_eq!(status_and_location(&response), (302, SOLD_OUT.to_owned()));
    assert_eq!(system.redis.cli_raw(&["GET", &counter]), "2");
}

#[test]
fn a_cap_from_the_api_redirects_exactly_n_clicks_then_answers_gone() {
    let system = System::start();
    let capped = system.create(json!({"url": TARGET, "max_visits": 3}));
    let with_url = system.create(json!({"url": TARGET, "max_visits": 2, "expired_url": SOLD_OUT}));
    for _ in 0..3 {
        let response = system.nginx.click("s1.test", &format!("/{capped}"));
        assert_eq!(status_and_location(&response), (302, TARGET.to_owned()));
    }
    for _ in 0..2 {
        let response = system.nginx.click("s1.test", &format!("/{capped}"));
        assert_eq!(response.status().as_u16(), 410, "past the cap");
    }
    for expected in [TARGET, TARGET, SOLD_OUT, SOLD_OUT] {
        let response = system.nginx.click("s1.test", &format!("/{with_url}"));
        assert_eq!(status_and_location(&response), (302, expected.to_owned()));
    }
    assert_eq!(
        system.redis.cli_raw(&["GET", &visit_count_key(&capped)]),
        "5"
    );

    // Revoking (DELETE) takes the counter with the link.
    let (status, _) = system.api().delete(&format!("/links/{capped}"));
    assert_eq!(status, 200);
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&capped)]),
        "0"
    );
}

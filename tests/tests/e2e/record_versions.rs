//! A record version the module does not know is "not mine": a newer sidecar may write one during
//! a rolling upgrade, and an older module must then answer through its fallback (the sidecar,
//! from SQL), as on a Redis failure: never a 404, never a redirect it guessed at.

use serde_json::json;
use shortlink_e2e::{NginxOptions, System};
use shortlink_wire::keys::link_key;

#[test]
fn an_unknown_record_version_is_served_by_the_fallback() {
    let system = System::start_with(NginxOptions {
        cache: "off",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/v1", "redirect": 301}));
    // What a later version might look like, pointing elsewhere: the module must not follow it.
    system.redis.cli_raw(&[
        "SET",
        &link_key(&code),
        "3|L|302|0|0|https://example.com/v2|preview=on",
    ]);

    system.assert_answered_by_fallback(&code, (301, "https://example.com/v1"));
}

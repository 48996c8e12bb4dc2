use super::*;

fn event(fields: &[(&str, &str)]) -> VisitEvent {
    VisitEvent::from_fields(
        "1700000000000-7",
        fields.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
    )
    .unwrap()
}

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

#[test]
fn enriches_a_human_visit() {
    let e = event(&[
        ("c", "Ab3dE9"),
        ("t", "1700000000123"),
        ("s", "302"),
        ("ip", "203.0.113.77"),
        ("ua", IPHONE),
        ("ref", "https://www.Facebook.com/story"),
        ("host", "S1.example:443"),
        ("lang", "de-DE,de;q=0.9,en;q=0.8"),
    ]);
    let v = Enricher::new(GeoDb::disabled(), false).enrich(&e);
    assert_eq!(v.event_id, "1700000000000-7");
    assert_eq!(
        (v.code.as_str(), v.time_ms, v.status),
        ("Ab3dE9", 1_700_000_000_123, Some(302))
    );
    assert_eq!(v.ip.as_deref(), Some("203.0.113.77"));
    assert_eq!(v.visitor, privacy::visitor_hash(e.ip, IPHONE));
    assert_eq!(v.user_agent_id, Some(agent::user_agent_id(IPHONE)));
    let agent = &v.agent;
    assert_eq!(
        (agent.browser.as_deref(), agent.os.as_deref(), agent.device),
        (Some("Safari"), Some("iPhone"), Device::Mobile)
    );
    assert_eq!((agent.audience, agent.agent_label), (Audience::Human, None));
    assert_eq!((v.country.as_deref(), v.city.as_deref()), (None, None));
    assert_eq!(v.referrer_host.as_deref(), Some("facebook.com"));
    assert_eq!(v.short_domain.as_deref(), Some("s1.example"));
    assert_eq!(v.language.as_deref(), Some("de-de"));
}

#[test]
fn anonymizes_stored_ip_but_hashes_the_full_one() {
    let e = event(&[
        ("c", "abc"),
        ("t", "1"),
        ("ip", "203.0.113.77"),
        ("ua", "curl/8"),
    ]);
    let plain = Enricher::new(GeoDb::disabled(), false).enrich(&e);
    let anon = Enricher::new(GeoDb::disabled(), true).enrich(&e);
    assert_eq!(anon.ip.as_deref(), Some("203.0.113.0"));
    assert_eq!(anon.visitor, plain.visitor);
    let neighbour = event(&[
        ("c", "abc"),
        ("t", "1"),
        ("ip", "203.0.113.78"),
        ("ua", "curl/8"),
    ]);
    assert_ne!(
        Enricher::new(GeoDb::disabled(), true)
            .enrich(&neighbour)
            .visitor,
        anon.visitor
    );
}

#[test]
fn machines_get_the_bot_device() {
    let imessage = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0";
    let v = Enricher::new(GeoDb::disabled(), false).enrich(&event(&[
        ("c", "abc"),
        ("t", "1"),
        ("ua", imessage),
    ]));
    assert_eq!(
        (v.agent.audience, v.agent.agent_label, v.agent.device),
        (Audience::Preview, Some("iMessage"), Device::Bot)
    );
    let v = Enricher::new(GeoDb::disabled(), false).enrich(&event(&[("c", "abc"), ("t", "1")]));
    assert_eq!(
        (v.agent.audience, v.agent.device, v.ip, v.user_agent),
        (Audience::Bot, Device::Bot, None, None)
    );
}

#[test]
fn mapped_ipv4_is_stored_canonically() {
    let v = Enricher::new(GeoDb::disabled(), false).enrich(&event(&[
        ("c", "abc"),
        ("t", "1"),
        ("ip", "::ffff:198.51.100.4"),
    ]));
    assert_eq!(v.ip.as_deref(), Some("198.51.100.4"));
}

#[test]
fn languages() {
    let cases: &[(&str, Option<&str>)] = &[
        ("de-DE,de;q=0.9", Some("de-de")),
        ("EN", Some("en")),
        ("zh_CN", Some("zh-cn")),
        ("fr;q=0.8, en", Some("fr")),
        ("zh-Hant-TW-x-private-long", Some("zh-hant-tw-x")),
        ("*", None),
        ("", None),
        ("<script>", None),
        ("abcdefghijklmnopq", None),
    ];
    for (input, want) in cases {
        assert_eq!(language(input).as_deref(), *want, "{input:?}");
    }
}

#[test]
fn visit_serializes_flat() {
    let v = Enricher::new(GeoDb::disabled(), false).enrich(&event(&[
        ("c", "abc"),
        ("t", "1"),
        ("ua", "curl/8"),
    ]));
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["audience"], "bot");
    assert_eq!(json["device"], "bot");
    assert_eq!(json["agent_label"], "curl");
}

#[test]
fn the_request_s_signals_can_make_a_person_s_agent_a_scanner() {
    let enricher = Enricher::new(GeoDb::disabled(), false);
    let verdict = |fields: &[(&str, &str)]| {
        let mut all = vec![("c", "Ab3dE9"), ("t", "1"), ("ua", IPHONE)];
        all.extend_from_slice(fields);
        let v = enricher.enrich(&event(&all));
        (v.agent.audience, v.reasons.names().collect::<Vec<_>>())
    };
    // A format-5 event (no `sig`): the agent alone judges.
    assert_eq!(verdict(&[]), (Audience::Human, vec![]));
    // The phone's own request: a language came.
    assert_eq!(
        verdict(&[("lang", "en"), ("sig", "0")]),
        (Audience::Human, vec![])
    );
    // HEAD (bit 0), and a browser's agent without `Accept-Language` (bit 2).
    assert_eq!(
        verdict(&[("sig", "1")]),
        (Audience::Scanner, vec!["method"])
    );
    assert_eq!(
        verdict(&[("sig", "4")]),
        (Audience::Scanner, vec!["headers"])
    );
    // The scanner's visit keeps its parse but describes no person's device.
    let v = enricher.enrich(&event(&[
        ("c", "a"),
        ("t", "1"),
        ("ua", IPHONE),
        ("sig", "1"),
    ]));
    assert_eq!(
        (v.agent.browser.as_deref(), v.agent.device),
        (Some("Safari"), Device::Bot)
    );
    // A machine's agent keeps its own verdict and says why.
    let curl = enricher.enrich(&event(&[
        ("c", "a"),
        ("t", "1"),
        ("ua", "curl/8"),
        ("sig", "0"),
    ]));
    assert_eq!(
        (
            curl.agent.audience,
            curl.reasons.names().collect::<Vec<_>>()
        ),
        (Audience::Bot, vec!["agent"])
    );
}

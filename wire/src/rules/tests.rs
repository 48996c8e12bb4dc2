use super::codec::{check, decode, encode, RulesError};
use super::*;
use std::net::{IpAddr, Ipv4Addr};

const IPHONE: &[u8] = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const IPAD_DESKTOP: &[u8] = b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &[u8] = b"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
const WINDOWS: &[u8] = b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
const MAC: &[u8] = b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
const LINUX: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0";

fn target(url: &str) -> Target {
    Target {
        url: url.as_bytes().into(),
        status: 302,
        forward_query: false,
    }
}

fn rule(conditions: Vec<Condition>, url: &str) -> Rule {
    Rule {
        conditions: conditions.into(),
        action: Action::Target(target(url)),
    }
}

fn click() -> Click<'static> {
    Click {
        now_unix: 1_800_000_000,
        user_agent: b"",
        accept_language: b"",
        query: b"",
        client: None,
        visitor: 0,
        recipient: None,
        cookies: b"",
        random: 0,
    }
}

/// [`super::choose`] over `rules`, encoded as a reader holds them (leaked: a test's few bytes).
fn choose(
    rules: &[Rule],
    click: &Click<'_>,
    country: impl FnOnce(IpAddr) -> Option<[u8; 2]>,
) -> Option<Choice<'static>> {
    let set: &'static RuleSet = Box::leak(Box::new(RuleSet::encode(rules)));
    assert_eq!(RuleSet::new(set.as_bytes()).as_ref(), Ok(set));
    super::choose(set, click, country)
}

fn chosen(rules: &[Rule], click: &Click<'_>) -> Option<&'static [u8]> {
    choose(rules, click, |_| Some(*b"PT")).map(|choice| choice.target.url)
}

#[test]
fn device_classes() {
    assert_eq!(device_class(IPHONE), Device::Ios);
    assert_eq!(device_class(IPAD_DESKTOP), Device::Ios);
    assert_eq!(device_class(ANDROID), Device::Android);
    assert_eq!(device_class(WINDOWS), Device::Desktop);
    assert_eq!(device_class(MAC), Device::Desktop);
    assert_eq!(device_class(LINUX), Device::Desktop);
    assert_eq!(device_class(b"curl/8.5.0"), Device::Other);
    assert_eq!(device_class(b""), Device::Other);
}

/// The classification by its definition (substrings anywhere, in the documented order), against
/// which the one-pass search is checked on real agents and on every prefix of each.
fn device_by_definition(agent: &[u8]) -> Device {
    let has = |needle: &[u8]| agent.windows(needle.len()).any(|window| window == needle);
    if has(b"iPhone") || has(b"iPad") || has(b"iPod") || (has(b"Macintosh") && has(b"Mobile/")) {
        Device::Ios
    } else if has(b"Android") {
        Device::Android
    } else if has(b"Windows NT")
        || has(b"Macintosh")
        || has(b"CrOS")
        || (has(b"X11") && has(b"Linux"))
    {
        Device::Desktop
    } else {
        Device::Other
    }
}

#[test]
fn device_classes_match_their_definition() {
    let agents: [&[u8]; 12] = [
        IPHONE,
        IPAD_DESKTOP,
        ANDROID,
        WINDOWS,
        MAC,
        LINUX,
        b"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        b"Dalvik/2.1.0 (Linux; U; Android 13; SM-A536B Build/TP1A.220624.014)",
        b"iPod touch; X11 Linux",
        b"Mozilla/5.0 (X11; FreeBSD amd64) Gecko/20100101 Firefox/126.0",
        b"WhatsApp/2.23.20.0 A",
        b"PPPiPadMMobile/Macintosh",
    ];
    for agent in agents {
        for end in 0..=agent.len() {
            let prefix = &agent[..end];
            assert_eq!(
                device_class(prefix),
                device_by_definition(prefix),
                "{}",
                String::from_utf8_lossy(prefix)
            );
        }
    }
}

#[test]
fn the_first_rule_that_holds_answers_and_none_leaves_the_default() {
    let rules = [
        rule(
            vec![Condition::Device(Device::Ios.bit())],
            "https://apps.apple.com/x",
        ),
        rule(
            vec![Condition::Device(Device::Android.bit())],
            "https://play.google.com/x",
        ),
        rule(
            vec![Condition::Device(Device::Ios.bit() | Device::Android.bit())],
            "https://never.example/",
        ),
    ];
    let mut c = click();
    c.user_agent = IPHONE;
    assert_eq!(chosen(&rules, &c), Some(&b"https://apps.apple.com/x"[..]));
    c.user_agent = ANDROID;
    let choice = choose(&rules, &c, |_| None).unwrap();
    assert_eq!((choice.rule, choice.variant), (1, None));
    c.user_agent = WINDOWS;
    assert_eq!(chosen(&rules, &c), None);
}

#[test]
fn every_condition_of_a_rule_must_hold() {
    let rules = [rule(
        vec![
            Condition::Device(Device::Android.bit()),
            Condition::Query {
                name: b"src".as_slice().into(),
                value: Some(b"sms a".as_slice().into()),
            },
        ],
        "https://a.example/",
    )];
    let mut c = click();
    c.user_agent = ANDROID;
    assert_eq!(chosen(&rules, &c), None);
    c.query = b"x=1&src=sms+a";
    assert!(chosen(&rules, &c).is_some());
    c.query = b"src=sms%20a";
    assert!(chosen(&rules, &c).is_some());
    c.query = b"src=sms%20ab";
    assert_eq!(chosen(&rules, &c), None);
    c.user_agent = IPHONE;
    c.query = b"src=sms+a";
    assert_eq!(chosen(&rules, &c), None);
}

#[test]
fn a_query_name_alone_holds_with_any_value() {
    let rules = [rule(
        vec![Condition::Query {
            name: b"vip".as_slice().into(),
            value: None,
        }],
        "https://vip.example/",
    )];
    let mut c = click();
    for (query, holds) in [
        (&b"vip"[..], true),
        (b"vip=", true),
        (b"a=1&vip=2", true),
        (b"vipx=1", false),
        (b"xvip", false),
        (b"%76ip=1", true),
        (b"", false),
    ] {
        c.query = query;
        assert_eq!(
            chosen(&rules, &c).is_some(),
            holds,
            "{:?}",
            String::from_utf8_lossy(query)
        );
    }
}

#[test]
fn language_is_the_preferred_one_with_primary_tag_matching() {
    let rules = [
        rule(
            vec![Condition::Language(vec![b"pt".as_slice().into()].into())],
            "https://pt.example/",
        ),
        rule(
            vec![Condition::Language(vec![b"en-gb".as_slice().into()].into())],
            "https://uk.example/",
        ),
    ];
    let mut c = click();
    for (header, want) in [
        (
            &b"pt-BR,pt;q=0.9,en;q=0.8"[..],
            Some(&b"https://pt.example/"[..]),
        ),
        (b"en-US,en;q=0.9,pt;q=0.8", None),
        (b"en;q=0.5, pt-PT;q=0.6", Some(b"https://pt.example/")),
        (b"EN-GB", Some(b"https://uk.example/")),
        (b"en-GB-oxendict", Some(b"https://uk.example/")),
        (b"en", None),
        (b"ptx", None),
        (b"*, pt;q=0.1", Some(b"https://pt.example/")),
        (b"pt;q=0, en-gb;q=0.2", Some(b"https://uk.example/")),
        (b"pt;q=2, en-gb;q=0.2", Some(b"https://uk.example/")),
        (b"", None),
    ] {
        c.accept_language = header;
        assert_eq!(
            chosen(&rules, &c),
            want,
            "{:?}",
            String::from_utf8_lossy(header)
        );
    }
}

#[test]
fn country_is_looked_up_once_and_only_when_asked() {
    let rules = [
        rule(
            vec![Condition::Device(Device::Ios.bit())],
            "https://ios.example/",
        ),
        rule(
            vec![Condition::Country(vec![*b"BR"].into())],
            "https://br.example/",
        ),
        rule(
            vec![Condition::Country(vec![*b"PT", *b"AO"].into())],
            "https://pt.example/",
        ),
    ];
    let mut c = click();
    c.client = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
    let mut lookups = 0;
    let choice = choose(&rules, &c, |_| {
        lookups += 1;
        Some(*b"PT")
    });
    assert_eq!(choice.unwrap().target.url, b"https://pt.example/");
    assert_eq!(lookups, 1);

    c.user_agent = IPHONE;
    let mut lookups = 0;
    choose(&rules, &c, |_| {
        lookups += 1;
        None
    });
    assert_eq!(
        lookups, 0,
        "the first rule answered before any country was needed"
    );

    c.user_agent = b"";
    c.client = None;
    assert_eq!(chosen(&rules, &c), None, "no address, no country");
}

#[test]
fn address_ranges() {
    let ranges: Box<[Cidr]> = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]
        .iter()
        .map(|text| Cidr::parse(text).unwrap())
        .collect();
    let rules = [rule(vec![Condition::Ip(ranges)], "https://office.example/")];
    let mut c = click();
    for (ip, holds) in [
        ("10.1.2.3", true),
        ("11.0.0.1", false),
        ("192.0.2.7", true),
        ("192.0.2.8", false),
        ("2001:db8::1", true),
        ("2001:db9::1", false),
        ("::ffff:10.9.9.9", true),
    ] {
        c.client = Some(ip.parse().unwrap());
        assert_eq!(chosen(&rules, &c).is_some(), holds, "{ip}");
    }
    assert_eq!(Cidr::parse("10.0.0.1/8"), None, "host bits set");
    assert_eq!(Cidr::parse("10.0.0.0/33"), None);
    assert_eq!(Cidr::parse("10.0.0.0/"), None);
    assert_eq!(Cidr::parse("nope"), None);
    assert_eq!(Cidr::parse("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
}

#[test]
fn time_windows() {
    // 2027-01-04 is a Monday. 08:30 UTC is 08:30 in Lisbon (winter) and 17:30 in Tokyo.
    let monday_0830_utc = 1_799_051_400;
    let lisbon = Weekly::zone_named("Europe/Lisbon").unwrap();
    let tokyo = Weekly::zone_named("Asia/Tokyo").unwrap();
    let nine_to_six = (9..18).fold(0u32, |mask, hour| mask | 1 << hour);
    let mut c = click();
    c.now_unix = monday_0830_utc;
    let window = |zone, days| {
        Condition::Weekly(Weekly {
            days,
            hours: nine_to_six,
            zone,
        })
    };
    assert_eq!(
        chosen(&[rule(vec![window(lisbon, 1)], "https://x.example/")], &c),
        None
    );
    assert!(chosen(&[rule(vec![window(tokyo, 1)], "https://x.example/")], &c).is_some());
    assert_eq!(
        chosen(&[rule(vec![window(tokyo, 2)], "https://x.example/")], &c),
        None
    );
    // Summer time: 2027-07-05 (Monday) 08:30 UTC is 09:30 in Lisbon.
    c.now_unix = 1_814_776_200;
    assert!(chosen(&[rule(vec![window(lisbon, 1)], "https://x.example/")], &c).is_some());

    let opening = [rule(
        vec![Condition::After(1000), Condition::Before(2000)],
        "https://x.example/",
    )];
    for (now, holds) in [(999, false), (1000, true), (1999, true), (2000, false)] {
        c.now_unix = now;
        assert_eq!(chosen(&opening, &c).is_some(), holds, "{now}");
    }
}

fn split(weights: &[u16], sticky: impl Into<Sticky>) -> Rule {
    Rule {
        conditions: Box::new([]),
        action: Action::Split {
            variants: weights
                .iter()
                .enumerate()
                .map(|(i, &weight)| Variant {
                    weight,
                    target: target(&format!("https://v{i}.example/")),
                })
                .collect(),
            sticky: sticky.into(),
        },
    }
}

#[test]
fn splits_follow_their_weights_and_sticky_ones_keep_a_visitor() {
    let rules = [split(&[1, 3, 0], false)];
    let mut counts = [0u32; 3];
    let mut c = click();
    let mut state = 0x1234_5678_u64;
    for _ in 0..40_000 {
        state = mix(state.wrapping_add(1));
        c.random = state;
        counts[usize::from(choose(&rules, &c, |_| None).unwrap().variant.unwrap())] += 1;
    }
    assert_eq!(counts[2], 0, "a zero weight is never chosen");
    let share = f64::from(counts[1]) / 40_000.0;
    assert!((share - 0.75).abs() < 0.02, "{counts:?}");

    let sticky = [split(&[1, 1], true)];
    let mut seen = [0u32; 2];
    for visitor in 0..2_000u64 {
        c.visitor = visitor;
        let first = choose(&sticky, &c, |_| None).unwrap().variant;
        for random in [1, u64::MAX, 77] {
            c.random = random;
            assert_eq!(choose(&sticky, &c, |_| None).unwrap().variant, first);
        }
        seen[usize::from(first.unwrap())] += 1;
    }
    assert!(seen.iter().all(|&n| n > 900), "{seen:?}");
}

fn every_kind() -> Vec<Rule> {
    vec![
        Rule {
            conditions: vec![
                Condition::Device(Device::Ios.bit() | Device::Other.bit()),
                Condition::Language(
                    vec![b"pt".as_slice().into(), b"en-gb".as_slice().into()].into(),
                ),
                Condition::Country(vec![*b"PT", *b"BR"].into()),
                Condition::Query {
                    name: b"a b".as_slice().into(),
                    value: Some(b"x|y".as_slice().into()),
                },
                Condition::Query {
                    name: b"z".as_slice().into(),
                    value: None,
                },
                Condition::Ip(
                    vec![
                        Cidr::parse("10.0.0.0/8").unwrap(),
                        Cidr::parse("2001:db8::/32").unwrap(),
                    ]
                    .into(),
                ),
                Condition::After(1),
                Condition::Before(u64::MAX),
            ]
            .into(),
            action: Action::Target(Target {
                url: b"https://a.example/x|y".as_slice().into(),
                status: 307,
                forward_query: true,
            }),
        },
        Rule {
            conditions: vec![Condition::Weekly(Weekly {
                days: 0b001_1111,
                hours: 0x00ff_ff00,
                zone: Weekly::zone_named("America/Sao_Paulo").unwrap(),
            })]
            .into(),
            action: Action::Split {
                variants: vec![
                    Variant {
                        weight: 1,
                        target: target("https://b.example/"),
                    },
                    Variant {
                        weight: 0,
                        target: target("https://c.example/"),
                    },
                ]
                .into(),
                sticky: Sticky::Cookie,
            },
        },
    ]
}

#[test]
fn rules_round_trip() {
    let rules = every_kind();
    let mut bytes = Vec::new();
    encode(&rules, &mut bytes);
    assert_eq!(&*decode(&bytes).unwrap(), rules.as_slice());
    let mut empty = Vec::new();
    encode(&[], &mut empty);
    assert_eq!(decode(&empty).unwrap().len(), 0);
}

/// `check` (what a reader runs at every cache fill) and `decode` are two passes over the same
/// grammar: they must accept exactly the same bytes. Every single-byte change of an encoding of
/// every kind of rule, and every truncation, is given to both.
#[test]
fn check_accepts_exactly_what_decode_accepts() {
    let mut bytes = Vec::new();
    encode(&every_kind(), &mut bytes);
    let agree = |bytes: &[u8]| {
        assert_eq!(
            check(bytes).is_ok(),
            decode(bytes).is_ok(),
            "check and decode disagree on {bytes:?}"
        );
    };
    for end in 0..=bytes.len() {
        agree(&bytes[..end]);
    }
    let mut accepted = 0;
    for at in 0..bytes.len() {
        for value in [0u8, 1, 2, 4, 6, 0x20, b'A', b'a', 0x7f, 0xff, bytes[at] ^ 1] {
            let mut changed = bytes.clone();
            changed[at] = value;
            agree(&changed);
            accepted += usize::from(check(&changed).is_ok());
        }
    }
    assert!(accepted > 0, "some changes are still valid rules");
}

#[test]
fn every_truncation_and_trailing_byte_is_refused() {
    let mut bytes = Vec::new();
    encode(&every_kind(), &mut bytes);
    for end in 0..bytes.len() {
        assert!(
            decode(&bytes[..end]).is_err(),
            "decoded {end} of {} bytes",
            bytes.len()
        );
    }
    bytes.push(0);
    assert_eq!(decode(&bytes), Err(RulesError::Length));
}

#[test]
fn values_the_evaluator_cannot_trust_are_refused() {
    let encoded = |rules: &[Rule]| {
        let mut bytes = Vec::new();
        encode(rules, &mut bytes);
        bytes
    };
    let bad_target = Rule {
        conditions: Box::new([]),
        action: Action::Target(Target {
            url: b"https://x.example/\r\nSet-Cookie: a".as_slice().into(),
            status: 302,
            forward_query: false,
        }),
    };
    assert_eq!(decode(&encoded(&[bad_target])), Err(RulesError::Value));
    let mut bad_status = rule(vec![], "https://x.example/");
    if let Action::Target(target) = &mut bad_status.action {
        target.status = 200;
    }
    assert_eq!(decode(&encoded(&[bad_status])), Err(RulesError::Value));
    assert_eq!(
        decode(&encoded(&[split(&[0, 0], false)])),
        Err(RulesError::Value)
    );
    assert_eq!(
        decode(&encoded(&[split(&[], false)])),
        Err(RulesError::Count)
    );
    assert_eq!(
        decode(&encoded(&[rule(
            vec![Condition::Device(0)],
            "https://x.example/"
        )])),
        Err(RulesError::Value)
    );
    assert_eq!(
        decode(&encoded(&[rule(
            vec![Condition::Country(vec![*b"pt"].into())],
            "https://x.example/"
        )])),
        Err(RulesError::Value)
    );
    let too_many: Vec<Rule> = (0..=MAX_RULES)
        .map(|_| rule(vec![], "https://x.example/"))
        .collect();
    assert_eq!(decode(&encoded(&too_many)), Err(RulesError::Count));
    let mut zone = encoded(&[rule(
        vec![Condition::Weekly(Weekly {
            days: 1,
            hours: 1,
            zone: Weekly::zone_named("Europe/Paris").unwrap(),
        })],
        "https://x.example/",
    )]);
    let at = zone.windows(5).position(|w| w == b"Paris").unwrap();
    zone[at] = b'Q';
    assert_eq!(decode(&zone), Err(RulesError::Value));
    assert_eq!(decode(&[1, 0, b'x']), Err(RulesError::Tag));
}

#[test]
fn the_visitor_number_is_stable_and_tells_visitors_apart() {
    // Pinned: the module and the sidecar's fallback must agree across builds.
    assert_eq!(visitor(b"", b""), 0xb7b8_7aa8_595b_14fc);
    assert_eq!(visitor(b"192.0.2.1", IPHONE), 0x8ddd_6bdc_2de6_adda);
    assert_eq!(visitor(b"192.0.2.1", IPHONE), visitor(b"192.0.2.1", IPHONE));
    assert_ne!(visitor(b"192.0.2.1", IPHONE), visitor(b"192.0.2.2", IPHONE));
    assert_ne!(
        visitor(b"192.0.2.1", IPHONE),
        visitor(b"192.0.2.1", ANDROID)
    );
    // The separator keeps "ab"+"c" apart from "a"+"bc".
    assert_ne!(visitor(b"ab", b"c"), visitor(b"a", b"bc"));
}

#[test]
fn a_split_sticky_by_ref_keeps_a_recipient_whoever_clicks() {
    for sticky in [Sticky::Ref, Sticky::Default] {
        let rules = [split(&[1, 1, 1], sticky)];
        let mut seen = [0u32; 3];
        for person in 0..300u64 {
            let mut c = click();
            c.recipient = Some(recipient(format!("code{person}").as_bytes(), b"r-1"));
            let mut variants = std::collections::HashSet::new();
            for (visitor, cookies) in [(1, &b""[..]), (2, b"sl_v=00000000000000ff"), (3, b"a=b")] {
                c.visitor = visitor;
                c.cookies = cookies;
                c.random = visitor.wrapping_mul(0x1234_5678_9abc);
                variants.insert(choose(&rules, &c, |_| None).unwrap().variant);
            }
            assert_eq!(
                variants.len(),
                1,
                "{sticky:?} person {person}: {variants:?}"
            );
            seen[usize::from(variants.into_iter().next().unwrap().unwrap())] += 1;
        }
        assert!(seen.iter().all(|&n| n > 70), "{sticky:?}: {seen:?}");
    }
    // Without a recipient, `ref` falls back to address + agent.
    let rules = [split(&[1, 1], Sticky::Ref)];
    let mut c = click();
    let by_visitor = |c: &Click<'_>| {
        choose(&[split(&[1, 1], Sticky::Visitor)], c, |_| None)
            .unwrap()
            .variant
    };
    for visitor in 0..50 {
        c.visitor = visitor;
        assert_eq!(
            choose(&rules, &c, |_| None).unwrap().variant,
            by_visitor(&c)
        );
    }
}

#[test]
fn a_split_sticky_by_cookie_follows_the_cookie_and_asks_for_one_when_missing() {
    let rules = [split(&[1, 1], Sticky::Cookie)];
    let set = RuleSet::encode(&rules);
    for kept in 0..200u64 {
        let cookie = format!("theme=dark; sl_v={kept:016x}; x=1");
        let mut c = click();
        c.cookies = cookie.as_bytes();
        let mut variants = std::collections::HashSet::new();
        for visitor in [1, 2, 3, 4] {
            c.visitor = visitor;
            variants.insert(choose(&rules, &c, |_| None).unwrap().variant);
            assert_eq!(cookie_to_set(&set, 0, false, c.cookies, || visitor), None);
        }
        assert_eq!(variants.len(), 1, "cookie {kept}");
        // The cookie the first click was given answers as that first click was answered.
        let mut first = click();
        first.visitor = kept;
        assert_eq!(
            choose(&rules, &first, |_| None).unwrap().variant,
            variants.into_iter().next().unwrap()
        );
        assert_eq!(cookie_to_set(&set, 0, false, b"", || kept), Some(kept));
    }
    // `true` asks for the cookie only without a recipient; address + agent never does.
    let default = RuleSet::encode(&[split(&[1, 1], true)]);
    assert_eq!(cookie_to_set(&default, 0, false, b"", || 9), Some(9));
    assert_eq!(cookie_to_set(&default, 0, true, b"", || 9), None);
    for other in [Sticky::Visitor, Sticky::Ref, Sticky::No] {
        let set = RuleSet::encode(&[split(&[1, 1], other)]);
        assert_eq!(cookie_to_set(&set, 0, false, b"", || 9), None, "{other:?}");
    }
    let target_only = RuleSet::encode(&[rule(vec![], "https://t.example/")]);
    assert_eq!(cookie_to_set(&target_only, 0, false, b"", || 9), None);
    assert_eq!(cookie_to_set(&default, 1, false, b"", || 9), None);
}

#[test]
fn the_visitor_cookie_reads_and_writes() {
    assert_eq!(visitor_cookie(b"sl_v=00000000000000ff"), Some(255));
    assert_eq!(
        visitor_cookie(b"a=1;  sl_v=ffffffffffffffff ; b=2"),
        Some(u64::MAX)
    );
    for bad in [
        &b""[..],
        b"sl_v=",
        b"sl_v=ff",
        b"sl_v=FFFFFFFFFFFFFFFF",
        b"xsl_v=00000000000000ff",
        b"sl_v=0000000000000000ff",
    ] {
        assert_eq!(
            visitor_cookie(bad),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let text = |cookie: SetCookie| String::from_utf8(cookie.as_bytes().to_vec()).unwrap();
    assert_eq!(
        text(set_cookie(255, true)),
        "sl_v=00000000000000ff; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax; Secure"
    );
    assert_eq!(
        text(set_cookie(u64::MAX - 1, false)),
        format!("sl_v=fffffffffffffffe; Path=/; Max-Age={COOKIE_MAX_AGE}; HttpOnly; SameSite=Lax")
    );
    let plain = text(set_cookie(7, false));
    assert_eq!(
        visitor_cookie(plain.split(';').next().unwrap().as_bytes()),
        Some(7)
    );
    assert!(!plain.contains("Secure"));
}

#[test]
fn sticky_modes_round_trip_and_an_unknown_one_is_refused() {
    for sticky in [
        Sticky::No,
        Sticky::Default,
        Sticky::Visitor,
        Sticky::Cookie,
        Sticky::Ref,
    ] {
        let rules = [split(&[1, 2], sticky)];
        let mut bytes = Vec::new();
        encode(&rules, &mut bytes);
        assert_eq!(&*decode(&bytes).unwrap(), rules.as_slice());
        // What a reader from before these modes reads: 0 and 1 only.
        assert_eq!(bytes[3], sticky.byte());
        bytes[3] = 5;
        assert_eq!(decode(&bytes), Err(RulesError::Value));
        assert_eq!(check(&bytes), Err(RulesError::Value));
    }
}

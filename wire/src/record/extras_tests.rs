//! Version 2: round trips, what a reader refuses, and the lifecycle's answers.

use super::*;
use crate::rules::{Action, Click, Condition, Device, Rule, Target, Variant};

const IPHONE: &[u8] = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

fn target(url: &str, status: u16) -> Target {
    Target {
        url: url.as_bytes().into(),
        status,
        forward_query: false,
    }
}

fn extras() -> Extras {
    Extras {
        valid_since: 1_000,
        not_yet_url: None,
        expired_url: Some(b"https://shop.example/over"[..].into()),
        rules: vec![
            Rule {
                conditions: vec![Condition::Device(Device::Ios.bit())].into(),
                action: Action::Target(target("https://apps.apple.com/app/id1", 302)),
            },
            Rule {
                conditions: vec![Condition::Country(vec![*b"PT"].into())].into(),
                action: Action::Split {
                    variants: vec![
                        Variant {
                            weight: 1,
                            target: target("https://pt.example/a", 307),
                        },
                        Variant {
                            weight: 3,
                            target: target("https://pt.example/b", 307),
                        },
                    ]
                    .into(),
                    sticky: crate::rules::Sticky::Default,
                },
            },
        ]
        .into(),
        max_visits: 0,
        password: None,
        has_card: true,
        workspace: None,
        click_id_param: None,
        recipient: None,
    }
}

fn encode(extras: Option<&Extras>) -> Vec<u8> {
    Record::Live {
        status: 302,
        expires_at: 5_000,
        flags: FLAG_FORWARD_QUERY,
        target: "https://shop.example/|x",
        extras,
    }
    .encode()
}

fn click(user_agent: &[u8]) -> Click<'_> {
    Click {
        now_unix: 2_000,
        user_agent,
        accept_language: b"",
        query: b"",
        client: Some("192.0.2.1".parse().unwrap()),
        visitor: 7,
        recipient: None,
        cookies: b"",
        random: 0,
    }
}

#[test]
fn a_link_with_extras_round_trips_as_version_2() {
    let value = encode(Some(&extras()));
    assert!(value.starts_with(b"2|L|302|5000|1|https://shop.example/|x\n"));
    assert_eq!(
        decode(&value),
        Ok(Link::Live {
            status: 302,
            expires_at: 5_000,
            forward_query: true,
            target: b"https://shop.example/|x"[..].into(),
            extras: Some(std::sync::Arc::new(extras())),
        })
    );
}

#[test]
fn a_plain_link_stays_version_1_for_older_readers() {
    let plain = b"1|L|302|5000|1|https://shop.example/|x";
    assert_eq!(encode(None), plain);
    assert_eq!(encode(Some(&Extras::default())), plain);
}

#[test]
fn unknown_fields_are_not_mine_and_broken_ones_are_errors() {
    let line = b"2|L|302|0|0|https://x.example/\n".to_vec();
    let with = |tail: &[u8]| [line.as_slice(), tail].concat();
    // A field a newer writer added: the record is not this reader's to answer.
    assert_eq!(decode(&with(b"z\x00\x01x")), Err(RecordError::Version));
    assert_eq!(decode(&with(b"s\x00\x08")), Err(RecordError::Extras));
    assert_eq!(decode(&with(b"s\x00")), Err(RecordError::Extras));
    assert_eq!(
        decode(&with(b"s\x00\x04\0\0\0\x01")),
        Err(RecordError::Extras)
    );
    let since = b"s\x00\x08\0\0\0\0\0\0\0\x01";
    assert!(decode(&with(since)).is_ok());
    assert_eq!(
        decode(&with(&[since.as_slice(), since].concat())),
        Err(RecordError::Extras)
    );
    assert_eq!(
        decode(&with(b"e\x00\x0bhttps://a b")),
        Err(RecordError::Target)
    );
    assert!(matches!(
        decode(&with(b"r\x00\x01\x11")),
        Err(RecordError::Rules(_))
    ));
    // Version 2 without its line break, and a tombstone dressed as version 2.
    assert_eq!(
        decode(b"2|L|302|0|0|https://x.example/"),
        Err(RecordError::Fields)
    );
    assert_eq!(decode(b"2|R|410|0|0|\n"), Err(RecordError::State));
}

#[test]
fn the_lifecycle_comes_before_the_rules() {
    let link = decode(&encode(Some(&extras()))).unwrap();
    let view = link.view();
    let answer = |now| view.answer(now, || click(IPHONE), |_| Some(*b"PT"));
    assert_eq!(answer(999), Answer::NotYet { opens_at: 1_000 });
    assert_eq!(
        answer(5_000),
        Answer::Redirect {
            status: LIFECYCLE_STATUS,
            target: b"https://shop.example/over",
            forward_query: false,
            chosen: None,
        }
    );
    assert_eq!(
        answer(1_000),
        Answer::Redirect {
            status: 302,
            target: b"https://apps.apple.com/app/id1",
            forward_query: false,
            chosen: Some(Chosen {
                rule: 0,
                variant: None
            }),
        }
    );
}

#[test]
fn a_split_names_its_variant_and_no_rule_means_the_own_target() {
    let link = decode(&encode(Some(&extras()))).unwrap();
    let view = link.view();
    let android = b"Mozilla/5.0 (Linux; Android 10; K) Chrome/124.0.0.0 Mobile Safari/537.36";
    let Answer::Redirect { status, chosen, .. } =
        view.answer(2_000, || click(android), |_| Some(*b"PT"))
    else {
        panic!("a redirect")
    };
    assert_eq!(status, 307);
    assert!(matches!(
        chosen,
        Some(Chosen {
            rule: 1,
            variant: Some(0 | 1)
        })
    ));
    assert_eq!(
        view.answer(2_000, || click(android), |_| Some(*b"ES")),
        Answer::Redirect {
            status: 302,
            target: b"https://shop.example/|x",
            forward_query: true,
            chosen: None,
        }
    );
}

#[test]
fn not_yet_and_expired_urls_replace_the_page_and_the_410() {
    let plain_page = Extras {
        valid_since: 100,
        ..Extras::default()
    };
    let link = decode(&encode(Some(&plain_page))).unwrap();
    assert_eq!(
        link.view().answer(10_000, || click(IPHONE), |_| None),
        Answer::Gone
    );
    let with_url = Extras {
        valid_since: 100,
        not_yet_url: Some(b"https://shop.example/soon"[..].into()),
        ..Extras::default()
    };
    let link = decode(&encode(Some(&with_url))).unwrap();
    assert!(matches!(
        link.view().answer(50, || click(IPHONE), |_| None),
        Answer::Redirect {
            status: LIFECYCLE_STATUS,
            target: b"https://shop.example/soon",
            ..
        }
    ));
}

#[test]
fn the_not_yet_page_says_when() {
    let page = String::from_utf8(not_yet_page(1_798_761_600)).unwrap();
    assert!(page.contains("2027-01-01 00:00 UTC"), "{page}");
    assert!(page.contains("noindex"));
}

#[test]
fn a_capped_link_counts_then_answers_like_an_expired_one() {
    let capped = Extras {
        max_visits: 2,
        valid_since: 100,
        ..extras()
    };
    let link = decode(&encode(Some(&capped))).unwrap();
    let view = link.view();
    let country = |_| Some(*b"PT");
    // Not open yet, or expired: nothing to count.
    assert_eq!(
        view.answer(50, || click(IPHONE), country),
        Answer::NotYet { opens_at: 100 }
    );
    assert!(matches!(
        view.answer(5_000, || click(IPHONE), country),
        Answer::Redirect {
            target: b"https://shop.example/over",
            ..
        }
    ));
    assert_eq!(view.answer(2_000, || click(IPHONE), country), Answer::Count);
    assert!(view.needs_count(2_000, false));
    assert!(!view.needs_count(50, false) && !view.needs_count(5_000, false));
    for visits in [1, 2] {
        assert!(matches!(
            view.answer_checked(2_000, counted(visits), || click(IPHONE), country),
            Answer::Redirect {
                target: b"https://apps.apple.com/app/id1",
                ..
            }
        ));
    }
    assert!(matches!(
        view.answer_checked(2_000, counted(3), || click(IPHONE), country),
        Answer::Redirect {
            target: b"https://shop.example/over",
            chosen: None,
            ..
        }
    ));
    let without_url = Extras {
        max_visits: 1,
        ..Extras::default()
    };
    let link = decode(&encode(Some(&without_url))).unwrap();
    assert_eq!(
        link.view()
            .answer_checked(2_000, counted(2), || click(IPHONE), country),
        Answer::Gone
    );
}

fn counted(visits: u64) -> Checked {
    Checked {
        visits: Some(visits),
        ..Checked::default()
    }
}

#[test]
fn a_password_comes_after_the_lifecycle_and_before_the_count() {
    let locked = Extras {
        password: Some(super::password::Password::new(b"open sesame", [3; 16])),
        max_visits: 5,
        ..extras()
    };
    let link = decode(&encode(Some(&locked))).unwrap();
    assert_eq!(link, decode(&encode(Some(&locked))).unwrap());
    let view = link.view();
    let country = |_| None;
    assert_eq!(
        view.answer(999, || click(IPHONE), country),
        Answer::NotYet { opens_at: 1_000 }
    );
    assert_eq!(
        view.answer(2_000, || click(IPHONE), country),
        Answer::Password
    );
    assert!(!view.needs_count(2_000, false));
    assert!(view.needs_count(2_000, true));
    assert!(view.needs_password(2_000));
    assert!(!view.needs_password(999) && !view.needs_password(5_000));
    let unlocked = Checked {
        visits: None,
        unlocked: true,
        ..Checked::default()
    };
    assert_eq!(
        view.answer_checked(2_000, unlocked, || click(IPHONE), country),
        Answer::Count
    );
    let counted_and_unlocked = Checked {
        visits: Some(1),
        unlocked: true,
        ..Checked::default()
    };
    assert!(matches!(
        view.answer_checked(2_000, counted_and_unlocked, || click(IPHONE), country),
        Answer::Redirect { .. }
    ));
}

#[test]
fn the_click_id_parameter_and_the_recipient_round_trip_and_are_checked() {
    use crate::click_id::ClickIdParam;
    let only_param = Extras {
        click_id_param: ClickIdParam::parse(b"sl_click"),
        ..Extras::default()
    };
    // A plain link asking for the id is version 2 with that field alone.
    let value = encode(Some(&only_param));
    assert!(value.ends_with(b"\ni\x00\x08sl_click"), "{value:?}");
    assert_eq!(decode(&value).unwrap().view().extras, Some(&only_param));
    let all = Extras {
        click_id_param: ClickIdParam::parse(b"cid"),
        recipient: Some(u64::MAX - 1),
        ..extras()
    };
    assert_eq!(
        decode(&encode(Some(&all))).unwrap().view().extras,
        Some(&all)
    );
    // A name the API would refuse, or a flag with a value, is a bad record.
    let mut bad = encode(None);
    bad[0] = b'2';
    bad.extend(b"\ni\x00\x03a b");
    assert_eq!(decode(&bad), Err(RecordError::Extras));
    let mut short = encode(None);
    short[0] = b'2';
    short.extend(b"\nf\x00\x01x");
    assert_eq!(decode(&short), Err(RecordError::Extras));
    // Without them a link keeps its bytes: version 1 for a plain one.
    assert!(encode(Some(&Extras::default())).starts_with(b"1|"));
}

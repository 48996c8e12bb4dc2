use super::*;
use shortlink_model::{LinkFlags, WorkspaceId};

fn link() -> Link {
    let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Link::new(
        "abc1234".into(),
        WorkspaceId::DEFAULT,
        "https://example.com/a?b=c|d".into(),
        String::new(),
        at,
    )
}

const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn records_follow_the_contract() {
    let mut l = link();
    assert_eq!(
        encode_record(&l, RecordWorkspace::DEFAULT),
        b"1|L|302|0|0|https://example.com/a?b=c|d"
    );
    l.redirect = 301;
    l.flags = LinkFlags::with_forward_query(true);
    l.expires_at = DateTime::from_timestamp(1_798_761_600, 0);
    assert_eq!(
        encode_record(&l, RecordWorkspace::DEFAULT),
        b"1|L|301|1798761600|1|https://example.com/a?b=c|d"
    );
    l.revoked_at = Some(l.created_at);
    assert_eq!(encode_record(&l, RecordWorkspace::DEFAULT), b"1|R|410|0|0|");
    assert_eq!(shortlink_wire::keys::link_key("abc1234"), "sl:c:abc1234");
}

#[test]
fn ttl_rules() {
    let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    let mut l = link();
    assert!(matches!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, now, DAY),
        RecordWrite::Set { .. }
    ));

    // Expiring: TTL at expiry + grace, also once expired but within grace.
    l.expires_at = DateTime::from_timestamp(1_700_000_100, 0);
    let until = RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, now, DAY);
    assert_eq!(
        until,
        RecordWrite::SetUntil {
            key: "sl:c:abc1234".into(),
            value: "1|L|302|1700000100|0|https://example.com/a?b=c|d".into(),
            at: 1_700_000_100 + 86_400
        }
    );
    let later = now + chrono::Duration::seconds(1000);
    assert!(matches!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, later, DAY),
        RecordWrite::SetUntil { .. }
    ));
    // Past grace: the key must be gone.
    let much_later = now + chrono::Duration::days(2);
    assert_eq!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, much_later, DAY),
        RecordWrite::Delete {
            key: "sl:c:abc1234".into()
        }
    );

    // Revoked: tombstone without TTL, even if it had an expiry.
    l.revoked_at = Some(now);
    assert_eq!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, much_later, DAY),
        RecordWrite::Set {
            key: "sl:c:abc1234".into(),
            value: TOMBSTONE.into()
        }
    );

    assert_eq!(
        RecordWrite::restore("zz", None, RecordWorkspace::DEFAULT, now, DAY),
        RecordWrite::Delete {
            key: "sl:c:zz".into()
        }
    );
}

#[test]
fn a_link_with_extras_writes_version_2_that_decodes_to_them() {
    use shortlink_model::LinkExtras;
    use shortlink_wire::record::{decode, Link as WireLink};
    use shortlink_wire::rules::{Action, Condition};
    let mut l = link();
    l.extras = LinkExtras {
        valid_since: DateTime::from_timestamp(1_800_000_000, 0),
        not_yet_url: Some("https://soon.example/".into()),
        expired_url: None,
        max_visits: Some(3),
        password_digest: None,
        preview: None,
        click_id_param: Some("sl_click".into()),
        rules: Some(
            r#"[{"if":{"device":["ios"]},"then":{"url":"https://apps.example/","redirect":302,"forward_query":false}}]"#
                .into(),
        ),
    };
    let value = encode_record(&l, RecordWorkspace::DEFAULT);
    assert!(value.starts_with(b"2|L|302|0|0|https://example.com/a?b=c|d\n"));
    let WireLink::Live {
        extras: Some(extras),
        ..
    } = decode(&value).unwrap()
    else {
        panic!("not a live version 2 record");
    };
    assert_eq!(extras.valid_since, 1_800_000_000);
    assert_eq!(
        extras.not_yet_url.as_deref(),
        Some(&b"https://soon.example/"[..])
    );
    assert_eq!(extras.expired_url, None);
    assert_eq!(extras.click_id_param.as_ref().unwrap().as_str(), "sl_click");
    assert_eq!(extras.recipient, None);
    let rules = extras.rules.to_rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(&*rules[0].conditions, &[Condition::Device(1)]);
    assert!(matches!(&rules[0].action, Action::Target(t) if &*t.url == b"https://apps.example/"));
}

#[test]
fn a_recipient_with_rules_is_named_by_its_number_and_without_rules_keeps_version_1() {
    use shortlink_wire::record::{decode, Link as WireLink};
    let mut l = link();
    l.recipient_ref = Some("r-1".into());
    assert!(
        encode_record(&l, RecordWorkspace::DEFAULT).starts_with(b"1|"),
        "a plain per-recipient link keeps its bytes"
    );
    l.extras.rules = Some(
        r#"[{"if":{},"split":{"sticky":true,"variants":[{"weight":1,"url":"https://a.example/"}]}}]"#
            .into(),
    );
    let WireLink::Live {
        extras: Some(extras),
        ..
    } = decode(&encode_record(&l, RecordWorkspace::DEFAULT)).unwrap()
    else {
        panic!("not a live version 2 record");
    };
    let expected = shortlink_wire::rules::recipient(l.code.as_bytes(), b"r-1");
    assert_eq!(extras.recipient, Some(expected));
    assert_eq!(extras.click_id_param, None);
}

#[test]
fn a_link_with_an_expired_url_keeps_its_record_after_expiry() {
    let mut l = link();
    let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    l.expires_at = DateTime::from_timestamp(1_700_000_000, 0);
    assert!(matches!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, now, DAY),
        RecordWrite::Delete { .. }
    ));
    l.extras.expired_url = Some("https://over.example/".into());
    assert!(matches!(
        RecordWrite::for_link(&l, RecordWorkspace::DEFAULT, now, DAY),
        RecordWrite::Set { .. }
    ));
}

#[test]
fn the_card_key_follows_the_record() {
    use shortlink_wire::keys::{preview_key, visit_count_key};
    let mut l = link();
    let now = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
    // No card: the key is removed, and a new link writes none.
    let writes = RecordWrite::for_link_and_card(&l, RecordWorkspace::DEFAULT, now, DAY);
    assert_eq!(writes[1].key(), preview_key(&l.code));
    assert!(matches!(writes[1], RecordWrite::Delete { .. }));
    assert_eq!(RecordWrite::new_card(&l, &writes[0]), None);

    l.extras.preview =
        Some(r#"{"title":"T","description":"D","image":"https://i.example/a.png"}"#.into());
    l.expires_at = DateTime::from_timestamp(1_700_000_200, 0);
    let writes = RecordWrite::for_link_and_card(&l, RecordWorkspace::DEFAULT, now, DAY);
    let RecordWrite::SetUntil { at, .. } = writes[0] else {
        panic!("an expiring record: {writes:?}");
    };
    let RecordWrite::SetUntil {
        value, at: card_at, ..
    } = &writes[1]
    else {
        panic!("an expiring card: {writes:?}");
    };
    assert_eq!(*card_at, at, "the card goes with its record");
    let decoded = shortlink_wire::preview::decode(value).unwrap();
    assert_eq!((decoded.title, decoded.site_name), ("T", ""));
    assert_eq!(
        RecordWrite::new_card(&l, &writes[0]).as_ref(),
        Some(&writes[1])
    );
    let shortlink_wire::record::Link::Live {
        extras: Some(extras),
        ..
    } = shortlink_wire::record::decode(&encode_record(&l, RecordWorkspace::DEFAULT)).unwrap()
    else {
        panic!("a version 2 record");
    };
    assert!(extras.has_card);

    // Revoked, or past its grace: the card goes; past its grace, a capped link's counter too.
    let mut revoked = l.clone();
    revoked.revoked_at = Some(now);
    assert!(matches!(
        RecordWrite::for_link_and_card(&revoked, RecordWorkspace::DEFAULT, now, DAY)[1],
        RecordWrite::Delete { .. }
    ));
    l.extras.max_visits = Some(5);
    let later = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let writes = RecordWrite::for_link_and_card(&l, RecordWorkspace::DEFAULT, later, DAY);
    let deleted: Vec<&str> = writes.iter().map(RecordWrite::key).collect();
    assert!(writes
        .iter()
        .all(|w| matches!(w, RecordWrite::Delete { .. })));
    assert_eq!(deleted[2], visit_count_key(&l.code));

    // A card that no longer reads back is left out of both.
    l.extras.preview = Some("{not json".into());
    let writes = RecordWrite::for_link_and_card(&l, RecordWorkspace::DEFAULT, now, DAY);
    assert!(matches!(writes[1], RecordWrite::Delete { .. }));
}

/// A click's count whose reply is lost with its connection (Redis did count it) is retried once
/// on a new connection, with the same token: the retry finds the click counted and gives back its
/// number. Before, the retry was a second `INCR`, and a one-time link's one click spent two
/// places (issue 82).
#[tokio::test]
async fn a_count_retried_after_its_reply_was_lost_counts_the_click_once() {
    use shortlink_wire::keys::visit_count_key;
    let redis = testkit::RedisServer::start();
    let proxy = testkit::Proxy::start(redis.port());
    let url = format!("redis://127.0.0.1:{}", proxy.port());
    let projection = Projection::new(&url, Duration::from_secs(5)).unwrap();
    let counter = visit_count_key("abc1234");
    proxy.cut_reply_to(counter.as_bytes());
    let click = ClickId::of(7, 1);
    assert_eq!(projection.count_click("abc1234", click).await.unwrap(), 1);
    assert_eq!(proxy.cuts(), 1, "the first try's reply was cut");
    assert_eq!(redis.cli_raw(&["GET", &counter]), "1");
    // The same click again (the module's token, given to the fallback): the same number.
    assert_eq!(projection.count_click("abc1234", click).await.unwrap(), 1);
    // The next click is the next number.
    let next = ClickId::of(7, 2);
    assert_eq!(projection.count_click("abc1234", next).await.unwrap(), 2);
    assert_eq!(redis.cli_raw(&["GET", &counter]), "2");
}

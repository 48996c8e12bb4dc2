//! One visit event as the module queues it to `sl:events` (docs/ARCHITECTURE.md, "Visit events"):
//! the fields `c` code, `t` unix ms, `s` status, `ip`, `ua`, `ref`, `host`, `lang`. The module
//! writes a batch of visits as one binary value in the field `v`; an entry of plain field/value
//! pairs (empty fields omitted) may carry several visits too, each field group beginning with `c`
//! ([`split_entry`]).
//!
//! The framing and the limits are the module's contract (`shortlink_wire::event`); this is what
//! the fields mean.
//!
//! Parsing is tolerant on purpose: the stream is written by nginx workers from request headers, so an
//! optional field that is missing, unparsable or huge must not cost the whole visit. Only `c` and `t`
//! are required; without them the event cannot be attributed to a link or a time bucket.

use shortlink_wire::event::{self as wire, OrphanKind, BATCH_FIELD, MAX_PATH};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::verdict::Signals;
use std::net::IpAddr;

// The limits a visit's fields are kept to: the module's, whoever wrote the entry.
use shortlink_wire::event::{MAX_CODE, MAX_HOST, MAX_LANG, MAX_REFERER, MAX_UA};

/// Why a stream entry could not become a [`VisitEvent`]. The consumer should ack (and count) such
/// entries rather than retry them: redelivery cannot repair them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("visit event {id}: field `{field}` is missing or empty")]
    Missing { id: String, field: &'static str },
    #[error("visit event {id}: code is longer than {MAX_CODE} bytes or not ASCII")]
    BadCode { id: String },
    #[error("visit event {id}: `t` is not a unix time in milliseconds")]
    BadTime { id: String },
    #[error("visit event {id}: the batch is cut short or of an unknown format")]
    BadBatch { id: String },
}

/// A parsed visit event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitEvent {
    /// The visit's id: the click id when the module made one (a link with a click id parameter:
    /// the landing page got the same id), else the stream entry id (`<ms>-<seq>`, see
    /// [`split_entry`]). Either is in the entry itself, so a redelivered insert meets its own id
    /// under the unique constraint and is harmless.
    pub id: String,
    pub code: String,
    /// Unix time of the redirect, in milliseconds.
    pub time_ms: i64,
    /// HTTP status the module answered; `None` when absent or not a number.
    pub status: Option<u16>,
    /// Client address; `None` when absent or unparsable.
    pub ip: Option<IpAddr>,
    pub user_agent: Option<String>,
    pub referrer: Option<String>,
    pub host: Option<String>,
    pub accept_language: Option<String>,
    /// The click-time rule (and variant) that answered, `<rule>` or `<rule>.<variant>`;
    /// `None` for the link's own target or a malformed field.
    pub rule: Option<String>,
    /// `Some` for an orphan visit (a request on a pool host no link answered): `code` then holds
    /// the path asked for (at most [`shortlink_wire::event::MAX_PATH`] bytes, lossy UTF-8).
    pub orphan: Option<OrphanKind>,
    /// The workspace nginx mapped the host to (`ws`), recorded with orphan visits and 410s by
    /// the module; `None` when absent (an older module, a host mapped to none) or not a name.
    pub workspace: Option<String>,
    /// The request's signals (`sig`, `shortlink_wire::verdict::Signals`); `None` from a module
    /// before them or a malformed field: the verdict then reads the agent alone.
    pub signals: Option<Signals>,
}

impl VisitEvent {
    /// Parses one stream entry from its id and field/value pairs (bytes in, as Redis hands them
    /// over). Unknown fields are ignored so the module can add fields before the consumer knows them;
    /// when a field repeats, the first value wins.
    pub fn from_fields<I, K, V>(id: impl Into<String>, fields: I) -> Result<Self, EventError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        Self::parse(id.into(), Numbers::default(), fields)
    }

    /// One visit of a module's batch: its text fields, and the time, status and signals a
    /// format 7 batch holds in binary (an older format's are text among the fields).
    fn from_batch(id: String, visit: wire::DecodedVisit<'_>) -> Result<Self, EventError> {
        let numbers = Numbers {
            // A time past `i64::MAX` ms is no unix time: a `BadTime` as its text would be.
            time: visit.time_ms.map(|t| i64::try_from(t).ok()),
            status: visit.status,
            signals: visit.signals,
        };
        Self::parse(id, numbers, visit.fields)
    }

    /// [`VisitEvent::from_fields`] with the `numbers` known beforehand; a field of the same name
    /// does not override them.
    fn parse<I, K, V>(id: String, numbers: Numbers, fields: I) -> Result<Self, EventError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        // Checked as they come (with owned pairs, `Vec<u8>` from a Redis reply, `value` dies each
        // iteration); `Some(None)`: present but malformed, reported once the required fields are
        // known to be there.
        // `Err`: not a code, kept as text in case `o` makes it an orphan visit's path.
        let mut code: Option<Result<String, String>> = None;
        let mut time: Option<Option<i64>> = numbers.time;
        let mut click_id = None;
        let mut event = VisitEvent {
            id: String::new(),
            code: String::new(),
            time_ms: 0,
            status: numbers.status,
            ip: None,
            user_agent: None,
            referrer: None,
            host: None,
            accept_language: None,
            rule: None,
            orphan: None,
            workspace: None,
            signals: numbers.signals,
        };
        for (key, value) in fields {
            let value = value.as_ref();
            if value.is_empty() {
                continue;
            }
            match key.as_ref() {
                b"c" if code.is_none() => {
                    code = Some(parse_code(value).ok_or_else(|| {
                        let mut path = None;
                        set_text(&mut path, value, MAX_PATH);
                        path.unwrap_or_default()
                    }));
                }
                b"t" if time.is_none() => {
                    time = Some(parse_ascii::<i64>(value).filter(|t| *t >= 0));
                }
                b"s" if event.status.is_none() => event.status = parse_ascii(value),
                b"ip" if event.ip.is_none() => event.ip = parse_ascii(value),
                b"ua" => set_text(&mut event.user_agent, value, MAX_UA),
                b"ref" => set_text(&mut event.referrer, value, MAX_REFERER),
                b"host" => set_text(&mut event.host, value, MAX_HOST),
                b"lang" => set_text(&mut event.accept_language, value, MAX_LANG),
                // Read back through wire's parser: only a well-formed `3` or `3.1` is stored.
                b"rule" if event.rule.is_none() => {
                    event.rule = wire::parse_chosen(value).map(|chosen| {
                        let (text, len) = wire::chosen_text(chosen);
                        String::from_utf8_lossy(&text[..len]).into_owned()
                    })
                }
                b"o" if event.orphan.is_none() => event.orphan = OrphanKind::parse(value),
                b"sig" if event.signals.is_none() => event.signals = Signals::parse(value),
                b"ws" if event.workspace.is_none() => {
                    event.workspace = WorkspaceName::parse(value).map(|w| w.as_str().to_owned());
                }
                // A malformed id is left out: the visit keeps its entry id.
                b"id" if click_id.is_none() => {
                    click_id = shortlink_wire::click_id::ClickId::parse(value);
                }
                _ => {}
            }
        }
        let missing = |field| EventError::Missing {
            id: id.clone(),
            field,
        };
        let code = code.ok_or_else(|| missing("c"))?;
        let time = time.ok_or_else(|| missing("t"))?;
        let code = match (code, event.orphan) {
            (Ok(code), _) => code,
            // A path is anything the module cut to its limit; a code has a code's shape.
            (Err(path), Some(_)) if !path.is_empty() => path,
            (Err(_), _) => return Err(EventError::BadCode { id }),
        };
        event.time_ms = time.ok_or_else(|| EventError::BadTime { id: id.clone() })?;
        event.code = code;
        event.id = match click_id {
            Some(click_id) => click_id.to_string(),
            None => id,
        };
        Ok(event)
    }
}

/// A visit's time, status and signals when its batch carries them as numbers, not text
/// (format 7); `time` as [`VisitEvent::parse`] keeps it: `Some(None)` is present but no unix time.
#[derive(Debug, Default, Clone, Copy)]
struct Numbers {
    time: Option<Option<i64>>,
    status: Option<u16>,
    signals: Option<Signals>,
}

/// Splits one stream entry into its visits. An entry is the concatenation of field groups, one per
/// visit, each beginning with `c` (docs/ARCHITECTURE.md, "Visit events"): the module packs several
/// visits into one `XADD` under load to save Redis work. A single-visit entry is one group.
///
/// The first group's id is the entry id and the n-th following group's is `<entry id>:<n>`, so ids
/// are stable across redeliveries (the storage's idempotency key) and a single-visit entry keeps
/// its entry id. Fields before the first `c` (none from the module) belong to the first group, so
/// an entry in any field order still parses as one visit. Each group is parsed on its own: a bad
/// group is an `Err` in its slot and costs none of the others.
pub fn split_entry<K, V>(entry_id: &str, fields: &[(K, V)]) -> Vec<Result<VisitEvent, EventError>>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    if let [(key, batch)] = fields {
        if key.as_ref() == BATCH_FIELD {
            return split_batch(entry_id, batch.as_ref());
        }
    }
    let mut visits = Vec::new();
    let mut start = 0;
    let mut seen_code = false;
    for (i, (key, _)) in fields.iter().enumerate() {
        if key.as_ref() != b"c" {
            continue;
        }
        if seen_code {
            visits.push(group(entry_id, visits.len(), &fields[start..i]));
            start = i;
        }
        seen_code = true;
    }
    visits.push(group(entry_id, visits.len(), &fields[start..]));
    visits
}

/// The visits of a batch (the value of an entry's `v` field), with the same ids as field groups
/// would get. A visit whose fields do not parse costs only itself; a batch cut short ends with
/// one `BadBatch` for what could not be framed.
fn split_batch(entry_id: &str, batch: &[u8]) -> Vec<Result<VisitEvent, EventError>> {
    wire::visits(batch)
        .enumerate()
        .map(|(index, fields)| {
            let id = visit_id(entry_id, index);
            match fields {
                Ok(visit) => VisitEvent::from_batch(id, visit),
                Err(wire::BatchError) => Err(EventError::BadBatch { id }),
            }
        })
        .collect()
}

/// The visit id of group `index` of entry `entry_id` (see [`split_entry`]).
pub fn visit_id(entry_id: &str, index: usize) -> String {
    if index == 0 {
        entry_id.to_owned()
    } else {
        format!("{entry_id}:{index}")
    }
}

fn group<K, V>(entry_id: &str, index: usize, fields: &[(K, V)]) -> Result<VisitEvent, EventError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    VisitEvent::from_fields(
        visit_id(entry_id, index),
        fields.iter().map(|(k, v)| (k.as_ref(), v.as_ref())),
    )
}

/// A code as the module writes it: printable ASCII, at most [`MAX_CODE`] bytes.
fn parse_code(value: &[u8]) -> Option<String> {
    if value.len() > MAX_CODE || !value.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    std::str::from_utf8(value).ok().map(str::to_owned)
}

fn parse_ascii<T: std::str::FromStr>(value: &[u8]) -> Option<T> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// Stores `value` (first occurrence only) as text, cut to `max` bytes. Headers are not guaranteed to
/// be UTF-8, so invalid bytes become U+FFFD rather than failing the event.
fn set_text(slot: &mut Option<String>, value: &[u8], max: usize) {
    if slot.is_some() {
        return;
    }
    // Borrowed when the bytes are UTF-8 (nearly always), so the kept text is the one allocation.
    let text = String::from_utf8_lossy(&value[..value.len().min(max)]);
    // Lossy decoding can grow the text (a cut multi-byte char becomes 3-byte U+FFFD): cut again on a
    // char boundary so the limit holds.
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let trimmed = text[..end].trim();
    if !trimmed.is_empty() {
        *slot = Some(trimmed.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_wire::event::{BATCH_FORMAT, BATCH_FORMAT_1};

    fn parse(fields: &[(&str, &str)]) -> Result<VisitEvent, EventError> {
        VisitEvent::from_fields(
            "1700000000000-0",
            fields.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
        )
    }

    #[test]
    fn full_event() {
        let e = parse(&[
            ("c", "Ab3dE9"),
            ("t", "1700000000123"),
            ("s", "302"),
            ("ip", "203.0.113.7"),
            ("ua", "curl/8.5.0"),
            ("ref", "https://t.co/x"),
            ("host", "s1.example"),
            ("lang", "de-DE,de;q=0.9"),
        ])
        .unwrap();
        assert_eq!(e.id, "1700000000000-0");
        assert_eq!(e.code, "Ab3dE9");
        assert_eq!(e.time_ms, 1_700_000_000_123);
        assert_eq!(e.status, Some(302));
        assert_eq!(e.ip, Some("203.0.113.7".parse().unwrap()));
        assert_eq!(e.user_agent.as_deref(), Some("curl/8.5.0"));
        assert_eq!(e.referrer.as_deref(), Some("https://t.co/x"));
        assert_eq!(e.host.as_deref(), Some("s1.example"));
        assert_eq!(e.accept_language.as_deref(), Some("de-DE,de;q=0.9"));
    }

    #[test]
    fn optional_fields_may_be_missing_or_bad() {
        let e = parse(&[
            ("c", "abc"),
            ("t", "5"),
            ("s", "x"),
            ("ip", "not-an-ip"),
            ("zz", "new"),
        ])
        .unwrap();
        assert_eq!((e.status, e.ip, e.user_agent), (None, None, None));
    }

    #[test]
    fn required_fields() {
        let missing = |f| {
            Err(EventError::Missing {
                id: "1700000000000-0".into(),
                field: f,
            })
        };
        assert_eq!(parse(&[("t", "5")]), missing("c"));
        assert_eq!(parse(&[("c", ""), ("t", "5")]), missing("c"));
        assert_eq!(parse(&[("c", "abc")]), missing("t"));
        assert!(matches!(
            parse(&[("c", "abc"), ("t", "-1")]),
            Err(EventError::BadTime { .. })
        ));
        assert!(matches!(
            parse(&[("c", "abc"), ("t", "soon")]),
            Err(EventError::BadTime { .. })
        ));
        let long = "a".repeat(MAX_CODE + 1);
        assert!(matches!(
            parse(&[("c", &long), ("t", "5")]),
            Err(EventError::BadCode { .. })
        ));
        assert!(matches!(
            parse(&[("c", "a b"), ("t", "5")]),
            Err(EventError::BadCode { .. })
        ));
        let err = parse(&[("t", "5")]).unwrap_err().to_string();
        assert!(
            err.contains("`c`") && err.contains("1700000000000-0"),
            "{err}"
        );
    }

    #[test]
    fn huge_values_are_truncated_not_rejected() {
        let ua = "é".repeat(MAX_UA); // 2 bytes each: the cut lands inside a char
        let e = parse(&[("c", "abc"), ("t", "5"), ("ua", &ua)]).unwrap();
        let kept = e.user_agent.unwrap();
        assert!(kept.len() <= MAX_UA && kept.starts_with("éé"));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let fields: Vec<(&[u8], &[u8])> = vec![(b"c", b"abc"), (b"t", b"5"), (b"ua", b"Foo\xff/1")];
        let e = VisitEvent::from_fields("1-0", fields).unwrap();
        assert_eq!(e.user_agent.as_deref(), Some("Foo\u{fffd}/1"));
    }

    #[test]
    fn first_value_wins() {
        let e = parse(&[
            ("c", "abc"),
            ("c", "xyz"),
            ("t", "5"),
            ("ua", "one"),
            ("ua", "two"),
        ])
        .unwrap();
        assert_eq!(
            (e.code.as_str(), e.user_agent.as_deref()),
            ("abc", Some("one"))
        );
    }

    fn pairs(fields: &[&str]) -> Vec<(Vec<u8>, Vec<u8>)> {
        fields
            .chunks(2)
            .map(|kv| (kv[0].as_bytes().to_vec(), kv[1].as_bytes().to_vec()))
            .collect()
    }

    /// A batch as the module wrote it before click-time rules (format 1, eight fields a
    /// visit; wire/src/event/encode.rs): still read during an upgrade.
    fn batch(visits: &[[&str; 8]]) -> Vec<u8> {
        let mut out = vec![BATCH_FORMAT_1];
        for visit in visits {
            for value in visit {
                out.extend_from_slice(&(value.len() as u16).to_le_bytes());
                out.extend_from_slice(value.as_bytes());
            }
        }
        out
    }

    #[test]
    fn a_batch_splits_into_its_visits_with_entry_ids() {
        let value = batch(&[
            [
                "abc",
                "5",
                "302",
                "203.0.113.9",
                "curl/8",
                "",
                "s1.example",
                "",
            ],
            ["zz9", "6", "410", "", "", "https://t.co/x", "", "de"],
        ]);
        let visits = split_entry("9-2", &[(BATCH_FIELD.to_vec(), value)]);
        let got: Vec<_> = visits.into_iter().map(Result::unwrap).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].id.as_str(), got[0].code.as_str(), got[0].time_ms),
            ("9-2", "abc", 5)
        );
        assert_eq!(got[0].status, Some(302));
        assert_eq!(got[0].ip, Some("203.0.113.9".parse().unwrap()));
        assert_eq!(got[0].referrer, None, "length 0 is absent");
        assert_eq!(
            (got[1].id.as_str(), got[1].code.as_str(), got[1].status),
            ("9-2:1", "zz9", Some(410))
        );
        assert_eq!(got[1].referrer.as_deref(), Some("https://t.co/x"));
        assert_eq!(got[1].accept_language.as_deref(), Some("de"));
    }

    #[test]
    fn an_orphan_event_keeps_any_path_and_a_visit_still_needs_a_code() {
        let path = "/促销 %E3%80%82?".to_owned() + &"x".repeat(2 * MAX_PATH);
        let fields = |orphan: &str| {
            [
                ("c", path.clone()),
                ("t", "5".into()),
                ("s", "404".into()),
                ("o", orphan.into()),
            ]
        };
        let orphan = fields("regular_404");
        let event = parse(&orphan.each_ref().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(event.orphan, Some(OrphanKind::Regular404));
        assert!(event.code.starts_with("/促销 %E3%80%82?"));
        assert!(event.code.len() <= MAX_PATH);
        // Without a kind (or with one no module writes) the same path is no code.
        for orphan in ["", "bogus"] {
            let fields = fields(orphan);
            let pairs = fields.each_ref().map(|(k, v)| (*k, v.as_str()));
            assert!(
                matches!(parse(&pairs), Err(EventError::BadCode { .. })),
                "{orphan:?}"
            );
        }
        // A code-shaped path of an orphan is kept as it is.
        let event = parse(&[("c", "/abc1234"), ("t", "5"), ("o", "invalid_short_url")]).unwrap();
        assert_eq!(
            (event.code.as_str(), event.orphan),
            ("/abc1234", Some(OrphanKind::InvalidShortUrl))
        );
    }

    #[test]
    fn a_click_id_becomes_the_visit_id_and_a_malformed_one_is_left_out() {
        use shortlink_wire::click_id::ClickId;
        use shortlink_wire::event::{Batch, Visit};
        let id = ClickId::of(0xfeed, 42);
        let mut batch = Batch::default();
        for click_id in [Some(id), None] {
            batch.push(&Visit {
                code: b"abc",
                time_ms: 5,
                status: 302,
                click_id,
                ..Visit::default()
            });
        }
        let visits = split_entry("9-2", &[(BATCH_FIELD.to_vec(), batch.bytes().to_vec())]);
        let got: Vec<_> = visits.into_iter().map(Result::unwrap).collect();
        assert_eq!(got[0].id, id.to_string());
        assert_eq!(got[1].id, "9-2:1");
        // Field groups too; an id that is not one keeps the entry's.
        let visits = split_entry("7-1", &pairs(&["c", "abc", "t", "5", "id", "not an id"]));
        assert_eq!(visits[0].as_ref().unwrap().id, "7-1");
    }

    /// A batch a module wrote before format 7 still in the stream when the consumer is upgraded
    /// (recorded from the format 6 encoder) makes the events today's module's batch of the same
    /// visits makes.
    #[test]
    fn a_recorded_format_6_batch_gives_the_events_of_todays_batch() {
        use shortlink_wire::agent::Audience;
        use shortlink_wire::event::{Batch, Visit};
        use shortlink_wire::record::Chosen;
        let recorded = include_str!("../../wire/tests/data/format-6-batch.hex").trim();
        let old: Vec<u8> = (0..recorded.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&recorded[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(old[0], shortlink_wire::event::BATCH_FORMAT_6);
        let mut batch = Batch::default();
        batch.push(&Visit {
            code: b"old-six",
            time_ms: 1_764_400_000_123,
            status: 302,
            ip: b"203.0.113.9",
            ua: b"Mozilla/5.0 (iPhone)",
            host: b"s1.example",
            lang: b"pt-BR",
            chosen: Some(Chosen {
                rule: 1,
                variant: Some(0),
            }),
            signals: Signals::new(Signals::HEAD),
            ..Visit::default()
        });
        batch.push(&Visit {
            code: b"/nope",
            time_ms: 1_764_400_000_124,
            status: 404,
            ip: b"198.51.100.7",
            host: b"s1.example",
            orphan: Some(OrphanKind::Regular404),
            workspace: b"brand-a",
            signals: Signals::new(0).with_verdict(Audience::Human),
            ..Visit::default()
        });
        assert_eq!(batch.bytes()[0], BATCH_FORMAT);
        let events = |value: &[u8]| -> Vec<VisitEvent> {
            split_entry("9-2", &[(BATCH_FIELD.to_vec(), value.to_vec())])
                .into_iter()
                .map(Result::unwrap)
                .collect()
        };
        let (then, now) = (events(&old), events(batch.bytes()));
        assert_eq!(then, now);
        assert_eq!(
            (then[0].time_ms, then[0].status, then[0].rule.as_deref()),
            (1_764_400_000_123, Some(302), Some("1.0"))
        );
        assert_eq!(then[0].signals, Some(Signals::new(Signals::HEAD)));
        assert_eq!(
            (
                then[1].orphan,
                then[1].workspace.as_deref(),
                then[1].id.as_str()
            ),
            (Some(OrphanKind::Regular404), Some("brand-a"), "9-2:1")
        );
        assert_eq!(
            then[1].signals.and_then(Signals::click_verdict),
            Some(Audience::Human)
        );
    }

    #[test]
    fn a_bad_batched_visit_costs_only_itself_and_a_cut_batch_ends_it() {
        let mut value = batch(&[
            ["abc", "5", "302", "", "", "", "", ""],
            ["", "6", "302", "", "", "", "", ""],
            ["def", "7", "302", "", "", "", "", ""],
        ]);
        value.extend_from_slice(&[40, 0, b'x']);
        let visits = split_entry("1-0", &[(BATCH_FIELD.to_vec(), value)]);
        assert_eq!(visits.len(), 4);
        assert_eq!(visits[0].as_ref().unwrap().code, "abc");
        assert!(matches!(&visits[1], Err(EventError::Missing { id, .. }) if id == "1-0:1"));
        assert_eq!(visits[2].as_ref().unwrap().id, "1-0:2");
        assert!(matches!(&visits[3], Err(EventError::BadBatch { id }) if id == "1-0:3"));

        for junk in [vec![], vec![3, 0, 0], vec![BATCH_FORMAT, 9]] {
            let visits = split_entry("1-0", &[(BATCH_FIELD.to_vec(), junk)]);
            assert!(matches!(&visits[..], [Err(EventError::BadBatch { .. })]));
        }
    }

    #[test]
    fn single_visit_entry_keeps_its_id() {
        let fields = pairs(&["t", "5", "c", "abc", "ua", "curl/8"]);
        let visits = split_entry("7-1", &fields);
        assert_eq!(visits.len(), 1);
        let v = visits[0].as_ref().unwrap();
        assert_eq!(
            (v.id.as_str(), v.code.as_str(), v.time_ms),
            ("7-1", "abc", 5)
        );
        assert_eq!(v.user_agent.as_deref(), Some("curl/8"));
    }

    #[test]
    fn multi_visit_entry_splits_at_each_code() {
        let fields = pairs(&[
            "c",
            "one",
            "t",
            "10",
            "s",
            "302",
            "ip",
            "203.0.113.1",
            "ua",
            "curl/8",
            "ref",
            "https://t.co/x",
            "host",
            "s1.example",
            "lang",
            "de",
            // Only the required fields: every optional one omitted (empty).
            "c",
            "two",
            "t",
            "11",
            "c",
            "three",
            "t",
            "12",
            "ua",
            "Wget/1.21",
        ]);
        let visits = split_entry("1700000000000-3", &fields);
        let ids: Vec<&str> = visits
            .iter()
            .map(|v| v.as_ref().unwrap().id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["1700000000000-3", "1700000000000-3:1", "1700000000000-3:2"]
        );
        let two = visits[1].as_ref().unwrap();
        assert_eq!((two.code.as_str(), two.time_ms), ("two", 11));
        assert_eq!(
            (
                two.status,
                two.ip,
                two.user_agent.as_deref(),
                two.referrer.as_deref()
            ),
            (None, None, None, None)
        );
        assert_eq!(
            (two.host.as_deref(), two.accept_language.as_deref()),
            (None, None)
        );
        // Fields never leak from one group into the next.
        let three = visits[2].as_ref().unwrap();
        assert_eq!(three.user_agent.as_deref(), Some("Wget/1.21"));
        assert_eq!(three.referrer, None);
        assert_eq!(visits[0].as_ref().unwrap().status, Some(302));
    }

    #[test]
    fn a_bad_group_costs_only_itself() {
        let long = "x".repeat(MAX_CODE + 1);
        let fields = pairs(&[
            "c", "good", "t", "1", "c", "", "t", "2", // empty code
            "c", "nodate", "zz", "junk", // no time
            "c", &long, "t", "3", // code too long
            "c", "fine", "t", "4",
        ]);
        let visits = split_entry("9-0", &fields);
        assert_eq!(visits.len(), 5);
        assert_eq!(visits[0].as_ref().unwrap().code, "good");
        assert_eq!(
            visits[1],
            Err(EventError::Missing {
                id: "9-0:1".into(),
                field: "c"
            })
        );
        assert_eq!(
            visits[2],
            Err(EventError::Missing {
                id: "9-0:2".into(),
                field: "t"
            })
        );
        assert!(matches!(visits[3], Err(EventError::BadCode { .. })));
        // Ids are positional, so a bad group does not shift the ids of the ones after it.
        let last = visits[4].as_ref().unwrap();
        assert_eq!((last.id.as_str(), last.code.as_str()), ("9-0:4", "fine"));
    }

    #[test]
    fn degenerate_entries() {
        let none: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let visits = split_entry("1-0", &none);
        assert_eq!(visits.len(), 1);
        assert!(matches!(
            visits[0],
            Err(EventError::Missing { field: "c", .. })
        ));
        let visits = split_entry("1-0", &pairs(&["t", "5", "ua", "x"]));
        assert!(matches!(
            visits[..],
            [Err(EventError::Missing { field: "c", .. })]
        ));
    }
}

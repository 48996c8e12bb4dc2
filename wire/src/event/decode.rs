//! Framing a batch back into visits: the consumer's half of [`super::encode`]. What the fields
//! mean (UTF-8, addresses, times) is the consumer's business; this only cuts the bytes apart.

use super::{
    BATCH_FORMAT, BATCH_FORMAT_1, BATCH_FORMAT_2, BATCH_FORMAT_3, BATCH_FORMAT_4, BATCH_FORMAT_5,
    BATCH_FORMAT_6, FORMAT_1_FIELDS, FORMAT_2_FIELDS, FORMAT_3_FIELDS, FORMAT_4_FIELDS,
    FORMAT_5_FIELDS, FORMAT_6_FIELDS, HAS_ID, HAS_ORPHAN, HAS_RULE, HAS_WORKSPACE, KNOWN_FLAGS,
    VISIT_FIELDS, VISIT_HEAD,
};
use crate::verdict::Signals;

/// One visit's fields as `(name, value)` pairs in [`VISIT_FIELDS`] order; an empty value is an
/// absent field.
pub type VisitFields<'a> = [(&'static [u8], &'a [u8]); VISIT_FIELDS.len()];

/// One visit of a batch: its text fields, and the numbers a format 7 batch carries in binary
/// (`None` from an older format, whose `t`, `s` and `sig` are text among the fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedVisit<'a> {
    /// The fields written as text; in format 7 `t`, `s` and `sig` are empty here.
    pub fields: VisitFields<'a>,
    pub time_ms: Option<u64>,
    pub status: Option<u16>,
    pub signals: Option<Signals>,
}

/// A batch that cannot be framed (any further): empty, of an unknown format, or cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchError;

/// The visits of a batch, in order. A batch that cannot be framed ends with one `Err` for
/// what is left; the visits before it are whole.
pub fn visits(batch: &[u8]) -> Visits<'_> {
    let (layout, rest) = match batch.split_first() {
        Some((&BATCH_FORMAT, rest)) => (Layout::Binary, rest),
        Some((&format, rest)) => match text_fields(format) {
            Some(fields) => (Layout::Text(fields), rest),
            None => return Visits::failed(),
        },
        None => return Visits::failed(),
    };
    Visits {
        rest: Ok(rest),
        layout,
    }
}

/// Fields per visit of a format that writes every field as text (6 and the ones before it).
fn text_fields(format: u8) -> Option<usize> {
    Some(match format {
        BATCH_FORMAT_6 => FORMAT_6_FIELDS,
        BATCH_FORMAT_5 => FORMAT_5_FIELDS,
        BATCH_FORMAT_4 => FORMAT_4_FIELDS,
        BATCH_FORMAT_3 => FORMAT_3_FIELDS,
        BATCH_FORMAT_2 => FORMAT_2_FIELDS,
        BATCH_FORMAT_1 => FORMAT_1_FIELDS,
        _ => return None,
    })
}

/// How a batch's visits are laid out.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// Format 7: a binary head, then the text fields it names.
    Binary,
    /// The first this many of [`VISIT_FIELDS`], each as text; the others are absent.
    Text(usize),
}

/// The iterator of [`visits`].
#[derive(Debug, Clone)]
pub struct Visits<'a> {
    /// What is still to be read; `Err` once an error is due, then the iterator ends.
    rest: Result<&'a [u8], BatchError>,
    layout: Layout,
}

impl<'a> Visits<'a> {
    fn failed() -> Self {
        Visits {
            rest: Err(BatchError),
            layout: Layout::Text(0),
        }
    }
}

impl<'a> Iterator for Visits<'a> {
    type Item = Result<DecodedVisit<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = match self.rest {
            Ok([]) => return None,
            Ok(rest) => rest,
            Err(error) => {
                self.rest = Ok(&[]);
                return Some(Err(error));
            }
        };
        let visit = match self.layout {
            Layout::Binary => binary_visit(rest),
            Layout::Text(fields) => text_visit(rest, fields),
        };
        match visit {
            Some((visit, tail)) => {
                self.rest = Ok(tail);
                Some(Ok(visit))
            }
            None => {
                self.rest = Ok(&[]);
                Some(Err(BatchError))
            }
        }
    }
}

/// Every field absent.
fn no_fields<'a>() -> VisitFields<'a> {
    VISIT_FIELDS.map(|name| (name.as_bytes(), &[][..]))
}

/// A format 7 visit off the front of `bytes`, and what follows it.
fn binary_visit(bytes: &[u8]) -> Option<(DecodedVisit<'_>, &[u8])> {
    let (head, mut rest) = bytes.split_first_chunk::<VISIT_HEAD>()?;
    let flags = head[0];
    if flags & !KNOWN_FLAGS != 0 {
        return None;
    }
    let time_ms = u64::from_le_bytes(head[1..9].try_into().ok()?);
    let status = u16::from_le_bytes([head[9], head[10]]);
    let signals = Signals::from_bits(u16::from_le_bytes([head[11], head[12]]));
    let mut fields = no_fields();
    // Indexes into VISIT_FIELDS: c, ip, ua, ref, host, lang always; rule, id, o, ws if flagged.
    let flagged = [
        (8, HAS_RULE),
        (9, HAS_ID),
        (10, HAS_ORPHAN),
        (11, HAS_WORKSPACE),
    ];
    let present = [0, 3, 4, 5, 6, 7].into_iter().chain(
        flagged
            .into_iter()
            .filter(|(_, flag)| flags & flag != 0)
            .map(|(i, _)| i),
    );
    for index in present {
        let (value, tail) = take_field(rest)?;
        fields[index].1 = value;
        rest = tail;
    }
    let visit = DecodedVisit {
        fields,
        time_ms: Some(time_ms),
        status: Some(status),
        signals: Some(signals),
    };
    Some((visit, rest))
}

/// A visit of a text format of `count` fields off the front of `bytes`, and what follows it.
fn text_visit(mut bytes: &[u8], count: usize) -> Option<(DecodedVisit<'_>, &[u8])> {
    let mut fields = no_fields();
    for slot in fields.iter_mut().take(count) {
        let (value, tail) = take_field(bytes)?;
        slot.1 = value;
        bytes = tail;
    }
    let visit = DecodedVisit {
        fields,
        time_ms: None,
        status: None,
        signals: None,
    };
    Some((visit, bytes))
}

/// One length-prefixed field off the front of `bytes`, and what follows it.
fn take_field(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_le_bytes(*len));
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::super::encode::tests::visit;
    use super::super::{truncate, Batch, Visit, MAX_HOST, MAX_PATH, MAX_UA};
    use super::*;

    fn batch_of(visits: &[Visit<'_>]) -> Vec<u8> {
        let mut batch = Batch::default();
        for v in visits {
            batch.push(v);
        }
        batch.bytes().to_vec()
    }

    fn value<'a>(visit: &DecodedVisit<'a>, name: &str) -> &'a [u8] {
        visit
            .fields
            .iter()
            .find(|(n, _)| *n == name.as_bytes())
            .unwrap()
            .1
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_visits() {
        let host = vec![b'h'; MAX_HOST + 10];
        let ua = "é".repeat(MAX_UA);
        let second = Visit {
            code: b"zz9",
            time_ms: 7,
            status: 410,
            ip: b"",
            host: &host,
            ua: ua.as_bytes(),
            ..visit()
        };
        let bytes = batch_of(&[visit(), second]);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 2);
        for (fields, sent) in decoded.iter().zip([visit(), second]) {
            assert_eq!(value(fields, "c"), sent.code);
            assert_eq!(fields.time_ms, Some(sent.time_ms));
            assert_eq!(fields.status, Some(sent.status));
            assert_eq!(fields.signals, Some(sent.signals));
            assert_eq!(value(fields, "ip"), sent.ip);
            assert_eq!(value(fields, "ref"), sent.referer);
            assert_eq!(value(fields, "lang"), sent.lang);
        }
        // Long values arrive cut to the shared limits, whole characters only.
        assert_eq!(value(&decoded[1], "host"), truncate(&host, MAX_HOST));
        assert_eq!(value(&decoded[1], "ua"), truncate(ua.as_bytes(), MAX_UA));
        assert!(std::str::from_utf8(value(&decoded[1], "ua")).is_ok());
    }

    #[test]
    fn a_format_1_batch_reads_without_a_rule_and_the_rule_round_trips() {
        // What a module from before click-time rules wrote: eight fields a visit.
        let mut old = vec![BATCH_FORMAT_1];
        for value in ["abc", "7", "302", "", "", "", "s1.example", "pt"] {
            old.extend((value.len() as u16).to_le_bytes());
            old.extend(value.as_bytes());
        }
        let decoded: Vec<_> = visits(&old).collect::<Result<_, _>>().unwrap();
        assert_eq!(value(&decoded[0], "c"), b"abc");
        assert_eq!(value(&decoded[0], "lang"), b"pt");
        assert_eq!(value(&decoded[0], "rule"), b"");
        let chosen = crate::record::Chosen {
            rule: 2,
            variant: Some(1),
        };
        let bytes = batch_of(&[Visit {
            chosen: Some(chosen),
            ..visit()
        }]);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(value(&decoded[0], "rule"), b"2.1");
        assert_eq!(
            crate::event::parse_chosen(value(&decoded[0], "rule")),
            Some(chosen)
        );
    }

    #[test]
    fn a_format_2_batch_reads_without_an_id_and_the_id_round_trips() {
        // What a module from before click ids wrote: nine fields a visit.
        let mut old = vec![BATCH_FORMAT_2];
        for value in ["abc", "7", "302", "", "", "", "s1.example", "pt", "1.0"] {
            old.extend((value.len() as u16).to_le_bytes());
            old.extend(value.as_bytes());
        }
        let decoded: Vec<_> = visits(&old).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 1);
        assert_eq!(value(&decoded[0], "rule"), b"1.0");
        assert_eq!(value(&decoded[0], "id"), b"");
        let id = crate::click_id::ClickId::of(1, 2);
        let bytes = batch_of(&[
            Visit {
                click_id: Some(id),
                ..visit()
            },
            visit(),
        ]);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(value(&decoded[0], "id"), id.as_bytes());
        assert_eq!(value(&decoded[1], "id"), b"");
        assert_eq!(value(&decoded[1], "c"), visit().code);
    }

    #[test]
    fn a_format_3_batch_reads_as_visits_and_each_orphan_kind_round_trips() {
        // What a module from before orphan visits wrote: ten fields a visit.
        let mut old = vec![BATCH_FORMAT_3];
        for value in ["abc", "7", "302", "", "", "", "s1.example", "pt", "", ""] {
            old.extend((value.len() as u16).to_le_bytes());
            old.extend(value.as_bytes());
        }
        old.extend_from_within(1..);
        let decoded: Vec<_> = visits(&old).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 2);
        for fields in &decoded {
            assert_eq!(value(fields, "c"), b"abc");
            assert_eq!(value(fields, "lang"), b"pt");
            assert_eq!(value(fields, "o"), b"");
        }
        let long_path = format!("/{}", "é".repeat(MAX_PATH));
        let orphans: Vec<Visit<'_>> = crate::event::OrphanKind::ALL
            .into_iter()
            .map(|kind| Visit {
                code: long_path.as_bytes(),
                status: 404,
                orphan: Some(kind),
                ..visit()
            })
            .collect();
        let mut sent = vec![visit()];
        sent.extend(orphans.iter().copied());
        let bytes = batch_of(&sent);
        assert_eq!(bytes[0], BATCH_FORMAT);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 5);
        assert_eq!(value(&decoded[0], "o"), b"");
        assert_eq!(value(&decoded[0], "c"), visit().code);
        for (fields, kind) in decoded[1..].iter().zip(crate::event::OrphanKind::ALL) {
            assert_eq!(
                crate::event::OrphanKind::parse(value(fields, "o")),
                Some(kind)
            );
            assert_eq!(fields.status, Some(404));
            assert_eq!(value(fields, "host"), visit().host);
            // The path is cut to its own limit, longer than a code's, at a character boundary.
            let path = value(fields, "c");
            assert_eq!(path, truncate(long_path.as_bytes(), MAX_PATH));
            assert!(path.len() > crate::event::MAX_CODE);
            assert!(std::str::from_utf8(path).is_ok());
        }
    }

    #[test]
    fn a_format_4_batch_reads_without_a_workspace_and_the_workspace_round_trips() {
        // What a module from before `ws` wrote: eleven fields a visit.
        let mut old = vec![BATCH_FORMAT_4];
        for value in [
            "/x",
            "7",
            "404",
            "",
            "",
            "",
            "a1.example",
            "",
            "",
            "",
            "regular_404",
        ] {
            old.extend((value.len() as u16).to_le_bytes());
            old.extend(value.as_bytes());
        }
        let decoded: Vec<_> = visits(&old).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 1);
        assert_eq!(value(&decoded[0], "o"), b"regular_404");
        assert_eq!(value(&decoded[0], "ws"), b"");
        let orphan = Visit {
            code: b"/x",
            status: 404,
            orphan: Some(crate::event::OrphanKind::Regular404),
            workspace: b"brand-a",
            ..visit()
        };
        let bytes = batch_of(&[orphan, visit()]);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(value(&decoded[0], "ws"), b"brand-a");
        assert_eq!(value(&decoded[1], "ws"), b"");
    }

    #[test]
    fn a_batch_that_cannot_be_framed_ends_in_one_error() {
        assert_eq!(visits(b"").collect::<Vec<_>>(), [Err(BatchError)]);
        assert!(visits(&[BATCH_FORMAT]).next().is_none());
        assert_eq!(visits(b"\x08").collect::<Vec<_>>(), [Err(BatchError)]);
        // A format 7 head cut short, and one with a flag no format 7 writer sets.
        assert_eq!(
            visits(&[BATCH_FORMAT, 0, 1, 2]).collect::<Vec<_>>(),
            [Err(BatchError)]
        );
        let mut unknown_flag = batch_of(&[visit()]);
        unknown_flag[1] |= 1 << 4;
        assert_eq!(visits(&unknown_flag).collect::<Vec<_>>(), [Err(BatchError)]);
        let mut bytes = batch_of(&[visit(), visit()]);
        bytes.pop();
        let decoded: Vec<_> = visits(&bytes).collect();
        assert_eq!(decoded.len(), 2);
        assert!(decoded[0].is_ok());
        assert_eq!(decoded[1], Err(BatchError));
    }

    /// Two visits as a format 6 module wrote them (the encoder before format 7, recorded): a
    /// redirect answered by rule 1's variant 0 with signals `HEAD`, and an orphan visit of a host
    /// of `brand-a` with the module's verdict human (`sig` 256).
    const FORMAT_6_BATCH: &str = include_str!("../../tests/data/format-6-batch.hex");

    fn hex(text: &str) -> Vec<u8> {
        let text = text.trim();
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_recorded_format_6_batch_reads_as_it_was_written() {
        let old = hex(FORMAT_6_BATCH);
        let decoded: Vec<_> = visits(&old).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), 2);
        let text = |visit: &DecodedVisit<'_>| -> Vec<String> {
            visit
                .fields
                .iter()
                .map(|(_, v)| String::from_utf8(v.to_vec()).unwrap())
                .collect()
        };
        assert_eq!(
            text(&decoded[0]),
            [
                "old-six",
                "1764400000123",
                "302",
                "203.0.113.9",
                "Mozilla/5.0 (iPhone)",
                "",
                "s1.example",
                "pt-BR",
                "1.0",
                "",
                "",
                "",
                "1"
            ]
        );
        assert_eq!(
            text(&decoded[1]),
            [
                "/nope",
                "1764400000124",
                "404",
                "198.51.100.7",
                "",
                "",
                "s1.example",
                "",
                "",
                "",
                "regular_404",
                "brand-a",
                "256"
            ]
        );
        // Its numbers are text among the fields, none in binary.
        assert!(decoded
            .iter()
            .all(|v| (v.time_ms, v.status, v.signals) == (None, None, None)));
    }

    #[test]
    fn format_7_writes_the_numbers_in_binary_and_only_the_fields_a_visit_has() {
        use crate::verdict::Signals;
        let sent = visit();
        let bytes = batch_of(&[sent]);
        // The format byte, the head, the six always-written fields' lengths and their values:
        // no `rule`, `id`, `o` or `ws`, no digits.
        let values = [
            sent.code,
            sent.ip,
            sent.ua,
            sent.referer,
            sent.host,
            sent.lang,
        ];
        let len: usize = values.iter().map(|v| 2 + v.len()).sum();
        assert_eq!(bytes.len(), 1 + VISIT_HEAD + len);
        let signals = Signals::from_bits(0x3ff);
        let all = Visit {
            time_ms: u64::MAX,
            status: u16::MAX,
            signals,
            chosen: Some(crate::record::Chosen {
                rule: 3,
                variant: None,
            }),
            click_id: Some(crate::click_id::ClickId::of(9, 9)),
            orphan: Some(crate::event::OrphanKind::Recovered),
            workspace: b"brand-b",
            ..visit()
        };
        let bytes = batch_of(&[all, sent]);
        let decoded: Vec<_> = visits(&bytes).collect::<Result<_, _>>().unwrap();
        let got = decoded[0];
        assert_eq!(
            (got.time_ms, got.status, got.signals),
            (Some(u64::MAX), Some(u16::MAX), Some(signals))
        );
        assert_eq!(value(&got, "rule"), b"3");
        assert_eq!(value(&got, "id"), all.click_id.unwrap().as_bytes());
        assert_eq!(value(&got, "o"), b"recovered");
        assert_eq!(value(&got, "ws"), b"brand-b");
        for name in ["t", "s", "sig"] {
            assert_eq!(value(&got, name), b"", "{name} is in the head");
        }
        // The next visit's fields start where the flagged ones end.
        assert_eq!(value(&decoded[1], "c"), sent.code);
        assert_eq!(value(&decoded[1], "ws"), b"");
    }
}

//! Framing a batch back into visits: the consumer's half of [`super::encode`]. What the fields
//! mean (UTF-8, addresses, times) is the consumer's business; this only cuts the bytes apart.

use super::{
    BATCH_FORMAT, BATCH_FORMAT_1, BATCH_FORMAT_2, BATCH_FORMAT_3, BATCH_FORMAT_4, BATCH_FORMAT_5,
    FORMAT_1_FIELDS, FORMAT_2_FIELDS, FORMAT_3_FIELDS, FORMAT_4_FIELDS, FORMAT_5_FIELDS,
    VISIT_FIELDS,
};

/// One visit's fields as `(name, value)` pairs in [`VISIT_FIELDS`] order; an empty value is an
/// absent field.
pub type VisitFields<'a> = [(&'static [u8], &'a [u8]); VISIT_FIELDS.len()];

/// A batch that cannot be framed (any further): empty, of an unknown format, or cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchError;

/// The visits of a batch, in order. A batch that cannot be framed ends with one `Err` for
/// what is left; the visits before it are whole.
pub fn visits(batch: &[u8]) -> Visits<'_> {
    match batch.split_first() {
        Some((&BATCH_FORMAT, rest)) => Visits {
            rest: Ok(rest),
            fields: VISIT_FIELDS.len(),
        },
        Some((&BATCH_FORMAT_5, rest)) => Visits {
            rest: Ok(rest),
            fields: FORMAT_5_FIELDS,
        },
        Some((&BATCH_FORMAT_4, rest)) => Visits {
            rest: Ok(rest),
            fields: FORMAT_4_FIELDS,
        },
        Some((&BATCH_FORMAT_3, rest)) => Visits {
            rest: Ok(rest),
            fields: FORMAT_3_FIELDS,
        },
        Some((&BATCH_FORMAT_2, rest)) => Visits {
            rest: Ok(rest),
            fields: FORMAT_2_FIELDS,
        },
        Some((&BATCH_FORMAT_1, rest)) => Visits {
            rest: Ok(rest),
            fields: FORMAT_1_FIELDS,
        },
        _ => Visits {
            rest: Err(BatchError),
            fields: 0,
        },
    }
}

/// The iterator of [`visits`].
#[derive(Debug, Clone)]
pub struct Visits<'a> {
    /// What is still to be read; `Err` once an error is due, then the iterator ends.
    rest: Result<&'a [u8], BatchError>,
    /// Fields per visit in this batch's format; the others are absent.
    fields: usize,
}

impl<'a> Iterator for Visits<'a> {
    type Item = Result<VisitFields<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rest = match self.rest {
            Ok([]) => return None,
            Ok(rest) => rest,
            Err(error) => {
                self.rest = Ok(&[]);
                return Some(Err(error));
            }
        };
        // Fields an older format's batch does not have stay named and empty (absent).
        let mut fields: VisitFields<'a> = VISIT_FIELDS.map(|name| (name.as_bytes(), &[][..]));
        for (slot, name) in fields.iter_mut().zip(VISIT_FIELDS).take(self.fields) {
            let Some((value, tail)) = take_field(rest) else {
                self.rest = Ok(&[]);
                return Some(Err(BatchError));
            };
            *slot = (name.as_bytes(), value);
            rest = tail;
        }
        self.rest = Ok(rest);
        Some(Ok(fields))
    }
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

    fn value<'a>(fields: &VisitFields<'a>, name: &str) -> &'a [u8] {
        fields
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
            assert_eq!(value(fields, "t"), sent.time_ms.to_string().as_bytes());
            assert_eq!(value(fields, "s"), sent.status.to_string().as_bytes());
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
            assert_eq!(value(fields, "s"), b"404");
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
        assert_eq!(visits(b"\x07").collect::<Vec<_>>(), [Err(BatchError)]);
        let mut bytes = batch_of(&[visit(), visit()]);
        bytes.pop();
        let decoded: Vec<_> = visits(&bytes).collect();
        assert_eq!(decoded.len(), 2);
        assert!(decoded[0].is_ok());
        assert_eq!(decoded[1], Err(BatchError));
    }
}

//! RESP encoding of visit events: each visit's fields are appended to a [`Batch`] as it is made,
//! and the batch leaves as one `XADD` whose head [`Encoder`] encoded once.

use super::{
    truncate, Visit, MAX_CODE, MAX_HOST, MAX_IP, MAX_LANG, MAX_REFERER, MAX_UA, STREAM_KEY,
};
use crate::redis::resp::push_header;

/// A batch is written out early once it holds this many visits or field bytes, so one entry
/// stays a few dozen KiB however busy the pass.
pub const BATCH_MAX_VISITS: usize = 128;
pub const BATCH_MAX_BYTES: usize = 64 * 1024;

/// Arguments of the constant head `XADD sl:events MAXLEN ~ <cap> *`.
const HEAD_ARGS: usize = 6;

/// The constant head of every event command, encoded once.
#[derive(Debug, Clone)]
pub struct Encoder {
    head: Vec<u8>,
}

impl Encoder {
    pub fn new(max_len: u64) -> Self {
        let cap = max_len.to_string();
        let mut head = Vec::with_capacity(64);
        for arg in [
            b"XADD".as_slice(),
            STREAM_KEY,
            b"MAXLEN",
            b"~",
            cap.as_bytes(),
            b"*",
        ] {
            push_bulk(&mut head, arg);
        }
        Self { head }
    }

    /// Appends the `XADD` carrying every visit in `batch` to `out`.
    pub fn write_command(&self, out: &mut Vec<u8>, batch: &Batch) {
        out.reserve(self.head.len() + batch.fields.len() + 8);
        push_header(out, b'*', HEAD_ARGS + batch.args);
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&batch.fields);
    }
}

/// The visits made since the last write, encoded as the field groups of one stream entry.
#[derive(Debug, Default)]
pub struct Batch {
    fields: Vec<u8>,
    /// Field names plus values encoded so far.
    args: usize,
    visits: usize,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.visits
    }

    pub fn is_empty(&self) -> bool {
        self.visits == 0
    }

    pub fn is_full(&self) -> bool {
        self.visits >= BATCH_MAX_VISITS || self.fields.len() >= BATCH_MAX_BYTES
    }

    /// Appends one visit's field group: `c` first (the consumer splits groups on it), empty
    /// fields left out, every value truncated. No intermediate buffer, no formatting machinery.
    pub fn push(&mut self, v: &Visit<'_>) {
        // Field names with their bulk headers, encoded at compile time.
        const NAMES: [&[u8]; 8] = [
            b"$1\r\nc\r\n",
            b"$1\r\nt\r\n",
            b"$1\r\ns\r\n",
            b"$2\r\nip\r\n",
            b"$2\r\nua\r\n",
            b"$3\r\nref\r\n",
            b"$4\r\nhost\r\n",
            b"$4\r\nlang\r\n",
        ];
        let mut time = Digits::default();
        let mut status = Digits::default();
        let values: [&[u8]; 8] = [
            truncate(v.code, MAX_CODE),
            time.of(v.time_ms),
            status.of(u64::from(v.status)),
            truncate(v.ip, MAX_IP),
            truncate(v.ua, MAX_UA),
            truncate(v.referer, MAX_REFERER),
            truncate(v.host, MAX_HOST),
            truncate(v.lang, MAX_LANG),
        ];
        // name (at most 10 bytes) + `$<len>\r\n` (at most 7) + value + CRLF
        let size: usize = values.iter().map(|value| value.len() + 19).sum();
        self.fields.reserve(size);
        for (name, value) in NAMES.into_iter().zip(values) {
            if !value.is_empty() {
                self.fields.extend_from_slice(name);
                push_bulk(&mut self.fields, value);
                self.args += 2;
            }
        }
        self.visits += 1;
    }

    /// Empties the batch, keeping its buffer unless a burst grew it past the usual size.
    pub fn clear(&mut self) {
        self.fields.clear();
        if self.fields.capacity() > 2 * BATCH_MAX_BYTES {
            self.fields.shrink_to(BATCH_MAX_BYTES);
        }
        self.args = 0;
        self.visits = 0;
    }
}

fn push_bulk(out: &mut Vec<u8>, arg: &[u8]) {
    push_header(out, b'$', arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Decimal digits of a number, on the stack.
#[derive(Default)]
struct Digits([u8; 20]);

impl Digits {
    fn of(&mut self, mut n: u64) -> &[u8] {
        let mut i = self.0.len();
        loop {
            i -= 1;
            self.0[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        &self.0[i..]
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::redis::resp::{parse, Frame};

    pub fn visit() -> Visit<'static> {
        Visit {
            code: b"abc1234",
            time_ms: 1_700_000_000_123,
            status: 302,
            ip: b"203.0.113.9",
            ua: b"Mozilla/5.0",
            referer: b"",
            host: b"s1.example",
            lang: b"",
        }
    }

    /// The command for a batch of `visits`, as Redis would receive it.
    pub fn command(encoder: &Encoder, visits: &[Visit<'_>]) -> Vec<u8> {
        let mut batch = Batch::default();
        for v in visits {
            batch.push(v);
        }
        let mut out = Vec::new();
        encoder.write_command(&mut out, &batch);
        out
    }

    /// Reads an encoded command back as a list of arguments.
    fn args(bytes: &[u8]) -> Vec<Vec<u8>> {
        // A command is an array of bulk strings: the reply parser reads it the same way.
        let (frame, n) = parse(bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len());
        match frame {
            Frame::Array(items) => items
                .into_iter()
                .map(|f| match f {
                    Frame::Bulk(b) => b,
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    fn strings(bytes: &[u8]) -> Vec<String> {
        args(bytes)
            .into_iter()
            .map(|a| String::from_utf8(a).unwrap())
            .collect()
    }

    #[test]
    fn encodes_xadd_with_cap_and_without_empty_fields() {
        let out = command(&Encoder::new(1_000_000), &[visit()]);
        assert_eq!(
            strings(&out),
            [
                "XADD",
                "sl:events",
                "MAXLEN",
                "~",
                "1000000",
                "*",
                "c",
                "abc1234",
                "t",
                "1700000000123",
                "s",
                "302",
                "ip",
                "203.0.113.9",
                "ua",
                "Mozilla/5.0",
                "host",
                "s1.example"
            ]
        );
    }

    #[test]
    fn a_batch_is_one_entry_with_a_group_per_visit_in_order() {
        let second = Visit {
            code: b"zz9",
            status: 410,
            ip: b"",
            ua: b"",
            host: b"",
            ..visit()
        };
        let out = command(&Encoder::new(5), &[visit(), second, visit()]);
        let got = strings(&out);
        assert_eq!(got[4], "5");
        assert_eq!(got[6], "c", "the first group opens the entry");
        let codes: Vec<&str> = got[6..]
            .chunks(2)
            .filter(|pair| pair[0] == "c")
            .map(|pair| pair[1].as_str())
            .collect();
        assert_eq!(codes, ["abc1234", "zz9", "abc1234"], "one group per visit");
        // The second group keeps only what it has: c, t and s.
        let second_at = 6 + 12;
        assert_eq!(
            got[second_at..second_at + 6],
            ["c", "zz9", "t", "1700000000123", "s", "410"]
        );
    }

    #[test]
    fn a_cleared_batch_starts_over() {
        let encoder = Encoder::new(5);
        let mut batch = Batch::default();
        batch.push(&visit());
        batch.push(&visit());
        batch.clear();
        assert!(batch.is_empty());
        batch.push(&visit());
        let mut out = Vec::new();
        encoder.write_command(&mut out, &batch);
        assert_eq!(out, command(&encoder, &[visit()]));
    }

    #[test]
    fn a_batch_is_full_by_visits_or_by_bytes() {
        let mut batch = Batch::default();
        for _ in 0..BATCH_MAX_VISITS - 1 {
            batch.push(&visit());
        }
        assert!(!batch.is_full());
        batch.push(&visit());
        assert!(batch.is_full());

        let ua = vec![b'u'; MAX_UA];
        let referer = vec![b'r'; MAX_REFERER];
        let big = Visit {
            ua: &ua,
            referer: &referer,
            ..visit()
        };
        let mut batch = Batch::default();
        while !batch.is_full() {
            batch.push(&big);
        }
        assert!(batch.len() < BATCH_MAX_VISITS);
    }

    #[test]
    fn values_may_hold_any_bytes() {
        let ua = b"a\r\nb $3\r\n\x00\xff";
        let out = command(&Encoder::new(1), &[Visit { ua, ..visit() }]);
        assert!(args(&out).iter().any(|a| a == ua));
    }

    #[test]
    fn huge_headers_are_truncated() {
        let ua = vec![b'u'; 10_000];
        let referer = vec![b'r'; 10_000];
        let out = command(
            &Encoder::new(1),
            &[Visit {
                ua: &ua,
                referer: &referer,
                ..visit()
            }],
        );
        let a = args(&out);
        let field = |name: &[u8]| a[a.iter().position(|x| x == name).unwrap() + 1].len();
        assert_eq!(field(b"ua"), MAX_UA);
        assert_eq!(field(b"ref"), MAX_REFERER);
        assert!(out.len() < MAX_UA + MAX_REFERER + 300);
    }
}

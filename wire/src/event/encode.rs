//! Encoding of visit events (the module's half). Each visit is appended to a [`Batch`] as it is
//! made; the batch leaves as one `XADD sl:events MAXLEN ~ <cap> * v <batch>`, whose head
//! [`Encoder`] encoded once.
//!
//! The batch is one opaque field value rather than one stream field per visit field: Redis turns
//! every command argument into an object and appends every field to the entry separately, which
//! cost it about 1,600 instructions per visit field (callgrind); one value costs it one copy. Inside
//! the value (docs/ARCHITECTURE.md): a format byte, then per visit a binary head (flags, time,
//! status, signals) and its text fields, each a little-endian `u16` length and the bytes
//! ([`BATCH_FORMAT`]).

use super::{
    chosen_text, truncate, Visit, BATCH_FIELD, BATCH_FORMAT, HAS_ID, HAS_ORPHAN, HAS_RULE,
    HAS_WORKSPACE, MAX_CODE, MAX_HOST, MAX_IP, MAX_LANG, MAX_PATH, MAX_REFERER, MAX_UA,
    MAX_WORKSPACE, VISIT_HEAD,
};
use crate::keys::EVENT_STREAM;
use crate::resp::push_header;
use std::ptr;

/// A batch is written out early once it holds this many visits or bytes, so one entry stays at
/// most 64 KiB however busy the pass. Redis spends about 20,000 instructions on an `XADD` of a
/// few KiB whatever it holds (a new stream node and its radix-tree insert each time, callgrind),
/// so the visit cap is set where the byte cap usually decides: visits without long headers are
/// ~40 bytes, and 128 of them cost Redis ~160 instructions a visit, 512 of them ~40.
pub const BATCH_MAX_VISITS: usize = 512;
pub const BATCH_MAX_BYTES: usize = 64 * 1024;

/// Arguments of a command: the head `XADD sl:events MAXLEN ~ <cap> *` and `v <batch>`.
const COMMAND_ARGS: usize = 8;

/// The constant head of every event command, `v` included, encoded once.
#[derive(Debug, Clone)]
pub struct Encoder {
    head: Vec<u8>,
}

impl Encoder {
    pub fn new(max_len: u64) -> Self {
        Self::for_stream(EVENT_STREAM.as_bytes(), max_len)
    }

    /// The head for the stream `key` (one of a cluster's visit streams).
    pub fn for_stream(key: &[u8], max_len: u64) -> Self {
        let cap = max_len.to_string();
        let mut head = Vec::with_capacity(64);
        push_header(&mut head, b'*', COMMAND_ARGS);
        for arg in [
            b"XADD".as_slice(),
            key,
            b"MAXLEN",
            b"~",
            cap.as_bytes(),
            b"*",
            BATCH_FIELD,
        ] {
            push_bulk(&mut head, arg);
        }
        Self { head }
    }

    /// Appends the `XADD` carrying every visit in `batch` to `out`.
    pub fn write_command(&self, out: &mut Vec<u8>, batch: &Batch) {
        let bytes = batch.bytes();
        out.reserve(self.head.len() + bytes.len() + 16);
        out.extend_from_slice(&self.head);
        push_bulk(out, bytes);
    }

    /// The `XADD` carrying every visit in `batch` written around the visits where they lie (the
    /// head and the value's length into the room the batch keeps ahead of them), and the batch's
    /// buffer swapped with `output`, an empty one the batch goes on in: the command is then
    /// `output[start..]`, `start` returned. For a connection with nothing else to write, this
    /// spares copying the batch, which callgrind counts at about an instruction a byte (~63 a
    /// visit, bench/results/redirect-instructions-cuts-2026-11-29-2.md). `None`, nothing
    /// changed: `output` is not empty, the batch is, or the head does not fit the room (a stream
    /// key longer than any this project names); [`Encoder::write_command`] it is.
    pub fn command_in_place(&self, batch: &mut Batch, output: &mut Vec<u8>) -> Option<usize> {
        let len = batch.bytes().len();
        let digits = Digits::of(len as u64);
        let digits = digits.as_bytes();
        let size = self.head.len() + 1 + digits.len() + 2;
        if !output.is_empty() || len == 0 || size > HEAD_ROOM {
            return None;
        }
        let start = HEAD_ROOM - size;
        let room = &mut batch.bytes[start..HEAD_ROOM];
        let (head, bulk) = room.split_at_mut(self.head.len());
        head.copy_from_slice(&self.head);
        let (dollar, rest) = bulk.split_at_mut(1);
        let (value_len, crlf) = rest.split_at_mut(digits.len());
        dollar[0] = b'$';
        value_len.copy_from_slice(digits);
        crlf.copy_from_slice(b"\r\n");
        batch.bytes.extend_from_slice(b"\r\n");
        std::mem::swap(&mut batch.bytes, output);
        batch.visits = 0;
        Some(start)
    }
}

/// Bytes kept ahead of a batch's visits for its command's head and the value's length, so that
/// the command can be written around the visits where they lie ([`Encoder::command_in_place`]):
/// `*8`, `XADD`, a stream key, `MAXLEN ~ <cap> *`, `v` and `$<length>` take about 80 bytes.
const HEAD_ROOM: usize = 128;

/// The visits made since the last write, encoded.
#[derive(Debug, Default)]
pub struct Batch {
    /// Empty, or [`HEAD_ROOM`] bytes of no meaning followed by the encoded batch.
    bytes: Vec<u8>,
    visits: usize,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.visits
    }

    pub fn is_empty(&self) -> bool {
        self.visits == 0
    }

    /// The encoded batch: the value of the entry's [`BATCH_FIELD`].
    pub fn bytes(&self) -> &[u8] {
        self.bytes.get(HEAD_ROOM..).unwrap_or_default()
    }

    pub fn is_full(&self) -> bool {
        self.visits >= BATCH_MAX_VISITS || self.bytes.len() >= HEAD_ROOM + BATCH_MAX_BYTES
    }

    /// Appends one visit, every value truncated (so each fits its `u16` length). This runs once
    /// per tracked redirect (and per orphan visit), so it writes straight into the buffer's spare
    /// room: one capacity check for the most a visit can take, the numbers as they are (the
    /// format's binary head), the fields a redirect seldom has only when it has them, and the
    /// short values (most of a visit's: a code, an address, a host) copied in a few word moves
    /// instead of a call to `memcpy` each (callgrind,
    /// bench/results/redirect-instructions-cuts-2026-11-29.md and
    /// bench/results/redirect-tracking-2026-11-29.md).
    // Inlined where the module makes a visit: it runs once per tracked redirect, and a plain
    // redirect's visit (no rule, click id, orphan kind or workspace, known where it is made)
    // then tests none of them.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn push(&mut self, v: &Visit<'_>) {
        let flags = if v.chosen.is_some() { HAS_RULE } else { 0 }
            | if v.click_id.is_some() { HAS_ID } else { 0 }
            | if v.orphan.is_some() { HAS_ORPHAN } else { 0 }
            | if v.workspace.is_empty() {
                0
            } else {
                HAS_WORKSPACE
            };
        let code_max = if v.orphan.is_some() {
            MAX_PATH
        } else {
            MAX_CODE
        };
        if self.bytes.is_empty() {
            // Once a buffer: a cleared batch keeps its room.
            self.bytes.resize(HEAD_ROOM, 0);
        }
        self.bytes.reserve(VISIT_MAX_BYTES);
        let start = self.bytes.len();
        // SAFETY: `reserve` left room for `VISIT_MAX_BYTES` past `start`, the most one visit can
        // write: its head, every value cut to the limit that bound sums (`truncate`, or of a
        // fixed size) plus its 2-byte length, and a fresh batch's format byte. The writes fill
        // those bytes in order from `start`, and `set_len` takes exactly the ones written. The
        // values are borrowed from elsewhere, so they cannot overlap the spare room.
        unsafe {
            let base = self.bytes.as_mut_ptr();
            let mut out = Out(base.add(start));
            if start == HEAD_ROOM {
                out.byte(BATCH_FORMAT);
            }
            out.byte(flags);
            out.bytes(v.time_ms.to_le_bytes());
            out.bytes(v.status.to_le_bytes());
            out.bytes(v.signals.bits().to_le_bytes());
            out.field(truncate(v.code, code_max));
            out.field(truncate(v.ip, MAX_IP));
            out.field(truncate(v.ua, MAX_UA));
            out.field(truncate(v.referer, MAX_REFERER));
            out.field(truncate(v.host, MAX_HOST));
            out.field(truncate(v.lang, MAX_LANG));
            if let Some(chosen) = v.chosen {
                let (text, len) = chosen_text(chosen);
                out.field(&text[..len]);
            }
            if let Some(id) = &v.click_id {
                out.field(id.as_bytes());
            }
            if let Some(kind) = v.orphan {
                out.field(kind.as_str().as_bytes());
            }
            if flags & HAS_WORKSPACE != 0 {
                out.field(truncate(v.workspace, MAX_WORKSPACE));
            }
            self.bytes.set_len(out.0.offset_from(base) as usize);
        }
        self.visits += 1;
    }

    /// Empties the batch, keeping its buffer unless a burst grew it past the usual size.
    pub fn clear(&mut self) {
        self.bytes.truncate(HEAD_ROOM);
        if self.bytes.capacity() > 2 * BATCH_MAX_BYTES {
            self.bytes.shrink_to(HEAD_ROOM + BATCH_MAX_BYTES);
        }
        self.visits = 0;
    }
}

fn push_bulk(out: &mut Vec<u8>, arg: &[u8]) {
    push_header(out, b'$', arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Decimal digits of a number, on the stack.
#[derive(Debug, Clone, Copy)]
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn of(mut n: u64) -> Self {
        let mut digits = Digits {
            buf: [0; 20],
            start: 20,
        };
        loop {
            digits.start -= 1;
            digits.buf[digits.start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                return digits;
            }
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// The most bytes one visit takes ([`Batch::push`] reserves it once): its head, each field at its
/// limit with its 2-byte length, and a fresh batch's format byte.
const VISIT_MAX_BYTES: usize = 1
    + VISIT_HEAD
    + 2 * 10 // the lengths of the ten text fields
    + max(MAX_CODE, MAX_PATH)
    + MAX_IP
    + MAX_UA
    + MAX_REFERER
    + MAX_HOST
    + MAX_LANG
    + 7 // `rule`: chosen_text
    + crate::click_id::LEN
    + 17 // `o`: the longest OrphanKind
    + MAX_WORKSPACE;

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// The write position in a batch's spare room (see the SAFETY note of [`Batch::push`]).
struct Out(*mut u8);

#[allow(unsafe_code)]
impl Out {
    /// # Safety
    /// One byte of room at the position.
    #[inline(always)]
    unsafe fn byte(&mut self, b: u8) {
        self.0.write(b);
        self.0 = self.0.add(1);
    }

    /// A number's little-endian bytes, one store.
    ///
    /// # Safety
    /// `N` bytes of room at the position.
    #[inline(always)]
    unsafe fn bytes<const N: usize>(&mut self, bytes: [u8; N]) {
        self.0.cast::<[u8; N]>().write_unaligned(bytes);
        self.0 = self.0.add(N);
    }

    /// `value`'s little-endian `u16` length, then its bytes. A value of at most 16 bytes is
    /// copied with two (overlapping) loads and stores of a word, a half or a byte.
    ///
    /// # Safety
    /// `2 + value.len()` bytes of room at the position, not overlapping `value`, whose length
    /// fits a `u16`.
    #[inline(always)]
    unsafe fn field(&mut self, value: &[u8]) {
        let len = value.len();
        self.0
            .cast::<[u8; 2]>()
            .write_unaligned((len as u16).to_le_bytes());
        let (src, dst) = (value.as_ptr(), self.0.add(2));
        if len > 16 {
            ptr::copy_nonoverlapping(src, dst, len);
        } else if len >= 8 {
            let head = src.cast::<u64>().read_unaligned();
            let tail = src.add(len - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(head);
            dst.add(len - 8).cast::<u64>().write_unaligned(tail);
        } else if len >= 4 {
            let head = src.cast::<u32>().read_unaligned();
            let tail = src.add(len - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(head);
            dst.add(len - 4).cast::<u32>().write_unaligned(tail);
        } else if len > 0 {
            // 1 to 3 bytes: the first, the middle and the last cover them.
            dst.write(*src);
            dst.add(len / 2).write(*src.add(len / 2));
            dst.add(len - 1).write(*src.add(len - 1));
        }
        self.0 = dst.add(len);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::event::VISIT_FIELDS;
    use crate::resp::{parse, Frame};

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
            chosen: None,
            click_id: None,
            orphan: None,
            workspace: b"",
            signals: crate::verdict::Signals::new(crate::verdict::Signals::HEAD),
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

    /// A decoded visit: `(field, value)` pairs, absent fields left out.
    type Fields = Vec<(&'static str, Vec<u8>)>;

    /// Reads an encoded command back: its arguments, and the visits in the batch (what the
    /// consumer does).
    fn decode(bytes: &[u8]) -> (Vec<String>, Vec<Fields>) {
        // A command is an array of bulk strings: the reply parser reads it the same way.
        let (frame, n) = parse(bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len());
        let Frame::Array(items) = frame else {
            panic!("{frame:?}")
        };
        let mut args: Vec<Vec<u8>> = items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => b,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(args.len(), COMMAND_ARGS);
        let batch = args.pop().unwrap();
        let head = args
            .into_iter()
            .map(|a| String::from_utf8(a).unwrap())
            .collect();
        assert_eq!(batch[0], BATCH_FORMAT);
        let visits = crate::event::visits(&batch)
            .map(|visit| {
                let visit = visit.unwrap();
                // The head's numbers among the fields, as their decimal text, in
                // `VISIT_FIELDS`'s order.
                let number = |name: &str| match name {
                    "t" => visit.time_ms.map(|t| t.to_string()),
                    "s" => visit.status.map(|s| s.to_string()),
                    "sig" => visit.signals.map(|s| s.bits().to_string()),
                    _ => None,
                };
                visit
                    .fields
                    .iter()
                    .zip(VISIT_FIELDS)
                    .filter_map(|((_, value), name)| match number(name) {
                        Some(text) => Some((name, text.into_bytes())),
                        None => (!value.is_empty()).then(|| (name, value.to_vec())),
                    })
                    .collect()
            })
            .collect();
        (head, visits)
    }

    fn field<'a>(visit: &'a [(&str, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
        visit.iter().find(|(n, _)| *n == name).map(|(_, v)| &v[..])
    }

    #[test]
    fn encodes_xadd_with_cap_and_one_batch_value() {
        let (head, visits) = decode(&command(&Encoder::new(1_000_000), &[visit()]));
        assert_eq!(
            head,
            ["XADD", "sl:events", "MAXLEN", "~", "1000000", "*", "v"]
        );
        let text: Vec<(&str, &str)> = visits[0]
            .iter()
            .map(|(n, v)| (*n, std::str::from_utf8(v).unwrap()))
            .collect();
        assert_eq!(
            text,
            [
                ("c", "abc1234"),
                ("t", "1700000000123"),
                ("s", "302"),
                ("ip", "203.0.113.9"),
                ("ua", "Mozilla/5.0"),
                ("host", "s1.example"),
                ("sig", "1"),
            ]
        );
    }

    #[test]
    fn a_batch_holds_every_visit_in_order() {
        let second = Visit {
            code: b"zz9",
            time_ms: 1_700_000_000_124,
            status: 410,
            ip: b"",
            ua: b"",
            host: b"",
            ..visit()
        };
        let (_, visits) = decode(&command(&Encoder::new(5), &[visit(), second, visit()]));
        let codes: Vec<&[u8]> = visits.iter().map(|v| field(v, "c").unwrap()).collect();
        assert_eq!(codes, [&b"abc1234"[..], b"zz9", b"abc1234"]);
        assert_eq!(
            visits[1],
            [
                ("c", b"zz9".to_vec()),
                ("t", b"1700000000124".to_vec()),
                ("s", b"410".to_vec()),
                ("sig", b"1".to_vec())
            ],
            "the second visit keeps only what it has, with its own time"
        );
        assert_eq!(field(&visits[2], "t"), Some(&b"1700000000123"[..]));
    }

    #[test]
    fn every_status_is_written_as_its_digits() {
        let statuses = [301, 302, 307, 308, 410, 303, 9];
        let visits: Vec<Visit<'_>> = statuses
            .iter()
            .map(|&status| Visit { status, ..visit() })
            .collect();
        let (_, decoded) = decode(&command(&Encoder::new(5), &visits));
        for (status, visit) in statuses.iter().zip(&decoded) {
            assert_eq!(field(visit, "s"), Some(status.to_string().as_bytes()));
        }
    }

    #[test]
    fn a_command_written_in_place_is_the_copied_command() {
        // Values whose length takes 2 to 5 digits (the head's place moves with them), each
        // batch going on in the empty buffer the last one was swapped for.
        let encoder = Encoder::new(1_000_000);
        let mut batch = Batch::default();
        for visits in [1, 3, 40, 300] {
            let sent: Vec<_> = (0..visits).map(|_| visit()).collect();
            for v in &sent {
                batch.push(v);
            }
            let mut output = Vec::new();
            let start = encoder.command_in_place(&mut batch, &mut output).unwrap();
            assert_eq!(output[start..], command(&encoder, &sent), "{visits} visits");
            assert!(batch.is_empty() && batch.bytes().is_empty());
        }
    }

    #[test]
    fn a_command_is_written_in_place_only_onto_an_empty_output() {
        let encoder = Encoder::new(5);
        let mut batch = Batch::default();
        let mut output = Vec::new();
        assert_eq!(encoder.command_in_place(&mut batch, &mut output), None);
        batch.push(&visit());
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let mut busy = ping.to_vec();
        assert_eq!(encoder.command_in_place(&mut batch, &mut busy), None);
        assert_eq!(busy, ping, "a connection's unsent output stays as it was");
        let long_key = Encoder::for_stream(&[b'k'; HEAD_ROOM], 5);
        assert_eq!(long_key.command_in_place(&mut batch, &mut output), None);
        assert_eq!(batch.len(), 1, "refused, the batch keeps its visits");
        encoder.write_command(&mut output, &batch);
        assert_eq!(output, command(&encoder, &[visit()]));
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
    fn values_of_every_short_length_are_copied_whole() {
        // The copy takes a different path below 4, 8 and 16 bytes and above: each length once,
        // in every field, the bytes distinct so a misplaced one shows.
        let text: Vec<u8> = (0..MAX_WORKSPACE as u8).map(|i| b'A' + i).collect();
        // Up to the workspace's limit, 32, the smallest of these fields'.
        for len in 0..=MAX_WORKSPACE {
            let value = &text[..len];
            let (_, visits) = decode(&command(
                &Encoder::new(1),
                &[Visit {
                    code: value,
                    ip: value,
                    ua: value,
                    referer: value,
                    host: value,
                    lang: value,
                    workspace: value,
                    ..visit()
                }],
            ));
            for name in ["c", "ip", "ua", "ref", "host", "lang", "ws"] {
                let got = field(&visits[0], name).unwrap_or_default();
                assert_eq!(got, value, "{name} of {len} bytes");
            }
        }
    }

    #[test]
    fn signals_and_statuses_keep_every_digit() {
        use crate::agent::Audience;
        use crate::verdict::Signals;
        let mut signals: Vec<Signals> = (0..=255).map(Signals::new).collect();
        signals.push(
            Signals::new(0xff)
                .with_verdict(Audience::Bot)
                .with_network(true),
        );
        for (signals, status) in signals
            .into_iter()
            .zip([0, 9, 10, 99, 100, 999, 1000, u16::MAX].into_iter().cycle())
        {
            let (_, visits) = decode(&command(
                &Encoder::new(1),
                &[Visit {
                    signals,
                    status,
                    ..visit()
                }],
            ));
            let sig = signals.bits().to_string();
            assert_eq!(field(&visits[0], "sig"), Some(sig.as_bytes()));
            assert_eq!(field(&visits[0], "s"), Some(status.to_string().as_bytes()));
        }
    }

    #[test]
    fn values_may_hold_any_bytes() {
        let ua = b"a\r\nb $3\r\n\x00\xff";
        let (_, visits) = decode(&command(&Encoder::new(1), &[Visit { ua, ..visit() }]));
        assert_eq!(field(&visits[0], "ua"), Some(&ua[..]));
    }

    #[test]
    fn huge_headers_are_truncated() {
        let ua = vec![b'u'; 100_000];
        let referer = vec![b'r'; 10_000];
        let out = command(
            &Encoder::new(1),
            &[Visit {
                ua: &ua,
                referer: &referer,
                ..visit()
            }],
        );
        let (_, visits) = decode(&out);
        assert_eq!(field(&visits[0], "ua").unwrap().len(), MAX_UA);
        assert_eq!(field(&visits[0], "ref").unwrap().len(), MAX_REFERER);
        assert!(out.len() < MAX_UA + MAX_REFERER + 300);
    }
}

//! Visit events (analytics): one `XADD sl:events MAXLEN ~ <cap> * c <code> t <ms> s <status>
//! ip <ip> ua <ua> ref <referer> host <host> lang <accept-language>` per answered redirect or 410,
//! queued on the lookup connections without waiting for the reply (docs/ARCHITECTURE.md).
//!
//! Pure parts here: truncation, RESP encoding straight into a reusable buffer, and the bounded
//! per-worker [`Spool`] that holds encoded events while Redis is unreachable.

use std::cell::RefCell;

use crate::redis::resp::push_header;
use crate::status::{Counter, Counters};

/// The stream the sidecar's consumer group reads.
pub const STREAM_KEY: &[u8] = b"sl:events";

/// Header values are cut to these many bytes before queueing (at a UTF-8 boundary), so one
/// request cannot make an event, the spool or the stream entry large.
pub const MAX_UA: usize = 1024;
pub const MAX_REFERER: usize = 2048;
pub const MAX_HOST: usize = 255;
pub const MAX_LANG: usize = 256;
pub const MAX_CODE: usize = 64;
pub const MAX_IP: usize = 64;

/// One visit, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub struct Visit<'a> {
    pub code: &'a [u8],
    pub time_ms: u64,
    pub status: u16,
    pub ip: &'a [u8],
    pub ua: &'a [u8],
    pub referer: &'a [u8],
    pub host: &'a [u8],
    pub lang: &'a [u8],
}

/// `value` cut to at most `max` bytes, backing off to a UTF-8 character boundary so that a
/// consumer decoding the field as UTF-8 never sees a split character.
pub fn truncate(value: &[u8], max: usize) -> &[u8] {
    if value.len() <= max {
        return value;
    }
    let mut end = max;
    // At most 3 continuation bytes precede a character start.
    while end > 0 && max - end < 3 && value[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    if value[end] & 0xC0 == 0x80 {
        // Not UTF-8 anyway: a plain byte cut.
        end = max;
    }
    &value[..end]
}

/// The constant head of every event command: `XADD sl:events MAXLEN ~ <cap> *`, encoded once.
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

    /// Appends the event's command to `out`: no intermediate buffer, no formatting machinery.
    pub fn encode(&self, out: &mut Vec<u8>, v: &Visit<'_>) {
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
        let mut present = 0;
        let mut size = self.head.len() + 8;
        for value in values {
            if !value.is_empty() {
                present += 1;
                // name (at most 10 bytes) + `$<len>\r\n` (at most 7) + value + CRLF
                size += value.len() + 19;
            }
        }
        out.reserve(size);
        // The head holds 6 arguments; each present field adds a name and a value.
        push_header(out, b'*', 6 + 2 * present);
        out.extend_from_slice(&self.head);
        for (name, value) in NAMES.into_iter().zip(values) {
            if !value.is_empty() {
                out.extend_from_slice(name);
                push_bulk(out, value);
            }
        }
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

/// Limits of the per-worker spool (`shortlink_events_buffer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpoolLimits {
    pub events: usize,
    pub bytes: usize,
}

pub const DEFAULT_SPOOL: SpoolLimits = SpoolLimits {
    events: 10_000,
    bytes: 8 << 20,
};

/// Encoded events waiting for a connection, bounded by count and by bytes. One contiguous
/// buffer: flushing it is a single copy onto the connection's output.
#[derive(Debug)]
pub struct Spool {
    buf: Vec<u8>,
    events: usize,
    limits: SpoolLimits,
}

impl Spool {
    pub fn new(limits: SpoolLimits) -> Self {
        Self {
            buf: Vec::new(),
            events: 0,
            limits,
        }
    }

    pub fn len(&self) -> usize {
        self.events
    }

    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Encodes one event into the spool; `false` (and nothing kept) when it does not fit.
    pub fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.events >= self.limits.events {
            return false;
        }
        let before = self.buf.len();
        write(&mut self.buf);
        if self.buf.len() > self.limits.bytes {
            self.buf.truncate(before);
            return false;
        }
        self.events += 1;
        true
    }

    /// Moves every spooled command to the end of `out`; returns how many there were.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) -> usize {
        out.extend_from_slice(&self.buf);
        self.buf.clear();
        if self.buf.capacity() > 64 * 1024 {
            // A spool that grew during an outage gives its memory back once flushed.
            self.buf.shrink_to(16 * 1024);
        }
        std::mem::take(&mut self.events)
    }
}

/// A worker's spool and counters, shared by its Redis pool and connections (a connection that
/// comes up flushes the spool itself).
pub struct EventShared {
    pub spool: RefCell<Spool>,
    stats: Option<&'static Counters>,
}

impl EventShared {
    pub fn new(limits: SpoolLimits, stats: Option<&'static Counters>) -> Self {
        Self {
            spool: RefCell::new(Spool::new(limits)),
            stats,
        }
    }

    pub fn add(&self, counter: Counter, n: usize) {
        if let Some(stats) = self.stats {
            stats.add(counter, n as u64);
        }
    }

    pub fn sub(&self, counter: Counter, n: usize) {
        if let Some(stats) = self.stats {
            stats.sub(counter, n as u64);
        }
    }

    /// Moves the spool onto a connection's output; returns how many events it held.
    pub fn flush_into(&self, out: &mut Vec<u8>) -> usize {
        let Ok(mut spool) = self.spool.try_borrow_mut() else {
            return 0;
        };
        if spool.is_empty() {
            return 0;
        }
        let n = spool.drain_into(out);
        self.sub(Counter::EventsBuffered, n);
        self.add(Counter::EventsSent, n);
        n
    }

    /// Spools one event, or counts it dropped when the spool is full.
    pub fn spool(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let kept = self
            .spool
            .try_borrow_mut()
            .is_ok_and(|mut spool| spool.push(write));
        self.add(
            if kept {
                Counter::EventsBuffered
            } else {
                Counter::EventsDropped
            },
            1,
        );
    }
}

impl Drop for EventShared {
    /// The worker is exiting (or its configuration was replaced): spooled events are lost.
    fn drop(&mut self) {
        let n = self.spool.get_mut().len();
        if n > 0 {
            self.sub(Counter::EventsBuffered, n);
            self.add(Counter::EventsDropped, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::resp::{parse, Frame};

    fn visit() -> Visit<'static> {
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

    #[test]
    fn encodes_xadd_with_cap_and_without_empty_fields() {
        let mut out = Vec::new();
        Encoder::new(1_000_000).encode(&mut out, &visit());
        let got: Vec<String> = args(&out)
            .into_iter()
            .map(|a| String::from_utf8(a).unwrap())
            .collect();
        assert_eq!(
            got,
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
    fn appends_to_what_is_already_there() {
        let enc = Encoder::new(5);
        let mut out = b"*1\r\n$4\r\nPING\r\n".to_vec();
        enc.encode(&mut out, &visit());
        enc.encode(
            &mut out,
            &Visit {
                status: 410,
                ..visit()
            },
        );
        let (_, n1) = parse(&out).unwrap().unwrap();
        let (_, n2) = parse(&out[n1..]).unwrap().unwrap();
        let third = args(&out[n1 + n2..]);
        assert_eq!(third[11], b"410");
        assert_eq!(third[4], b"5");
    }

    #[test]
    fn values_may_hold_any_bytes() {
        let mut out = Vec::new();
        let ua = b"a\r\nb $3\r\n\x00\xff";
        Encoder::new(1).encode(&mut out, &Visit { ua, ..visit() });
        assert!(args(&out).iter().any(|a| a == ua));
    }

    #[test]
    fn huge_headers_are_truncated() {
        let ua = vec![b'u'; 10_000];
        let referer = vec![b'r'; 10_000];
        let mut out = Vec::new();
        Encoder::new(1).encode(
            &mut out,
            &Visit {
                ua: &ua,
                referer: &referer,
                ..visit()
            },
        );
        let a = args(&out);
        let field = |name: &[u8]| a[a.iter().position(|x| x == name).unwrap() + 1].len();
        assert_eq!(field(b"ua"), MAX_UA);
        assert_eq!(field(b"ref"), MAX_REFERER);
        assert!(out.len() < MAX_UA + MAX_REFERER + 300);
    }

    #[test]
    fn truncation_keeps_utf8_characters_whole() {
        assert_eq!(truncate(b"abc", 5), b"abc");
        assert_eq!(truncate(b"abcdef", 3), b"abc");
        let s = "aé€".as_bytes(); // 1 + 2 + 3 bytes
        assert_eq!(truncate(s, 2), b"a");
        assert_eq!(truncate(s, 3), "aé".as_bytes());
        assert_eq!(truncate(s, 4), "aé".as_bytes());
        assert_eq!(truncate(s, 5), "aé".as_bytes());
        assert_eq!(truncate(s, 6), s);
        // Invalid UTF-8 (a run of continuation bytes) gets a plain cut.
        assert_eq!(truncate(&[0x80; 10], 4).len(), 4);
    }

    #[test]
    fn spool_is_bounded_by_events_and_bytes() {
        let enc = Encoder::new(1000);
        let mut one = Vec::new();
        enc.encode(&mut one, &visit());

        let mut spool = Spool::new(SpoolLimits {
            events: 3,
            bytes: 1 << 20,
        });
        for _ in 0..3 {
            assert!(spool.push(|out| enc.encode(out, &visit())));
        }
        assert!(!spool.push(|out| enc.encode(out, &visit())));
        assert_eq!(spool.len(), 3);
        assert_eq!(spool.bytes(), 3 * one.len());

        let mut spool = Spool::new(SpoolLimits {
            events: 100,
            bytes: 2 * one.len() + 1,
        });
        assert!(spool.push(|out| enc.encode(out, &visit())));
        assert!(spool.push(|out| enc.encode(out, &visit())));
        assert!(!spool.push(|out| enc.encode(out, &visit())));
        assert_eq!(
            spool.bytes(),
            2 * one.len(),
            "a refused event leaves nothing"
        );

        let mut out = Vec::new();
        assert_eq!(spool.drain_into(&mut out), 2);
        assert_eq!(out, [one.clone(), one].concat());
        assert!(spool.is_empty() && spool.bytes() == 0);

        let mut none = Spool::new(SpoolLimits {
            events: 0,
            bytes: 1 << 20,
        });
        assert!(!none.push(|out| enc.encode(out, &visit())));
    }
}

//! Visit events (analytics). Every answered redirect or 410 is one visit; the visits made in
//! one pass of nginx's event loop leave together as **one** stream entry,
//! `XADD sl:events MAXLEN ~ <cap> * c <code> t <ms> s <status> ip … ua … ref … host … lang …
//! c <code> t <ms> …`, one field group per visit, each starting with `c` (docs/ARCHITECTURE.md).
//! Redis spends most of an XADD on the command and the entry, not on its fields: one entry per
//! pass instead of one per visit is what keeps tracking nearly free under load.
//!
//! Pure parts here: truncation, RESP encoding straight into reusable buffers ([`encode`]), and
//! the bounded per-worker spool that holds encoded entries while Redis is unreachable
//! ([`spool`]).

mod encode;
mod spool;

pub use encode::{Batch, Encoder, BATCH_MAX_BYTES, BATCH_MAX_VISITS};
pub use spool::{EventShared, Spool, SpoolLimits, DEFAULT_SPOOL};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

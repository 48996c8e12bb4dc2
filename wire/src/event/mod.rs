//! Visit events: what the module appends to the visit stream ([`crate::keys::EVENT_STREAM`]) and
//! the sidecar's consumer reads back. Every answered redirect or 410 is one visit; the visits
//! made in one pass of nginx's event loop leave together as **one** stream entry,
//! `XADD sl:events MAXLEN ~ <cap> * v <batch>`.
//!
//! A batch is a format byte ([`BATCH_FORMAT`]), then per visit the eight fields of
//! [`VISIT_FIELDS`] in that order, each a little-endian `u16` length and the bytes (length 0 =
//! absent). [`encode`] writes it (the module), [`decode`] frames it back (the consumer); the
//! limits below are what the writer cuts to and the reader keeps.

pub mod decode;
pub mod encode;

pub use decode::{visits, BatchError, VisitFields};
pub use encode::{Batch, Encoder, BATCH_MAX_BYTES, BATCH_MAX_VISITS};

/// The stream field holding a batch.
pub const BATCH_FIELD: &[u8] = b"v";
/// First byte of a batch: the layout of what follows.
pub const BATCH_FORMAT: u8 = 1;
/// Fields of a visit, in the order they are written.
pub const VISIT_FIELDS: [&str; 8] = ["c", "t", "s", "ip", "ua", "ref", "host", "lang"];

/// Header values are cut to these many bytes before queueing (at a UTF-8 boundary), so one
/// request cannot make an event, the spool or the stream entry large; the consumer keeps no more
/// of any entry, whoever wrote it.
///
/// User agents: real ones are a few hundred bytes; the first KiB is all a classifier needs.
pub const MAX_UA: usize = 1024;
/// Referrers (only their host is used downstream).
pub const MAX_REFERER: usize = 2048;
/// `Host` values: a DNS name is at most 253 bytes.
pub const MAX_HOST: usize = 255;
/// `Accept-Language` values (only the first tag is used).
pub const MAX_LANG: usize = 256;
/// Codes: a code longer than any alias can only be a corrupt entry.
pub const MAX_CODE: usize = shortcode::ALIAS_MAX_LEN;
/// Client addresses, as text.
pub const MAX_IP: usize = 64;

/// One visit, borrowed from the request.
#[derive(Debug, Default, Clone, Copy)]
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

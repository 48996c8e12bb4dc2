//! One visit as the module encodes it and the consumer decodes it: its fields, the limits both
//! keep, and the batch's format bytes.

use crate::click_id::ClickId;
use crate::record::Chosen;
use crate::verdict::Signals;

/// The stream field holding a batch.
pub const BATCH_FIELD: &[u8] = b"v";
/// First byte of a batch: the layout of what follows. Format 7 writes a visit as a fixed head
/// ([`VISIT_HEAD`]: which of the seldom fields follow, then the time, the status and the signals
/// as little-endian binary) and the fields that hold text, each a little-endian `u16` length and
/// the bytes: `c`, `ip`, `ua`, `ref`, `host`, `lang` always (length 0 = absent), then `rule`,
/// `id`, `o` and `ws` only when the head's flags say so. The module writes a visit in about 110
/// instructions fewer than format 6's thirteen length-prefixed texts (no decimal digits, no zero
/// lengths for what a redirect does not have; bench/results/redirect-tracking-2026-11-29.md).
pub const BATCH_FORMAT: u8 = 7;
/// Format 7's head of a visit: the flags byte ([`HAS_RULE`], [`HAS_ID`], [`HAS_ORPHAN`],
/// [`HAS_WORKSPACE`]), the time in unix milliseconds (`u64`), the status (`u16`) and the
/// signals' bits (`u16`, [`Signals::bits`]).
pub const VISIT_HEAD: usize = 1 + 8 + 2 + 2;
/// Format 7's flags: the `rule`, `id`, `o` and `ws` fields follow, in that order, when set. A
/// flag outside these makes the batch unreadable (a later format gets its own format byte).
pub const HAS_RULE: u8 = 1;
pub const HAS_ID: u8 = 1 << 1;
pub const HAS_ORPHAN: u8 = 1 << 2;
pub const HAS_WORKSPACE: u8 = 1 << 3;
pub const KNOWN_FLAGS: u8 = HAS_RULE | HAS_ID | HAS_ORPHAN | HAS_WORKSPACE;
/// The format before binary numbers: each of a visit's thirteen [`VISIT_FIELDS`] a
/// length-prefixed text (the time, status and signals in decimal), absent ones of length 0.
pub const BATCH_FORMAT_6: u8 = 6;
pub const FORMAT_6_FIELDS: usize = 13;
/// The format before `sig` (the request's signals): its visits have the first
/// [`FORMAT_5_FIELDS`] fields.
pub const BATCH_FORMAT_5: u8 = 5;
pub const FORMAT_5_FIELDS: usize = 12;
/// The format before `ws` (the host's workspace): its visits have the first [`FORMAT_4_FIELDS`]
/// fields.
pub const BATCH_FORMAT_4: u8 = 4;
pub const FORMAT_4_FIELDS: usize = 11;
/// The format before `o` (orphan visits): its visits have the first [`FORMAT_3_FIELDS`] fields.
pub const BATCH_FORMAT_3: u8 = 3;
pub const FORMAT_3_FIELDS: usize = 10;
/// The format before `id`: its visits have the first [`FORMAT_2_FIELDS`] fields.
pub const BATCH_FORMAT_2: u8 = 2;
pub const FORMAT_2_FIELDS: usize = 9;
/// The format before `rule`: its visits have the first [`FORMAT_1_FIELDS`] fields.
pub const BATCH_FORMAT_1: u8 = 1;
pub const FORMAT_1_FIELDS: usize = 8;
/// Fields of a visit, in format 6's order (format 7 writes `t`, `s` and `sig` in its head). `rule` names the click-time rule that
/// answered, `<rule>` or `<rule>.<variant>` (indexes from 0, [`chosen_text`]); empty when the
/// link's own target did. `id` is the click's id ([`crate::click_id`]), made for a link with a
/// click id parameter (and sent to its landing page); empty otherwise. The consumer makes it the
/// visit's id. `o` is empty for a visit of a link; for an orphan visit (a request on a pool host
/// that no link answered: [`OrphanKind`]) it names the kind, and `c` then holds the path asked
/// for (cut to [`MAX_PATH`]) instead of a code. `ws` is the workspace nginx maps the host to
/// (`shortlink_workspace`), written for orphan visits and 410s: the edge's word on whose request
/// it was, so no reader depends on what a sidecar has learned of the hosts since it started.
/// Empty on a link's visit (its link names its workspace) and on a host mapped to no workspace.
/// `sig` is the request's signals beyond its headers' values ([`crate::verdict::Signals`]:
/// method, header presence, and the module's verdict when it computed one; decimal in format 6);
/// absent from modules before it.
pub const VISIT_FIELDS: [&str; 13] = [
    "c", "t", "s", "ip", "ua", "ref", "host", "lang", "rule", "id", "o", "ws", "sig",
];

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
/// Workspace names (`crate::record::WorkspaceName::MAX_LEN`).
pub const MAX_WORKSPACE: usize = crate::record::WorkspaceName::MAX_LEN;
/// The path an orphan visit asked for (its `c`): enough to tell a mistyped code or a scanner's
/// probe apart, not a place to store a whole crafted URL.
pub const MAX_PATH: usize = 512;

/// Why a request on a pool host is an orphan visit: Shlink's three kinds, and `recovered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrphanKind {
    /// The bare root `/`.
    BaseUrl,
    /// A path of a code's shape that no link of the host's workspace holds (unknown, of another
    /// workspace, or a wrong check character).
    InvalidShortUrl,
    /// Any other path (no code can have its shape).
    Regular404,
    /// A path that held a code only once the punctuation a text glued to it was stripped: answered
    /// as that code (a visit of it), and also recorded as this, so a template that loses taps
    /// shows up.
    Recovered,
}

impl OrphanKind {
    pub const ALL: [OrphanKind; 4] = [
        OrphanKind::BaseUrl,
        OrphanKind::InvalidShortUrl,
        OrphanKind::Regular404,
        OrphanKind::Recovered,
    ];

    /// The `o` field's text, and the name the API and the database use.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrphanKind::BaseUrl => "base_url",
            OrphanKind::InvalidShortUrl => "invalid_short_url",
            OrphanKind::Regular404 => "regular_404",
            OrphanKind::Recovered => "recovered",
        }
    }

    pub fn parse(text: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str().as_bytes() == text)
    }
}

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
    /// The rule (and variant) that answered; `None` for the link's own target.
    pub chosen: Option<Chosen>,
    /// The id sent to the landing page; `None` for a link without a click id parameter.
    pub click_id: Option<ClickId>,
    /// `Some` for an orphan visit: `code` is then the path asked for.
    pub orphan: Option<OrphanKind>,
    /// The host's workspace name (`ws`); empty when not recorded.
    pub workspace: &'a [u8],
    /// The request's signals (`sig`).
    pub signals: Signals,
}

/// The `rule` field's text of `chosen`, on the stack: `3` or `3.1`.
pub fn chosen_text(chosen: Chosen) -> ([u8; 7], usize) {
    let mut out = [0; 7];
    let mut len = push_decimal(&mut out, 0, chosen.rule);
    if let Some(variant) = chosen.variant {
        out[len] = b'.';
        len = push_decimal(&mut out, len + 1, variant);
    }
    (out, len)
}

/// The rule (and variant) a `rule` field names; `None` for an empty or malformed field.
pub fn parse_chosen(text: &[u8]) -> Option<Chosen> {
    let text = std::str::from_utf8(text).ok()?;
    let (rule, variant) = match text.split_once('.') {
        Some((rule, variant)) => (rule, Some(variant.parse().ok()?)),
        None => (text, None),
    };
    Some(Chosen {
        rule: rule.parse().ok()?,
        variant,
    })
}

fn push_decimal(out: &mut [u8; 7], at: usize, n: u8) -> usize {
    let digits = [n / 100, n / 10 % 10, n % 10];
    let skip = if n >= 100 {
        0
    } else if n >= 10 {
        1
    } else {
        2
    };
    for (i, digit) in digits[skip..].iter().enumerate() {
        out[at + i] = b'0' + digit;
    }
    at + 3 - skip
}

/// `value` cut to at most `max` bytes, backing off to a UTF-8 character boundary so that a
/// consumer decoding the field as UTF-8 never sees a split character. Inlined where visits are
/// encoded (a length compare per field); the cut itself is out of line.
#[inline]
pub fn truncate(value: &[u8], max: usize) -> &[u8] {
    if value.len() <= max {
        return value;
    }
    cut(value, max)
}

#[cold]
fn cut(value: &[u8], max: usize) -> &[u8] {
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

    #[test]
    fn every_orphan_kind_parses_back() {
        for kind in OrphanKind::ALL {
            assert_eq!(OrphanKind::parse(kind.as_str().as_bytes()), Some(kind));
        }
        assert_eq!(OrphanKind::parse(b""), None);
        assert_eq!(OrphanKind::parse(b"base"), None);
    }

    #[test]
    fn the_rule_field_round_trips() {
        for (rule, variant, text) in [
            (0, None, "0"),
            (15, Some(7), "15.7"),
            (255, Some(255), "255.255"),
        ] {
            let chosen = Chosen { rule, variant };
            let (bytes, len) = chosen_text(chosen);
            assert_eq!(&bytes[..len], text.as_bytes());
            assert_eq!(parse_chosen(text.as_bytes()), Some(chosen));
        }
        for bad in ["", ".", "1.", "x", "1.2.3", "256"] {
            assert_eq!(parse_chosen(bad.as_bytes()), None, "{bad}");
        }
    }
}

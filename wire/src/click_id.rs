//! Click ids: the id a click carries to the landing page (a link's `click_id_param`), which is
//! also its visit's id in the feed and on the webhooks, so the three agree.
//!
//! An id is 96 bits written as 16 base64url characters (`A-Z a-z 0-9 - _`, no padding): a
//! random 64-bit prefix drawn when the writer starts (an nginx worker, the sidecar's fallback),
//! then that writer's 32-bit counter. Made where the redirect is answered, without asking anyone:
//! two writers collide only if they draw the same prefix, and with `n` prefixes ever drawn the
//! chance of that is about `n² / 2^65` (a million worker starts: 3 in 100 million). A writer
//! whose counter runs out draws a new prefix, so one writer never repeats itself.
//!
//! Every character of an id, and of a parameter name ([`ClickIdParam`]), is unreserved in a URL
//! (RFC 3986), so percent-encoding leaves both as they are: `<param>=<id>` goes into a `Location`
//! verbatim.

use std::fmt;

/// Characters of an id.
pub const LEN: usize = 16;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// One click's id, on the stack.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClickId([u8; LEN]);

impl ClickId {
    /// The id of `prefix` and `counter`: their 12 bytes, big-endian, in base64url.
    pub fn of(prefix: u64, counter: u32) -> Self {
        let mut bits = [0u8; 12];
        bits[..8].copy_from_slice(&prefix.to_be_bytes());
        bits[8..].copy_from_slice(&counter.to_be_bytes());
        let mut out = [0u8; LEN];
        for (chunk, text) in bits.chunks_exact(3).zip(out.chunks_exact_mut(4)) {
            let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
            for (i, slot) in text.iter_mut().enumerate() {
                *slot = ALPHABET[(n >> (18 - 6 * i) & 63) as usize];
            }
        }
        ClickId(out)
    }

    /// An id as text, if it is one (16 base64url characters).
    pub fn parse(text: &[u8]) -> Option<Self> {
        let bytes: [u8; LEN] = text.try_into().ok()?;
        bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
            .then_some(ClickId(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Only ALPHABET's ASCII bytes are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for ClickId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClickId({})", self.as_str())
    }
}

impl fmt::Display for ClickId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One writer's ids: a prefix and a counter. The caller draws the prefixes (from the operating
/// system's random source), so this crate stays free of one.
#[derive(Debug, Clone)]
pub struct ClickIds {
    prefix: u64,
    next: u32,
}

impl ClickIds {
    pub fn new(prefix: u64) -> Self {
        ClickIds { prefix, next: 0 }
    }

    /// The next id; `redraw` gives a fresh prefix once the counter has run through 2^32 ids.
    pub fn next(&mut self, redraw: impl FnOnce() -> u64) -> ClickId {
        let id = ClickId::of(self.prefix, self.next);
        self.next = self.next.wrapping_add(1);
        if self.next == 0 {
            self.prefix = redraw();
        }
        id
    }
}

/// Characters of a parameter name at most.
pub const PARAM_MAX_LEN: usize = 32;

/// The query parameter a link's click id goes in: `[A-Za-z0-9_.-]{1,32}`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClickIdParam(Box<[u8]>);

impl ClickIdParam {
    pub fn parse(name: &[u8]) -> Option<Self> {
        let ok = (1..=PARAM_MAX_LEN).contains(&name.len())
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        ok.then(|| ClickIdParam(name.into()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Checked ASCII.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for ClickIdParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClickIdParam({})", self.as_str())
    }
}

/// The pieces of a `Location`, in order: the target before its fragment, the forwarded query
/// (with its separator), `<param>=<id>` (with its separator), the fragment. Empty pieces add
/// nothing; returned as pieces so the module sizes one allocation and copies once.
pub fn location_parts<'a>(
    target: &'a [u8],
    query: Option<&'a [u8]>,
    click: Option<(&'a [u8], &'a [u8])>,
) -> [&'a [u8]; 8] {
    let query = query.filter(|q| !q.is_empty());
    if query.is_none() && click.is_none() {
        return [target, b"", b"", b"", b"", b"", b"", b""];
    }
    // Both belong before any fragment of the target.
    let (base, fragment) = match target.iter().position(|&b| b == b'#') {
        Some(hash) => target.split_at(hash),
        None => (target, &b""[..]),
    };
    let mut has_query = base.contains(&b'?');
    let mut ends_open = base.ends_with(b"?") || base.ends_with(b"&");
    let mut separator = |piece: &[u8]| -> &'static [u8] {
        let sep: &'static [u8] = match (has_query, ends_open) {
            (false, _) => b"?",
            (true, true) => b"",
            (true, false) => b"&",
        };
        has_query = true;
        ends_open = piece.ends_with(b"&");
        sep
    };
    let (query_sep, query) = match query {
        Some(query) => (separator(query), query),
        None => (&b""[..], &b""[..]),
    };
    let (click_sep, name, id) = match click {
        Some((name, id)) => (separator(id), name, id),
        None => (&b""[..], &b""[..], &b""[..]),
    };
    let equals: &[u8] = if click.is_some() { b"=" } else { b"" };
    [
        base, query_sep, query, click_sep, name, equals, id, fragment,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(target: &str, query: Option<&str>, click: Option<(&str, &str)>) -> String {
        let parts = location_parts(
            target.as_bytes(),
            query.map(str::as_bytes),
            click.map(|(n, i)| (n.as_bytes(), i.as_bytes())),
        );
        String::from_utf8(parts.concat()).unwrap()
    }

    #[test]
    fn ids_are_base64url_of_prefix_and_counter() {
        // 12 zero bytes, then all ones: the two ends of the alphabet.
        assert_eq!(ClickId::of(0, 0).as_str(), "AAAAAAAAAAAAAAAA");
        assert_eq!(ClickId::of(u64::MAX, u32::MAX).as_str(), "________________");
        // 0x00000000_00000000 ++ 0x00000001: the last character's bit 0.
        assert_eq!(ClickId::of(0, 1).as_str(), "AAAAAAAAAAAAAAAB");
        // A known vector: bytes 00..0b, as RFC 4648's base64url writes them.
        let id = ClickId::of(0x0001_0203_0405_0607, 0x0809_0a0b);
        assert_eq!(id.as_str(), "AAECAwQFBgcICQoL");
        assert_eq!(ClickId::parse(id.as_bytes()), Some(id));
        for bad in [
            &b"AAECAwQFBgcICQo"[..],
            b"AAECAwQFBgcICQoLx",
            b"AAECAwQFBgcICQo=",
            b"",
        ] {
            assert_eq!(ClickId::parse(bad), None);
        }
    }

    #[test]
    fn a_writer_never_repeats_an_id_and_redraws_when_its_counter_runs_out() {
        let mut ids = ClickIds::new(7);
        let first = ids.next(|| unreachable!());
        assert_ne!(ids.next(|| unreachable!()), first);
        let mut ids = ClickIds {
            prefix: 7,
            next: u32::MAX,
        };
        let last = ids.next(|| 8);
        assert_eq!(last, ClickId::of(7, u32::MAX));
        assert_eq!(ids.next(|| unreachable!()), ClickId::of(8, 0));
    }

    #[test]
    fn parameter_names_are_checked() {
        for good in ["sl_click", "a", "x.y-z_0", &"a".repeat(32)] {
            assert!(ClickIdParam::parse(good.as_bytes()).is_some(), "{good}");
        }
        for bad in ["", "a b", "a=b", "a&b", "é", "a%20", &"a".repeat(33)] {
            assert!(ClickIdParam::parse(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_id_goes_after_the_query_and_before_the_fragment() {
        let id = Some(("sl", "ID"));
        assert_eq!(joined("https://x/a", None, None), "https://x/a");
        assert_eq!(joined("https://x/a#f", Some(""), None), "https://x/a#f");
        assert_eq!(joined("https://x/a", None, id), "https://x/a?sl=ID");
        assert_eq!(joined("https://x/a?b=c", None, id), "https://x/a?b=c&sl=ID");
        assert_eq!(joined("https://x/a?", None, id), "https://x/a?sl=ID");
        assert_eq!(
            joined("https://x/a", Some("u=1"), id),
            "https://x/a?u=1&sl=ID"
        );
        assert_eq!(
            joined("https://x/a?b#t?x", Some("u=1"), id),
            "https://x/a?b&u=1&sl=ID#t?x"
        );
        assert_eq!(
            joined("https://x/a?b=c&", Some("u=1&"), id),
            "https://x/a?b=c&u=1&sl=ID"
        );
        assert_eq!(joined("https://x/a#top", None, id), "https://x/a?sl=ID#top");
        // Without an id: what the query alone always gave.
        assert_eq!(
            joined("https://x/a#top", Some("u=1"), None),
            "https://x/a?u=1#top"
        );
        assert_eq!(
            joined("https://x/a?b=c&", Some("u=1"), None),
            "https://x/a?b=c&u=1"
        );
    }
}

//! The `Location` value of a redirect: the target, plus the short URL's query string when asked,
//! plus the click id when the link asks for it. The rule is wire's
//! ([`shortlink_wire::click_id::location_parts`]), shared with the sidecar's fallback.

pub fn len(parts: &[&[u8]]) -> usize {
    parts.iter().map(|p| p.len()).sum()
}

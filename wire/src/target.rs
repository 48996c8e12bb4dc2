//! The one check every redirect target passes, shared by the record (its own target) and the
//! rules (each variant's): a leaf both build on, so that neither reaches into the other for it.

/// An absolute http(s) URL of visible ASCII: the value goes verbatim into a `Location` header,
/// so anything else (CR, LF, spaces, non-ASCII) must never get through.
///
/// Checked at every cache fill, once per URL of the record (a link with rules holds several), so
/// in two word-sized steps: the scheme compared as one 8-byte word with every byte's case bit
/// set, then every byte looked at without an early exit (the loop vectorises). Setting the case
/// bit turns only letters' capitals and two control bytes into the scheme's bytes, and the
/// second step refuses control bytes.
pub fn is_valid_target(target: &[u8]) -> bool {
    const CASE_BITS: u64 = 0x2020_2020_2020_2020;
    const HTTPS: u64 = u64::from_le_bytes(*b"https://");
    const HTTP: u64 = u64::from_le_bytes(*b"http://\0");
    const SEVEN_BYTES: u64 = 0x00ff_ffff_ffff_ffff;
    let Some(first) = target.first_chunk::<8>() else {
        return false;
    };
    let word = u64::from_le_bytes(*first) | CASE_BITS;
    let scheme_ok = (word == HTTPS && target.len() > 8)
        || (word & SEVEN_BYTES) == (HTTP | CASE_BITS) & SEVEN_BYTES;
    let invisible = target.iter().fold(0u8, |invisible, &b| {
        invisible | u8::from(!b.is_ascii_graphic())
    });
    scheme_ok && invisible == 0
}

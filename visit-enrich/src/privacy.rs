//! IP anonymisation and the visitor hash behind unique-visitor counts.
//!
//! The hash is computed on the full address before any anonymisation, so truncating stored IPs does
//! not merge the visitors of a whole /24 into one. It is an unsalted SHA-256 of `ip 0x00 ua`
//! (seed 000's definition, stable across consumers and restarts): pseudonymous, not anonymous, since
//! the IPv4 space is small enough to enumerate for a known UA. Treat it as personal data.

use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Truncates an address: IPv4 to its /24, IPv6 to its /48 (a typical single-site allocation).
/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a dual-stack listener reports) is treated as IPv4.
pub fn anonymize_ip(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::V4(Ipv4Addr::new(a, b, c, 0))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 80) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }
}

/// 16 bytes of SHA-256(ip text, 0x00, user agent). A missing IP or UA hashes as empty text; the
/// 0x00 separator keeps ("1.2.3.4", "5x") and ("1.2.3.45", "x") apart.
pub fn visitor_hash(ip: Option<IpAddr>, ua: &str) -> [u8; 16] {
    // Canonical form, so the same client hashes alike whether it arrived mapped or not.
    let text = ip.map(|ip| ip.to_canonical().to_string());
    visitor_hash_of_text(text.as_deref(), ua)
}

/// [`visitor_hash`] of an address already in its canonical text form (`IpAddr::to_canonical`,
/// then `to_string`): the enricher formats each address once, for this and the stored `ip`.
pub fn visitor_hash_of_text(ip: Option<&str>, ua: &str) -> [u8; 16] {
    let mut hasher = Sha256::new();
    if let Some(ip) = ip {
        hasher.update(ip.as_bytes());
    }
    hasher.update([0u8]);
    hasher.update(ua.as_bytes());
    let digest = hasher.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn anonymizes() {
        assert_eq!(anonymize_ip(ip("203.0.113.77")), ip("203.0.113.0"));
        assert_eq!(anonymize_ip(ip("::ffff:203.0.113.77")), ip("203.0.113.0"));
        assert_eq!(
            anonymize_ip(ip("2001:db8:abcd:1234:5678::1")),
            ip("2001:db8:abcd::")
        );
        assert_eq!(anonymize_ip(ip("::1")), ip("::"));
    }

    #[test]
    fn hash_is_stable_and_separated() {
        // The definition is pinned below (SHA-256 of "ip\0ua", first 16 bytes): changing it would split
        // every unique-visitor count at the deploy.
        let h = visitor_hash(Some(ip("1.2.3.4")), "curl/8");
        assert_eq!(h, visitor_hash(Some(ip("::ffff:1.2.3.4")), "curl/8"));
        assert_ne!(
            visitor_hash(Some(ip("1.2.3.4")), "5x"),
            visitor_hash(Some(ip("1.2.3.45")), "x")
        );
        assert_ne!(
            visitor_hash(Some(ip("1.2.3.4")), "a"),
            visitor_hash(Some(ip("1.2.3.5")), "a")
        );
        assert_ne!(visitor_hash(None, "a"), visitor_hash(None, "b"));
        let full = Sha256::digest(b"1.2.3.4\0curl/8");
        assert_eq!(visitor_hash(Some(ip("1.2.3.4")), "curl/8"), full[..16]);
    }
}

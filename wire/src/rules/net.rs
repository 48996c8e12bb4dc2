//! Address ranges for the client-address condition.

use std::fmt;
use std::net::IpAddr;

/// An address range: `addr/prefix`, with no bits set past the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `addr/prefix`, or `None` when the prefix is longer than the address or host bits are set
    /// (`10.0.0.1/8` is refused rather than read as `10.0.0.0/8`: it is more likely a mistake).
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        let cidr = Cidr { addr, prefix };
        let bits = cidr.bits();
        (prefix <= bits && masked(addr_bits(addr), prefix, bits) == addr_bits(addr)).then_some(cidr)
    }

    /// `10.0.0.0/8`, `2001:db8::/32`, or one address (`192.0.2.7`: a /32 or /128).
    pub fn parse(text: &str) -> Option<Cidr> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => {
                if prefix.is_empty()
                    || prefix.len() > 3
                    || !prefix.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                (
                    addr.parse::<IpAddr>().ok()?,
                    Some(prefix.parse::<u8>().ok()?),
                )
            }
            None => (text.parse::<IpAddr>().ok()?, None),
        };
        let prefix = prefix.unwrap_or(if addr.is_ipv4() { 32 } else { 128 });
        Cidr::new(addr, prefix)
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in the range; an IPv4-mapped IPv6 client (`::ffff:192.0.2.7`, as a
    /// dual-stack listener reports IPv4 clients) counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        masked(addr_bits(ip), self.prefix, self.bits()) == addr_bits(self.addr)
    }

    fn bits(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn addr_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// `value` (an address of `bits` bits) with everything past `prefix` cleared.
fn masked(value: u128, prefix: u8, bits: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let host_bits = u32::from(bits - prefix.min(bits));
    (value >> host_bits) << host_bits
}

/// False for addresses that are not on the public internet. Documentation ranges (192.0.2.0/24,
/// 2001:db8::/32, …) are left routable: real databases have no entries there, and the test
/// databases use them.
pub fn is_routable(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))) // carrier-grade NAT, RFC 6598
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local, fc00::/7
                || (first & 0xffc0) == 0xfe80) // link local, fe80::/10
        }
    }
}

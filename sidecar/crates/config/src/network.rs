//! A network in CIDR notation (`10.0.0.0/8`, `fd00::/8`), as `--gateway-allow-networks` lists
//! them.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address and a prefix length; the host bits are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    pub address: IpAddr,
    pub prefix: u8,
}

impl Network {
    /// Whether `ip` is in the network (an IPv4 address is never in an IPv6 network: a mapped
    /// address is to be unwrapped by the caller).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a network in CIDR notation (10.0.0.0/8, fd00::/8)");
        let (address, prefix) = text.trim().split_once('/').ok_or_else(bad)?;
        let address: IpAddr = address.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let longest = if address.is_ipv4() { 32 } else { 128 };
        if prefix > longest {
            return Err(bad());
        }
        Ok(Network { address, prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_contain_their_addresses_only() {
        let net: Network = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.200.1.2".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(!net.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one: Network = "127.0.0.1/32".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let all: Network = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        let v6: Network = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::/129",
            "x/8",
            "10.0.0.0/-1",
        ] {
            assert!(bad.parse::<Network>().is_err(), "{bad}");
        }
    }
}

//! The hosting list: one network a line, `AS<number>` or a CIDR block, then optionally its name
//! and source after `#`; blank lines and lines starting with `#` are comments.

use std::collections::HashSet;
use std::net::IpAddr;

/// The list shipped with shortlink: public clouds and hosting providers, each with its source.
pub const SHIPPED: &str = include_str!("hosting.txt");

#[derive(Debug)]
pub struct ListError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hosting networks, line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ListError {}

#[derive(Debug, Default, Clone)]
pub struct HostingList {
    asns: HashSet<u32>,
    /// (network as an IPv6 address, IPv4 mapped; prefix length in that form).
    blocks: Vec<(u128, u8)>,
}

impl HostingList {
    /// The shipped list.
    pub fn shipped() -> Self {
        let mut list = HostingList::default();
        // The shipped text is tested to parse (`network::tests`).
        let _ = list.extend(SHIPPED);
        list
    }

    /// Adds the networks of `text` (the operator's file).
    pub fn extend(&mut self, text: &str) -> Result<(), ListError> {
        for (n, line) in text.lines().enumerate() {
            let entry = line.split('#').next().unwrap_or("").trim();
            let Some(word) = entry.split_whitespace().next() else {
                continue;
            };
            let error = |message: String| ListError {
                line: n + 1,
                message,
            };
            if let Some(number) = word.strip_prefix("AS").or_else(|| word.strip_prefix("as")) {
                let asn = number
                    .parse()
                    .map_err(|_| error(format!("{word:?} is not AS<number>")))?;
                self.asns.insert(asn);
                continue;
            }
            let block = block(word)
                .ok_or_else(|| error(format!("{word:?} is neither AS<number> nor a CIDR block")))?;
            self.blocks.push(block);
        }
        Ok(())
    }

    pub fn holds_asn(&self, asn: u32) -> bool {
        self.asns.contains(&asn)
    }

    pub fn holds_address(&self, ip: IpAddr) -> bool {
        let at = mapped(ip);
        (self.blocks.iter()).any(|&(network, prefix)| at & mask(prefix) == network)
    }

    pub fn has_blocks(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// The listed blocks as inclusive ranges of addresses in the mapped form.
    pub(super) fn block_ranges(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        (self.blocks.iter()).map(|&(network, prefix)| (network, network | !mask(prefix)))
    }
}

fn mapped(ip: IpAddr) -> u128 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn mask(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

/// `a.b.c.d/n` or `x::/n` as (network, prefix) in the mapped form.
fn block(text: &str) -> Option<(u128, u8)> {
    let (address, prefix) = text.split_once('/')?;
    let ip: IpAddr = address.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let prefix = match ip {
        IpAddr::V4(_) if prefix <= 32 => prefix + 96,
        IpAddr::V6(_) if prefix <= 128 => prefix,
        _ => return None,
    };
    Some((mapped(ip) & mask(prefix), prefix))
}

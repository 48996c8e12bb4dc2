//! The client's network (issue 78, docs/BOTS.md): whether an address belongs to a hosting or
//! cloud network, where carriers' and security services' scanners run and people rarely browse
//! from. A network is listed by its autonomous system (looked up in [`AsnTable`]) or by a CIDR
//! block; the list shipped (`hosting.txt`, each line with its source) is extended by the
//! operator's own file in the same format (`--hosting-networks`).

mod asn;
mod list;
mod names;
mod ranges;

pub use asn::{AsnError, AsnTable};
pub use list::{HostingList, ListError};
pub use names::{System, SystemNames};
pub use ranges::HostingRanges;

use std::net::IpAddr;

/// The hosting list and the ASN table it is looked up in.
#[derive(Debug, Default)]
pub struct Networks {
    asns: AsnTable,
    list: HostingList,
}

impl Networks {
    pub fn new(asns: AsnTable, list: HostingList) -> Self {
        Networks { asns, list }
    }

    /// Whether `ip` is on a listed network: in a listed block, or announced by a listed
    /// autonomous system.
    pub fn hosting(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.list.holds_address(ip) || self.asns.lookup(ip).is_some_and(|a| self.list.holds_asn(a))
    }

    /// Whether anything can be found: a list with blocks, or an ASN table.
    pub fn is_enabled(&self) -> bool {
        self.list.has_blocks() || !self.asns.is_empty()
    }
}

#[cfg(test)]
mod tests;

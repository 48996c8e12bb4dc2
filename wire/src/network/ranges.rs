//! The hosting list resolved once into the address ranges it covers, for a reader that must not
//! hold the whole ASN table: the nginx module, which looks a capped click's client up (its
//! verdict decides whether the click spends the cap). Only the listed autonomous systems' ranges
//! are kept — a few thousand of the table's ~600,000 — so the workers share a few hundred
//! kilobytes and a lookup is a bisection of them, allocating nothing.

use std::net::IpAddr;
use std::path::Path;

use super::asn::{self, AsnError};
use super::list::HostingList;

/// Sorted, non-overlapping inclusive ranges of hosting addresses, per family.
#[derive(Debug, Default, Clone)]
pub struct HostingRanges {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl HostingRanges {
    /// The ranges of `list`: its blocks, and the ranges its autonomous systems announce in the
    /// ASN table of `asn_dir` (`scripts/fetch-geo`'s `DIR/asn`). Answers what
    /// [`super::Networks::hosting`] answers with the same table and list.
    pub fn build(asn_dir: &Path, list: &HostingList) -> Result<Self, AsnError> {
        let (v4_path, v6_path) = asn::files(asn_dir)?;
        let keep = |asn| list.holds_asn(asn);
        let v4 = asn::ranges::<u32>(&v4_path, keep)?;
        let v6 = asn::ranges::<u128>(&v6_path, keep)?;
        let v4 = v4.into_iter().map(|(first, last, _)| (first, last));
        let v6 = v6.into_iter().map(|(first, last, _)| (first, last));
        Ok(Self::with_blocks(v4.collect(), v6.collect(), list))
    }

    /// The ranges of `list`'s blocks alone: without an ASN table, its autonomous systems are
    /// found nowhere (as [`super::Networks`] finds none without one).
    pub fn blocks(list: &HostingList) -> Self {
        Self::with_blocks(Vec::new(), Vec::new(), list)
    }

    fn with_blocks(mut v4: Vec<(u32, u32)>, mut v6: Vec<(u128, u128)>, list: &HostingList) -> Self {
        // The list holds IPv4 blocks mapped (`::ffff:a.b.c.d`, prefix plus 96).
        let mapped = |address: u128| address >> 32 == 0xffff;
        for (first, last) in list.block_ranges() {
            match mapped(first) && mapped(last) {
                true => v4.push((first as u32, last as u32)),
                false => v6.push((first, last)),
            }
        }
        HostingRanges {
            v4: merged(v4),
            v6: merged(v6),
        }
    }

    /// Whether `ip` (an IPv4-mapped address as its IPv4 address) is in a hosting range.
    pub fn holds(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(v4) => within(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => within(&self.v6, u128::from(v6)),
        }
    }

    /// How many ranges are held (both families).
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `ranges` sorted, overlapping ones joined (an operator's block inside a listed system's).
fn merged<T: Ord + Copy>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (first, last) in ranges {
        match out.last_mut() {
            Some(open) if first <= open.1 => open.1 = open.1.max(last),
            _ => out.push((first, last)),
        }
    }
    out.shrink_to_fit();
    out
}

fn within<T: Ord + Copy>(ranges: &[(T, T)], at: T) -> bool {
    let after = ranges.partition_point(|&(first, _)| first <= at);
    after.checked_sub(1).is_some_and(|i| at <= ranges[i].1)
}

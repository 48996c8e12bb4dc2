//! What the fallback knows of a capped click's client beyond its request (issue 78), so that it
//! spends `max_visits` on the clicks the module would: whether the client's address is on a
//! hosting or cloud network (the hosting list and the ASN table the consumer reads, resolved into
//! the module's [`HostingRanges`] on the first capped click, so a sidecar whose links have no cap
//! never holds them), and the sweeps this process's consumer noticed. The fallback answers while
//! the module's Redis is unreachable, so it cannot read the sweeps other consumers published:
//! with `--consumer false` it knows none.
//!
//! It also names the listed autonomous system a stored visit's hosting reason found
//! ([`ClickJudge::system`]), from the same table and list, read on the first such visit shown.

use crate::consumer::NoticedSweeps;
use shortlink_core::service::click::ClientJudge;
use shortlink_wire::network::{HostingList, HostingRanges, SystemNames};
use shortlink_wire::record::WorkspaceName;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::OnceLock;

#[derive(Debug, Default)]
pub struct ClickJudge {
    /// `--geoip-asn-dir`.
    asn_dir: Option<PathBuf>,
    list: HostingList,
    ranges: OnceLock<HostingRanges>,
    systems: OnceLock<SystemNames>,
    sweeps: NoticedSweeps,
}

impl ClickJudge {
    /// A judge of the hosting `list` (the shipped one with `--hosting-networks`) and the ASN
    /// table in `asn_dir`.
    pub fn new(asn_dir: Option<PathBuf>, list: HostingList) -> Self {
        ClickJudge {
            asn_dir,
            list,
            ..ClickJudge::default()
        }
    }

    /// The sweeps this process's consumer notices: handed to it when it starts
    /// (`crate::VisitJobs::spawn`).
    pub fn sweeps(&self) -> NoticedSweeps {
        NoticedSweeps::clone(&self.sweeps)
    }

    fn ranges(&self) -> &HostingRanges {
        self.ranges.get_or_init(|| match &self.asn_dir {
            None => HostingRanges::blocks(&self.list),
            Some(dir) => HostingRanges::build(dir, &self.list).unwrap_or_else(|error| {
                tracing::warn!(%error, "ASN table not read; the fallback judges networks by their blocks only");
                HostingRanges::blocks(&self.list)
            }),
        })
    }

    /// The listed autonomous system announcing `ip` (an address as the visit store kept it:
    /// whole, or its /24 or /48 under `--anonymize-ip`, which no system's range splits), as
    /// `AS<number> <organisation>`; `None` without an ASN table or for an address in no listed
    /// system (one listed by its block). The table is read on the first call: a hosting visit
    /// shown, never a redirect.
    pub fn system(&self, ip: IpAddr) -> Option<String> {
        let systems = self.systems.get_or_init(|| match &self.asn_dir {
            None => SystemNames::default(),
            Some(dir) => SystemNames::build(dir, &self.list).unwrap_or_else(|error| {
                tracing::warn!(%error, "ASN table not read; hosting reasons name no system");
                SystemNames::default()
            }),
        });
        systems.lookup(ip).map(|system| system.to_string())
    }
}

impl ClientJudge for ClickJudge {
    fn hosting(&self, ip: IpAddr) -> bool {
        self.ranges().holds(ip)
    }

    fn swept(&self, workspace: WorkspaceName, ip: IpAddr, ua: &[u8]) -> bool {
        let now = chrono::Utc::now().timestamp_millis();
        let flags = self.sweeps.lock().unwrap_or_else(|e| e.into_inner());
        flags.holds(workspace, ip, ua, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_wire::sweeps::{agent_key, Flag, Network};

    #[test]
    fn the_judge_reads_the_lists_blocks_and_the_sweeps_its_consumer_noticed() {
        let mut list = HostingList::default();
        list.extend("198.19.255.0/24\n").unwrap();
        let judge = ClickJudge::new(None, list);
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(judge.hosting(ip("198.19.255.7")));
        assert!(!judge.hosting(ip("81.2.69.142")));
        let brand: WorkspaceName = "brand-a".parse().unwrap();
        let chrome = b"Mozilla/5.0 Chrome/131.0.0.0";
        assert!(!judge.swept(brand, ip("81.2.69.142"), chrome));
        let flag = Flag {
            workspace: brand,
            network: Network::of(ip("81.2.69.0")),
            agent: agent_key(chrome),
        };
        let until = chrono::Utc::now().timestamp_millis() + 60_000;
        judge.sweeps().lock().unwrap().raise(&[(flag, until)]);
        assert!(judge.swept(brand, ip("81.2.69.142"), chrome));
        assert!(!judge.swept(WorkspaceName::DEFAULT, ip("81.2.69.142"), chrome));
    }
}

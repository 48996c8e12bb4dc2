//! What the visit consumer judges a client's network by (issue 78, docs/BOTS.md).

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct VisitSignalsConfig {
    /// Directory of the ip-location-db `asn` package's `asn-ipv4-num.csv` / `asn-ipv6-num.csv` (`scripts/fetch-geo`): the client's autonomous system, for the hosting-network signal (docs/BOTS.md); missing: networks are judged by `--hosting-networks` blocks only.
    #[arg(long, env = "SHORTLINK_GEOIP_ASN_DIR", global = true)]
    pub geoip_asn_dir: Option<PathBuf>,

    /// Hosting/cloud networks to add to the shipped list (one `AS<number>` or CIDR block a line, `#` comments): a visit from one is a scanner's (docs/BOTS.md).
    #[arg(long, env = "SHORTLINK_HOSTING_NETWORKS", global = true)]
    pub hosting_networks: Option<PathBuf>,
}

use super::*;
use std::net::{IpAddr, Ipv6Addr};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn the_shipped_list_parses_and_names_a_source_for_each_network() {
    let mut list = HostingList::default();
    list.extend(list::SHIPPED).unwrap();
    assert!(list.holds_asn(16509) && list.holds_asn(8075));
    // Private Relay's and WARP's egress networks stay off: their users are people.
    assert!(!list.holds_asn(13335) && !list.holds_asn(36183));
    for line in list::SHIPPED.lines().filter(|l| l.starts_with("AS")) {
        assert!(line.contains("https://"), "no source: {line}");
    }
}

#[test]
fn a_network_is_listed_by_its_asn_or_its_block() {
    // 198.51.100.0/24 announced by AS64500 (documentation numbers, RFC 5398), listed by ASN;
    // 203.0.113.128/25 listed as a block by the operator.
    let asns = AsnTable::from_v4(vec![
        (
            u32::from(std::net::Ipv4Addr::new(198, 51, 100, 0)),
            u32::from(std::net::Ipv4Addr::new(198, 51, 100, 255)),
            64500,
        ),
        (
            u32::from(std::net::Ipv4Addr::new(192, 0, 2, 0)),
            u32::from(std::net::Ipv4Addr::new(192, 0, 2, 255)),
            64501,
        ),
    ]);
    let mut list = HostingList::default();
    list.extend(
        "AS64500 # a test cloud\n\n# the operator's own\n203.0.113.128/25\n2001:db8:1::/48 # v6",
    )
    .unwrap();
    let networks = Networks::new(asns, list);
    assert!(networks.hosting(ip("198.51.100.7")));
    assert!(!networks.hosting(ip("192.0.2.7")), "AS64501 is not listed");
    assert!(networks.hosting(ip("203.0.113.200")));
    assert!(!networks.hosting(ip("203.0.113.127")));
    assert!(networks.hosting(ip("2001:db8:1:2::1")));
    assert!(!networks.hosting(ip("2001:db8:2::1")));
    // An IPv4-mapped IPv6 address is its IPv4 address.
    let mapped = IpAddr::V6(std::net::Ipv4Addr::new(198, 51, 100, 9).to_ipv6_mapped());
    assert!(networks.hosting(mapped));
    assert!(!networks.hosting(IpAddr::V6(Ipv6Addr::LOCALHOST)));
}

#[test]
fn a_bad_line_is_named() {
    let error = HostingList::default().extend("AS1\nASX\n").unwrap_err();
    assert_eq!(error.line, 2);
    let error = HostingList::default().extend("10.0.0.0/33").unwrap_err();
    assert_eq!(error.line, 1);
}

#[test]
fn the_asn_table_reads_the_packages_csv() {
    let dir = std::env::temp_dir().join(format!("asn-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("asn-ipv4-num.csv"),
        "3325256704,3325256959,64500,\"Test, Inc.\"\n16777216,16777471,13335,CLOUDFLARENET\n",
    )
    .unwrap();
    let table = AsnTable::from_dir(&dir).unwrap();
    assert_eq!(table.lookup(ip("198.51.100.1")), Some(64500));
    assert_eq!(table.lookup(ip("1.0.0.1")), Some(13335));
    assert_eq!(table.lookup(ip("1.0.1.1")), None);
    std::fs::write(dir.join("asn-ipv4-num.csv"), "1,2\n").unwrap();
    assert!(AsnTable::from_dir(&dir)
        .unwrap_err()
        .message
        .contains("line 1"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_person_s_agent_from_a_hosting_network_is_a_scanner() {
    use crate::{Audience, Enricher, GeoDb, VisitEvent};
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    let event = |ip: &str, ua: &str| {
        let fields = [
            ("c", "abc"),
            ("t", "1700000000000"),
            ("ip", ip),
            ("ua", ua),
            ("sig", "0"),
        ];
        VisitEvent::from_fields("1-0", fields.map(|(k, v)| (k, v.to_owned()))).unwrap()
    };
    let mut list = HostingList::default();
    list.extend("198.51.100.0/24").unwrap();
    let enricher = Enricher::new(GeoDb::disabled(), false)
        .with_networks(Networks::new(AsnTable::default(), list));
    let cloud = enricher.enrich(&event("198.51.100.7", chrome));
    assert_eq!(cloud.agent.audience, Audience::Scanner);
    assert_eq!(cloud.reasons.0, shortlink_wire::verdict::Reasons::NETWORK);
    let home = enricher.enrich(&event("192.0.2.7", chrome));
    assert_eq!(home.agent.audience, Audience::Human);
    // A machine's own agent decides first; without networks nothing is judged by them.
    let bot = enricher.enrich(&event("198.51.100.7", "curl/8.5.0"));
    assert_eq!(bot.agent.audience, Audience::Bot);
    let plain = Enricher::new(GeoDb::disabled(), false).enrich(&event("198.51.100.7", chrome));
    assert_eq!(plain.agent.audience, Audience::Human);
}

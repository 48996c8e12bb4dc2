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
fn the_ranges_answer_what_the_table_and_list_answer() {
    let dir = std::env::temp_dir().join(format!("hosting-ranges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 198.51.100.0/24 by AS64500 (listed), 192.0.2.0/24 by AS64501 (not), and an IPv6 range
    // of AS64500; the operator adds a block inside the listed range and one elsewhere.
    std::fs::write(
        dir.join("asn-ipv4-num.csv"),
        "3325256704,3325256959,64500,Test\n3221225984,3221226239,64501,Other\n",
    )
    .unwrap();
    let v6_first = u128::from("2001:db8:1::".parse::<Ipv6Addr>().unwrap());
    let v6_last = v6_first | ((1u128 << 80) - 1);
    std::fs::write(
        dir.join("asn-ipv6-num.csv"),
        format!("{v6_first},{v6_last},64500,Test\n"),
    )
    .unwrap();
    let mut list = HostingList::default();
    list.extend("AS64500\n198.51.100.128/25\n203.0.113.0/25\n2001:db8:9::/48")
        .unwrap();
    let ranges = HostingRanges::build(&dir, &list).unwrap();
    let networks = Networks::new(AsnTable::from_dir(&dir).unwrap(), list);
    assert_eq!(ranges.len(), 4, "the block inside AS64500's range joins it");
    for address in [
        "198.51.100.0",
        "198.51.100.255",
        "198.51.101.0",
        "192.0.2.7",
        "203.0.113.0",
        "203.0.113.127",
        "203.0.113.128",
        "::ffff:198.51.100.9",
        "2001:db8:1::1",
        "2001:db8:1:ffff::1",
        "2001:db8:2::1",
        "2001:db8:9:1::1",
        "10.0.0.1",
        "::1",
    ] {
        assert_eq!(
            ranges.holds(ip(address)),
            networks.hosting(ip(address)),
            "{address}"
        );
    }
    assert!(ranges.holds(ip("198.51.100.7")) && !ranges.holds(ip("192.0.2.7")));
    // A damaged table is refused, even on a line of a system nobody lists.
    std::fs::write(dir.join("asn-ipv4-num.csv"), "1,2,3\nnot,a,line\n").unwrap();
    let error = HostingRanges::build(&dir, &HostingList::default()).unwrap_err();
    assert!(error.to_string().contains("line 2"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(HostingRanges::build(&dir, &HostingList::default()).is_err());
}

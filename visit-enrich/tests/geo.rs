//! Geo lookups against the committed test databases (see testdata_mmdb.rs for their contents).

use shortlink_visit_enrich::{Audience, Enricher, Geo, GeoDb, VisitEvent};
use std::net::IpAddr;
use std::path::PathBuf;

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn geo(country: &str, region: Option<&str>, city: Option<&str>, isp: Option<&str>) -> Geo {
    let s = |v: Option<&str>| v.map(str::to_owned);
    Geo {
        country: Some(country.to_owned()),
        region: s(region),
        city: s(city),
        isp: s(isp),
    }
}

#[test]
fn maxmind_layout() {
    let db = GeoDb::open(testdata("test-city.mmdb")).unwrap();
    assert!(db.is_enabled());
    let sydney = geo(
        "AU",
        Some("New South Wales"),
        Some("Sydney"),
        Some("Example Telecom AU"),
    );
    assert_eq!(db.lookup(ip("203.0.113.9")), sydney);
    assert_eq!(
        db.lookup(ip("::ffff:203.0.113.9")),
        sydney,
        "IPv4-mapped IPv6"
    );
    assert_eq!(
        db.lookup(ip("198.51.100.200")),
        geo("DE", Some("Berlin"), Some("Berlin"), None)
    );
    assert_eq!(db.lookup(ip("192.0.2.1")), geo("US", None, None, None));
    assert_eq!(
        db.lookup(ip("2001:db8:1:ffff::1")),
        geo("JP", Some("Tokyo"), Some("東京"), None)
    );
    assert_eq!(
        db.lookup(ip("2001:db8:2::1")),
        Geo::default(),
        "not in the database"
    );
    assert_eq!(db.lookup(ip("8.8.8.8")), Geo::default());
}

#[test]
fn private_addresses_are_not_looked_up() {
    // The test database maps 10.0.0.0/8 to "ZZ"; a private address must still answer empty.
    let db = GeoDb::open(testdata("test-city.mmdb")).unwrap();
    for private in ["10.1.2.3", "127.0.0.1", "192.168.0.1", "::1", "fd12::1"] {
        assert_eq!(db.lookup(ip(private)), Geo::default(), "{private}");
    }
}

#[test]
fn flat_ip_location_db_layout_with_asn() {
    let db = GeoDb::open(testdata("test-dbip-city.mmdb")).unwrap();
    assert_eq!(
        db.lookup(ip("203.0.113.9")),
        geo("AU", Some("New South Wales"), Some("Sydney"), None)
    );
    assert_eq!(
        db.lookup(ip("2001:db8:1::5")),
        geo("JP", Some("Tokyo"), Some("Tokyo"), None)
    );
    let db = db.with_isp_db(testdata("test-asn.mmdb")).unwrap();
    assert_eq!(
        db.lookup(ip("203.0.113.9")).isp.as_deref(),
        Some("Example Net AU")
    );
    // ISP database only: country stays unknown, the ISP is still filled.
    let isp_only = GeoDb::disabled()
        .with_isp_db(testdata("test-asn.mmdb"))
        .unwrap();
    assert_eq!(
        isp_only.lookup(ip("198.51.100.1")),
        Geo {
            isp: Some("Example Net DE".into()),
            ..Geo::default()
        }
    );
}

#[test]
fn city_database_isp_wins_over_asn_database() {
    let db = GeoDb::open(testdata("test-city.mmdb"))
        .unwrap()
        .with_isp_db(testdata("test-asn.mmdb"))
        .unwrap();
    assert_eq!(
        db.lookup(ip("203.0.113.9")).isp.as_deref(),
        Some("Example Telecom AU")
    );
    assert_eq!(
        db.lookup(ip("198.51.100.1")).isp.as_deref(),
        Some("Example Net DE")
    );
}

#[test]
fn missing_database_breaks_nothing() {
    let db = GeoDb::open_or_disabled(testdata("absent.mmdb")).unwrap();
    let event = VisitEvent::from_fields(
        "1-0",
        [
            ("c", "abc"),
            ("t", "1"),
            ("ip", "203.0.113.9"),
            ("ua", "curl/8.5.0"),
        ]
        .map(|(k, v)| (k.as_bytes(), v.as_bytes())),
    )
    .unwrap();
    let visit = Enricher::new(db, true).enrich(&event);
    assert_eq!(
        (visit.country, visit.city, visit.agent.audience),
        (None, None, Audience::Bot)
    );
    assert_eq!(visit.ip.as_deref(), Some("203.0.113.0"));
}

#[test]
fn enricher_fills_geo_from_the_full_address() {
    let db = GeoDb::open(testdata("test-city.mmdb")).unwrap();
    let event = VisitEvent::from_fields(
        "1-0",
        [("c", "abc"), ("t", "1"), ("ip", "198.51.100.77")]
            .map(|(k, v)| (k.as_bytes(), v.as_bytes())),
    )
    .unwrap();
    let visit = Enricher::new(db, true).enrich(&event);
    assert_eq!(
        (visit.country.as_deref(), visit.city.as_deref()),
        (Some("DE"), Some("Berlin"))
    );
    assert_eq!(visit.ip.as_deref(), Some("198.51.100.0"));
}

#[test]
fn a_separate_ipv6_database_answers_ipv6_only() {
    // test-city.mmdb names 2001:db8:1::/48's city in Japanese only, the flat database in English:
    // the English name proves the IPv6 database answered.
    let city = GeoDb::open(testdata("test-city.mmdb")).unwrap();
    let mut split = GeoDb::open(testdata("test-city.mmdb")).unwrap();
    split
        .attach_ipv6_db(testdata("test-dbip-city.mmdb"))
        .unwrap();
    assert_eq!(
        split.lookup(ip("2001:db8:1::5")),
        geo("JP", Some("Tokyo"), Some("Tokyo"), None)
    );
    assert_eq!(
        split.lookup(ip("203.0.113.9")),
        city.lookup(ip("203.0.113.9"))
    );
    // A missing IPv6 file is reported as missing, and leaves the database as it was.
    let error = split.attach_ipv6_db(testdata("no-such.mmdb")).unwrap_err();
    assert!(error.is_missing());
    assert_eq!(
        split.lookup(ip("2001:db8:1::5")),
        geo("JP", Some("Tokyo"), Some("Tokyo"), None)
    );
}

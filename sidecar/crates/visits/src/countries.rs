//! The client's country for click-time rules, answered by the sidecar itself (the fallback and
//! the preview): the visit pipeline's geo database (`--geoip-db`, `--geoip-db-ipv6`), opened on
//! the first click that asks for a country, so a sidecar whose links have no country rule never
//! holds a second copy of it. A missing database means "country unknown": a country condition
//! then does not hold, as in the module without its database.

use shortlink_visit_enrich::GeoDb;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::OnceLock;

#[derive(Debug, Default)]
pub struct Countries {
    city: Option<PathBuf>,
    city_ipv6: Option<PathBuf>,
    db: OnceLock<GeoDb>,
}

impl Countries {
    pub fn new(city: Option<PathBuf>, city_ipv6: Option<PathBuf>) -> Self {
        Countries {
            city,
            city_ipv6,
            db: OnceLock::new(),
        }
    }

    /// No database: every country is unknown.
    pub fn disabled() -> Self {
        Countries::default()
    }

    pub fn country(&self, ip: IpAddr) -> Option<[u8; 2]> {
        let country = self.db().lookup(ip).country?;
        match country.to_ascii_uppercase().as_bytes() {
            &[a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => Some([a, b]),
            _ => None,
        }
    }

    fn db(&self) -> &GeoDb {
        self.db.get_or_init(|| {
            let mut db = match &self.city {
                None => GeoDb::disabled(),
                Some(path) => GeoDb::open_or_disabled(path).unwrap_or_else(|error| {
                    tracing::warn!(%error, "geo database unreadable: click countries unknown");
                    GeoDb::disabled()
                }),
            };
            if let Some(path) = &self.city_ipv6 {
                if let Err(error) = db.attach_ipv6_db(path) {
                    tracing::warn!(%error, "IPv6 geo database left out of click countries");
                }
            }
            db
        })
    }
}

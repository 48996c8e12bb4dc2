//! IP address → autonomous system, from the ip-location-db project's `asn` package (RIR and
//! RouteViews data, see `scripts/fetch-geo`): `asn-ipv4-num.csv` and `asn-ipv6-num.csv`, one
//! range a line as `first,last,asn,organisation` with the addresses as integers. Held as sorted
//! ranges (about 12 bytes an IPv4 range, 36 an IPv6 one), searched by bisection.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct AsnError {
    pub path: PathBuf,
    pub message: String,
}

impl std::fmt::Display for AsnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ASN table {}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for AsnError {}

/// Sorted, non-overlapping address ranges with their autonomous system numbers.
#[derive(Debug, Default)]
pub struct AsnTable {
    v4: Vec<(u32, u32, u32)>,
    v6: Vec<(u128, u128, u32)>,
}

impl AsnTable {
    /// The table of the CSV files in `dir` (either file may be missing; neither: an error).
    pub fn from_dir(dir: &Path) -> Result<Self, AsnError> {
        let (v4, v6) = files(dir)?;
        Ok(AsnTable {
            v4: ranges(&v4, |_| true)?,
            v6: ranges(&v6, |_| true)?,
        })
    }

    /// A table of the given IPv4 ranges (tests, and a list built elsewhere).
    pub fn from_v4(mut v4: Vec<(u32, u32, u32)>) -> Self {
        v4.sort_unstable();
        AsnTable { v4, v6: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// The autonomous system announcing `ip` (canonical: an IPv4-mapped address as IPv4).
    pub fn lookup(&self, ip: IpAddr) -> Option<u32> {
        match ip {
            IpAddr::V4(v4) => find(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => find(&self.v6, u128::from(v6)),
        }
    }
}

/// The IPv4 and IPv6 files of the table in `dir`; an error if neither is there.
pub(super) fn files(dir: &Path) -> Result<(PathBuf, PathBuf), AsnError> {
    let v4 = dir.join("asn-ipv4-num.csv");
    let v6 = dir.join("asn-ipv6-num.csv");
    if !v4.exists() && !v6.exists() {
        return Err(AsnError {
            path: dir.to_owned(),
            message: "neither asn-ipv4-num.csv nor asn-ipv6-num.csv is there".into(),
        });
    }
    Ok((v4, v6))
}

fn find<T: Ord + Copy>(ranges: &[(T, T, u32)], at: T) -> Option<u32> {
    let after = ranges.partition_point(|(first, _, _)| *first <= at);
    let (_, last, asn) = ranges.get(after.checked_sub(1)?)?;
    (at <= *last && *asn != 0).then_some(*asn)
}

/// The ranges of the `first,last,asn,…` file at `path` (none if it does not exist) whose
/// autonomous system `keep` accepts, sorted by their first address. Every line is checked, kept
/// or not, so a damaged file is refused whoever reads it.
pub(super) fn ranges<T: std::str::FromStr + Ord + Copy>(
    path: &Path,
    keep: impl Fn(u32) -> bool,
) -> Result<Vec<(T, T, u32)>, AsnError> {
    ranges_named(path, keep, |_, _| {})
}

/// [`ranges`], handing each kept line's autonomous system and organisation (the fourth field,
/// as written: CSV-quoted when it holds a comma) to `name`.
pub(super) fn ranges_named<T: std::str::FromStr + Ord + Copy>(
    path: &Path,
    keep: impl Fn(u32) -> bool,
    mut name: impl FnMut(u32, &str),
) -> Result<Vec<(T, T, u32)>, AsnError> {
    let error = |message| AsnError {
        path: path.to_owned(),
        message,
    };
    let text = match path.exists() {
        true => std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?,
        false => String::new(),
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(4, ',');
        let mut next = || fields.next().map(str::trim);
        let parsed = (|| {
            Some((
                next()?.parse().ok()?,
                next()?.parse().ok()?,
                next()?.parse().ok()?,
            ))
        })();
        match parsed {
            Some(range) if keep(range.2) => {
                name(range.2, next().unwrap_or(""));
                out.push(range);
            }
            Some(_) => {}
            None => {
                let message = format!("line {}: not first,last,asn: {line:.80}", n + 1);
                return Err(error(message));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

//! Which listed autonomous system an address is in, with its organisation's name: what a visit's
//! hosting-network reason says where operators read it ("AS16509 Amazon.com, Inc."). Read from
//! the ASN table the verdict uses, at display time from the address the visit store kept, so the
//! redirect and the visit consumer pay nothing for it. Only the hosting list's systems are kept
//! (as [`super::HostingRanges`] keeps them): those are the ones a hosting reason can name; an
//! address listed by its block alone is in none of them.

use std::collections::hash_map::{Entry, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use super::asn::{self, AsnError};
use super::list::HostingList;

/// The listed autonomous systems' ranges and names.
#[derive(Debug, Default)]
pub struct SystemNames {
    v4: Vec<(u32, u32, u32)>,
    v6: Vec<(u128, u128, u32)>,
    names: HashMap<u32, String>,
}

/// One autonomous system: `AS<number> <organisation>` when shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System<'a> {
    pub number: u32,
    /// The organisation as the table names it; `None` when its lines name none.
    pub name: Option<&'a str>,
}

impl fmt::Display for System<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            Some(name) => write!(f, "AS{} {name}", self.number),
            None => write!(f, "AS{}", self.number),
        }
    }
}

impl SystemNames {
    /// The systems `list` holds, as the ASN table of `asn_dir` announces and names them.
    pub fn build(asn_dir: &Path, list: &HostingList) -> Result<Self, AsnError> {
        let (v4_path, v6_path) = asn::files(asn_dir)?;
        let keep = |number| list.holds_asn(number);
        let mut names = HashMap::new();
        let mut name = |number: u32, text: &str| {
            // A system's first named line names it (its lines repeat one name).
            if let (Entry::Vacant(entry), Some(text)) = (names.entry(number), unquoted(text)) {
                entry.insert(text);
            }
        };
        let v4 = asn::ranges_named::<u32>(&v4_path, keep, &mut name)?;
        let v6 = asn::ranges_named::<u128>(&v6_path, keep, &mut name)?;
        Ok(SystemNames { v4, v6, names })
    }

    /// The listed system announcing `ip` (an IPv4-mapped address as its IPv4 address).
    pub fn lookup(&self, ip: IpAddr) -> Option<System<'_>> {
        let number = match ip.to_canonical() {
            IpAddr::V4(v4) => find(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => find(&self.v6, u128::from(v6)),
        }?;
        let name = self.names.get(&number).map(String::as_str);
        Some(System { number, name })
    }
}

fn find<T: Ord + Copy>(ranges: &[(T, T, u32)], at: T) -> Option<u32> {
    let after = ranges.partition_point(|(first, _, _)| *first <= at);
    let (_, last, number) = ranges.get(after.checked_sub(1)?)?;
    (at <= *last && *number != 0).then_some(*number)
}

/// A CSV field's text: `"Amazon.com, Inc."` without its quotes (a doubled quote is one); `None`
/// for an empty one.
fn unquoted(field: &str) -> Option<String> {
    let field = field.trim();
    let text = match field.strip_prefix('"').and_then(|f| f.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\""),
        None => field.to_owned(),
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_system_is_found_and_named_an_unlisted_one_not() {
        let dir = std::env::temp_dir().join(format!("system-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v4 = "3221225984,3221226239,64500,\"Example Cloud, Inc.\"\n\
                  3325256704,3325256959,64501,Someone Else\n";
        std::fs::write(dir.join("asn-ipv4-num.csv"), v4).unwrap();
        let mut list = HostingList::default();
        list.extend("AS64500\n").unwrap();
        let names = SystemNames::build(&dir, &list).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let found = names.lookup(ip("192.0.2.0")).unwrap();
        assert_eq!(found.to_string(), "AS64500 Example Cloud, Inc.");
        assert_eq!(names.lookup(ip("::ffff:192.0.2.9")), Some(found));
        assert_eq!(
            names.lookup(ip("198.51.100.1")),
            None,
            "AS64501 is not listed"
        );
        assert_eq!(names.lookup(ip("203.0.113.1")), None);
    }
}

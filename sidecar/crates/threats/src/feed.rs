//! One feed: what `--threat-feeds` says of it, and the copy in memory with the checks a new copy
//! passes before it replaces the old (not empty, not shrunk by more than half).

use crate::error::Error;
use crate::index::Index;
use crate::parse::{self, Format, Parsed};
use crate::source::{Source, Validators};

/// `name=format:source`, e.g. `urlhaus=urlhaus-csv:https://urlhaus.abuse.ch/downloads/csv_recent/`
/// or `corp=hosts:/etc/shortlink/blocked-hosts.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub format: Format,
    pub source: Source,
}

impl std::str::FromStr for Spec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::Spec {
            spec: spec.to_owned(),
            why: why.to_owned(),
        };
        let (name, rest) = spec.split_once('=').ok_or_else(|| bad("no `name=`"))?;
        let (format, source) = rest
            .split_once(':')
            .ok_or_else(|| bad("no `format:` before the source"))?;
        let valid_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if name.is_empty() || !name.chars().all(valid_name) {
            return Err(bad("the name is letters, digits, `-` and `_`"));
        }
        if source.is_empty() {
            return Err(bad("no source"));
        }
        Ok(Spec {
            name: name.to_owned(),
            format: format.parse().map_err(|why: String| bad(&why))?,
            source: Source::parse(source),
        })
    }
}

/// A feed's copy in memory and what is known of it.
#[derive(Debug, Default)]
pub struct Loaded {
    pub index: Index,
    /// Lines of the copy that could not be read.
    pub errors: u64,
    pub validators: Validators,
}

impl Loaded {
    /// A new copy of a feed whose current copy is `current`: refused when it lists nothing, or
    /// fewer than half of the current copy's entries (a truncated download or a broken export
    /// would otherwise release every link quarantined under the missing entries at once).
    pub fn verify(
        current: &Loaded,
        parsed: &Parsed,
        validators: Validators,
    ) -> Result<Self, Error> {
        if parsed.entries() == 0 {
            return Err(Error::Empty {
                errors: parsed.errors,
            });
        }
        let index = Index::new(parsed);
        let before = current.index.len();
        if index.len() * 2 < before {
            return Err(Error::Shrank {
                before,
                after: index.len(),
            });
        }
        Ok(Loaded {
            index,
            errors: parsed.errors,
            validators,
        })
    }
}

/// Parses `body` in `spec`'s format.
pub fn read(spec: &Spec, body: &[u8]) -> Parsed {
    parse::parse(spec.format, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let spec: Spec = "urlhaus=urlhaus-csv:https://h.example/csv".parse().unwrap();
        assert_eq!(spec.name, "urlhaus");
        assert_eq!(spec.format, Format::UrlhausCsv);
        assert_eq!(spec.source, Source::Url("https://h.example/csv".into()));
        let file: Spec = "corp=hosts:/etc/x.txt".parse().unwrap();
        assert_eq!(file.source, Source::File("/etc/x.txt".into()));
        assert!("x=nope:/a".parse::<Spec>().is_err());
        assert!("=hosts:/a".parse::<Spec>().is_err());
        assert!("a b=hosts:/a".parse::<Spec>().is_err());
    }

    #[test]
    fn a_copy_shrunk_by_more_than_half_is_held_back() {
        let parsed = |n: usize| Parsed {
            hosts: (0..n).map(|i| format!("h{i}.example")).collect(),
            ..Parsed::default()
        };
        let first = Loaded::verify(&Loaded::default(), &parsed(10), Validators::default()).unwrap();
        assert!(Loaded::verify(&first, &parsed(5), Validators::default()).is_ok());
        assert!(matches!(
            Loaded::verify(&first, &parsed(4), Validators::default()),
            Err(Error::Shrank {
                before: 10,
                after: 4
            })
        ));
        assert!(matches!(
            Loaded::verify(&first, &parsed(0), Validators::default()),
            Err(Error::Empty { .. })
        ));
    }
}

//! A feed in memory: the 64-bit hashes of its hosts and of its URLs, each sorted, so a lookup
//! is a binary search (about 20 probes in a million entries, well under a microsecond) and a
//! million entries take 8 MB, not the ~80 MB a set of their strings would. Two different
//! strings share a hash one time in 2^64 per pair: across a million entries and a target's few
//! lookups, one refusal by mistake in about 10^13 creates, which an operator's release answers.

use crate::normalize;
use crate::parse::Parsed;
use std::hash::BuildHasher;

/// Fixed, so that two loads of one feed index alike (the shrink check compares counts only).
const SEED: u64 = 0x7368_6f72_746c_696e;

fn hash(text: &str) -> u64 {
    foldhash::quality::FixedState::with_seed(SEED).hash_one(text)
}

#[derive(Debug, Default)]
pub struct Index {
    hosts: Box<[u64]>,
    urls: Box<[u64]>,
}

/// What a target matched: the feed's entry in its normalised spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hit {
    Host(String),
    Url(String),
}

impl Hit {
    pub fn entry(&self) -> &str {
        match self {
            Hit::Host(entry) | Hit::Url(entry) => entry,
        }
    }
}

impl Index {
    pub fn new(parsed: &Parsed) -> Self {
        let sorted = |entries: &[String]| {
            let mut hashes: Vec<u64> = entries.iter().map(|entry| hash(entry)).collect();
            hashes.sort_unstable();
            hashes.dedup();
            hashes.into_boxed_slice()
        };
        Self {
            hosts: sorted(&parsed.hosts),
            urls: sorted(&parsed.urls),
        }
    }

    /// Distinct entries.
    pub fn len(&self) -> usize {
        self.hosts.len() + self.urls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held.
    pub fn memory(&self) -> usize {
        self.len() * std::mem::size_of::<u64>()
    }

    /// `url` (normalised, [`normalize::url`]) itself, else its host or the nearest listed parent.
    pub fn lookup(&self, url: &str, host: &str) -> Option<Hit> {
        if self.urls.binary_search(&hash(url)).is_ok() {
            return Some(Hit::Url(url.to_owned()));
        }
        self.lookup_host(host)
            .map(|entry| Hit::Host(entry.to_owned()))
    }

    /// `host` or the nearest of its parents that the feed lists.
    pub fn lookup_host<'h>(&self, host: &'h str) -> Option<&'h str> {
        if self.hosts.is_empty() {
            return None;
        }
        normalize::self_and_parents(host).find(|name| self.hosts.binary_search(&hash(name)).is_ok())
    }

    /// Whether the feed lists `entry` (a normalised host or URL), as its own entry: what a
    /// quarantine's release compares against to know the entry is still there.
    pub fn contains(&self, hit: &Hit) -> bool {
        match hit {
            Hit::Host(host) => self.hosts.binary_search(&hash(host)).is_ok(),
            Hit::Url(url) => self.urls.binary_search(&hash(url)).is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_their_subdomains_and_urls_exactly() {
        let index = Index::new(&Parsed {
            hosts: vec!["evil.example".into()],
            urls: vec!["https://shared.example/phish".into()],
            errors: 0,
        });
        let hit = |url: &str| index.lookup(url, &normalize::host_of(url).unwrap());
        assert_eq!(
            hit("https://a.b.evil.example/x"),
            Some(Hit::Host("evil.example".into()))
        );
        assert_eq!(hit("https://notevil.example/"), None);
        assert_eq!(
            hit("https://shared.example/phish"),
            Some(Hit::Url("https://shared.example/phish".into()))
        );
        assert_eq!(hit("https://shared.example/other"), None);
        assert_eq!(index.len(), 2);
    }
}

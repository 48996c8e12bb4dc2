//! Which short domain a new link is issued on. The issuing base (nginx's `$shortlink_public_base`,
//! sent as `X-Shortlink-Public-Base`) may list several bases with weights:
//!
//! ```text
//! https://s1.example weight=3 https://s2.example weight=1 https://s3.example draining spread=campaign
//! ```
//!
//! A URL starts an entry; `weight=N` (1 to 1000, default 1) and `draining` (still in the pool,
//! never issued on) qualify the entry before them; `spread=link` (default) or `spread=campaign`
//! applies to the whole list. The domain is a weighted pick by a hash of the link's code, or of
//! its campaign under `spread=campaign` (one domain per campaign): a pure function of the link
//! and the list, so reads show the short URL the create returned while the list is unchanged, and
//! a carrier block on one domain hits only its share of a campaign. Every code answers on every
//! pool domain whatever its pick: the pick only decides which URL is handed out.
//!
//! **Workspaces** (issue 53): the list may hold one list per workspace, each after `[<slug>]`;
//! what comes before the first such header is the default workspace's. A workspace's links are
//! issued on its own list (on its own domains, the ones nginx maps to it), a workspace with none
//! gets no short URL rather than one on another's domain:
//!
//! ```text
//! https://s1.example [brand-a] https://a1.brand-a.example weight=2 https://a2.brand-a.example
//! ```

use sha2::{Digest, Sha256};
use shortlink_model::validate;

/// The workspace of the list's unlabelled part, and of a pool domain no section names.
pub const DEFAULT_WORKSPACE: &str = "default";

/// Highest weight: keeps the sum far from overflow and the list readable.
pub const MAX_WEIGHT: u32 = 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuingBase {
    /// Normalised base URL, without a trailing slash.
    pub url: String,
    pub weight: u32,
    pub draining: bool,
}

/// What a link's domain is picked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    #[default]
    Link,
    Campaign,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuingBases {
    pub bases: Vec<IssuingBase>,
    pub spread: Spread,
}

/// The issuing lists of every workspace, by slug (`default` for the unlabelled part).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkspaceBases {
    lists: Vec<(String, IssuingBases)>,
}

impl WorkspaceBases {
    /// Parses a list that may hold `[<slug>]` sections; the error names the section's problem.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut lists = Vec::new();
        let mut slug = DEFAULT_WORKSPACE.to_owned();
        let mut section = String::new();
        let mut flush = |slug: &str, section: &mut String| -> Result<(), String> {
            if section.trim().is_empty() && slug == DEFAULT_WORKSPACE {
                return Ok(());
            }
            let bases = IssuingBases::parse(section).map_err(|reason| match slug {
                DEFAULT_WORKSPACE => reason,
                _ => format!("{reason} (in the [{slug}] list)"),
            })?;
            lists.push((slug.to_owned(), bases));
            section.clear();
            Ok(())
        };
        for token in raw.split_ascii_whitespace() {
            match token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                Some(next) => {
                    flush(&slug, &mut section)?;
                    slug = next.to_owned();
                }
                None => {
                    section.push_str(token);
                    section.push(' ');
                }
            }
        }
        flush(&slug, &mut section)?;
        let mut seen = std::collections::HashSet::new();
        if let Some((twice, _)) = lists.iter().find(|(slug, _)| !seen.insert(slug.clone())) {
            return Err(format!("lists [{twice}] twice"));
        }
        // A domain belongs to the workspace whose section names it: in two, it would be both
        // brands' (its health shown to each), so the list is as malformed as one naming a base
        // twice.
        let mut owners: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
        for (slug, bases) in &lists {
            for host in bases.hosts() {
                match owners.get(host.as_str()) {
                    Some(first) if first != slug => {
                        return Err(format!("names {host} in [{first}] and in [{slug}]"));
                    }
                    _ => {
                        owners.insert(host, slug);
                    }
                }
            }
        }
        Ok(Self { lists })
    }

    /// Each domain the lists name with the workspace whose section names it (draining ones
    /// included: a retired domain stays its brand's while it is in its section).
    pub fn owners(&self) -> impl Iterator<Item = (String, &str)> + '_ {
        (self.lists.iter())
            .flat_map(|(slug, bases)| bases.hosts().map(|host| (host, slug.as_str())))
    }

    /// The list of the workspace `slug`, if the configuration gives it one.
    pub fn of(&self, slug: &str) -> Option<&IssuingBases> {
        (self.lists.iter()).find_map(|(name, bases)| (name == slug).then_some(bases))
    }

    /// Every list's hosts (the domain health job checks them all).
    pub fn hosts(&self) -> impl Iterator<Item = String> + '_ {
        self.lists.iter().flat_map(|(_, bases)| bases.hosts())
    }
}

impl IssuingBases {
    /// Parses the list; the error says what is wrong, for a 400 naming the header.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut bases: Vec<IssuingBase> = Vec::new();
        let mut spread = None;
        let mut weighted = false;
        for token in raw.split_ascii_whitespace() {
            if token.contains("://") {
                let url =
                    validate::public_base(token).map_err(|e| format!("has {token:?}: {e}"))?;
                if bases.iter().any(|b| b.url == url) {
                    return Err(format!("lists {url:?} twice"));
                }
                bases.push(IssuingBase {
                    url,
                    weight: 1,
                    draining: false,
                });
                weighted = false;
                continue;
            }
            if let Some(value) = token.strip_prefix("spread=") {
                if spread.is_some() {
                    return Err("has spread= twice".into());
                }
                spread = Some(match value {
                    "link" => Spread::Link,
                    "campaign" => Spread::Campaign,
                    _ => return Err(format!("has {token:?}; spread is link or campaign")),
                });
                continue;
            }
            let Some(base) = bases.last_mut() else {
                return Err(format!("has {token:?} before any base URL"));
            };
            if token == "draining" {
                base.draining = true;
            } else if let Some(value) = token.strip_prefix("weight=") {
                let weight = value
                    .parse::<u32>()
                    .ok()
                    .filter(|w| (1..=MAX_WEIGHT).contains(w))
                    .ok_or_else(|| {
                        format!("has {token:?}; a weight is a whole number from 1 to {MAX_WEIGHT}")
                    })?;
                if weighted {
                    return Err(format!("gives {} two weights", base.url));
                }
                base.weight = weight;
                weighted = true;
            } else {
                return Err(format!(
                    "has {token:?}; expected a base URL, weight=N, draining or spread="
                ));
            }
        }
        if bases.is_empty() {
            return Err("names no base URL".into());
        }
        if bases.iter().all(|b| b.draining) {
            return Err("has every base draining: no domain to issue on".into());
        }
        Ok(Self {
            bases,
            spread: spread.unwrap_or_default(),
        })
    }

    /// One base, as `--public-base-url` gives it.
    /// The shortest base new links may go to, alone (draining ones are never picked): the
    /// composer's way to keep a message as short as the pool allows, whatever the weights say.
    pub fn shortest(&self) -> Self {
        match (self.bases.iter())
            .filter(|base| !base.draining)
            .min_by_key(|base| base.url.len())
        {
            Some(base) => Self::single(base.url.clone()),
            None => self.clone(),
        }
    }

    pub fn single(url: String) -> Self {
        Self {
            bases: vec![IssuingBase {
                url,
                weight: 1,
                draining: false,
            }],
            spread: Spread::Link,
        }
    }

    /// The host names of the bases, draining ones included (still in the pool).
    pub fn hosts(&self) -> impl Iterator<Item = String> + '_ {
        self.bases.iter().filter_map(|base| {
            url::Url::parse(&base.url)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
        })
    }

    /// The base a link is issued on: a weighted pick among the bases not draining.
    pub fn pick(&self, code: &str, campaign: Option<&str>) -> &str {
        let key = match (self.spread, campaign) {
            (Spread::Campaign, Some(campaign)) => campaign,
            _ => code,
        };
        let live = || self.bases.iter().filter(|b| !b.draining);
        let total: u64 = live().map(|b| u64::from(b.weight)).sum();
        let digest = Sha256::digest(key.as_bytes());
        let mut point = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) % total.max(1);
        for base in live() {
            let weight = u64::from(base.weight);
            if point < weight {
                return &base.url;
            }
            point -= weight;
        }
        // Unreachable with a parsed list (at least one base is live); the first base is sane.
        &self.bases[0].url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workspace_has_its_own_list() {
        let lists = WorkspaceBases::parse(
            "https://s1.example [brand-a] https://a1.brand-a.example weight=2 \
             https://a2.brand-a.example [brand-b] https://b.example spread=campaign",
        )
        .unwrap();
        let urls = |slug| -> Vec<String> {
            (lists.of(slug).unwrap().bases.iter())
                .map(|b| b.url.clone())
                .collect()
        };
        assert_eq!(urls("default"), ["https://s1.example"]);
        assert_eq!(
            urls("brand-a"),
            ["https://a1.brand-a.example", "https://a2.brand-a.example"]
        );
        assert_eq!(lists.of("brand-b").unwrap().spread, Spread::Campaign);
        assert!(lists.of("brand-c").is_none());
        assert_eq!(lists.hosts().count(), 4);
        // Without a default part the default has none; a plain list is the default's.
        assert!(WorkspaceBases::parse("[brand-a] https://a.example")
            .unwrap()
            .of("default")
            .is_none());
        assert_eq!(
            WorkspaceBases::parse("https://s.example")
                .unwrap()
                .of("default")
                .unwrap()
                .bases
                .len(),
            1
        );
        for bad in [
            "[brand-a]",
            "https://s.example [a] https://a.example [a] https://b.example",
        ] {
            assert!(WorkspaceBases::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_domain_is_the_workspace_whose_section_names_it_and_of_one_only() {
        let lists = WorkspaceBases::parse(
            "https://s1.example [brand-a] https://a1.example https://a0.example draining \
             [brand-b] https://b1.example",
        )
        .unwrap();
        let owners: Vec<(String, &str)> = lists.owners().collect();
        assert_eq!(
            owners,
            [
                ("s1.example".to_owned(), "default"),
                ("a1.example".to_owned(), "brand-a"),
                ("a0.example".to_owned(), "brand-a"),
                ("b1.example".to_owned(), "brand-b"),
            ]
        );
        for (raw, needle) in [
            (
                "https://s1.example [brand-a] https://a1.example [brand-b] http://a1.example:8080",
                "names a1.example in [brand-a] and in [brand-b]",
            ),
            (
                "https://s1.example [brand-a] https://s1.example/a",
                "names s1.example in [default] and in [brand-a]",
            ),
        ] {
            let err = WorkspaceBases::parse(raw).unwrap_err();
            assert!(err.contains(needle), "{raw:?}: {err}");
        }
        // The same domain twice in one section stays a matter for that section's own checks.
        assert!(WorkspaceBases::parse("[brand-a] https://a1.example http://a1.example").is_ok());
    }

    #[test]
    fn parses_weights_draining_and_spread() {
        let list = IssuingBases::parse(
            " https://S1.example/ weight=3 https://s2.example https://s3.example draining spread=campaign ",
        )
        .unwrap();
        assert_eq!(list.spread, Spread::Campaign);
        assert_eq!(
            list.bases,
            vec![
                IssuingBase {
                    url: "https://s1.example".into(),
                    weight: 3,
                    draining: false
                },
                IssuingBase {
                    url: "https://s2.example".into(),
                    weight: 1,
                    draining: false
                },
                IssuingBase {
                    url: "https://s3.example".into(),
                    weight: 1,
                    draining: true
                },
            ]
        );
        assert_eq!(
            IssuingBases::parse("https://s.example").unwrap(),
            IssuingBases::single("https://s.example".into())
        );
    }

    #[test]
    fn refuses_malformed_lists() {
        for (raw, needle) in [
            ("", "no base URL"),
            ("weight=2 https://s.example", "before any base URL"),
            ("https://s.example weight=0", "from 1 to 1000"),
            ("https://s.example weight=x", "from 1 to 1000"),
            ("https://s.example weight=1001", "from 1 to 1000"),
            ("https://s.example weight=2 weight=3", "two weights"),
            ("https://s.example heavy", "expected a base URL"),
            ("https://s.example draining", "every base draining"),
            ("https://s.example https://s.example/", "twice"),
            (
                "https://s.example spread=domain",
                "spread is link or campaign",
            ),
            ("ftp://s.example", "http or https"),
        ] {
            let err = IssuingBases::parse(raw).unwrap_err();
            assert!(err.contains(needle), "{raw:?}: {err}");
        }
    }

    #[test]
    fn picks_by_weight_never_draining_and_one_per_campaign() {
        let list = IssuingBases::parse(
            "https://a.example weight=3 https://b.example https://c.example draining",
        )
        .unwrap();
        let picks: Vec<&str> = (0..10_000)
            .map(|i| list.pick(&format!("code{i}"), None))
            .collect();
        let a = picks.iter().filter(|p| **p == "https://a.example").count();
        assert!((7300..=7700).contains(&a), "{a}");
        assert!(!picks.contains(&"https://c.example"));
        let by_campaign = IssuingBases {
            spread: Spread::Campaign,
            ..list
        };
        let first = by_campaign.pick("x1", Some("spring"));
        assert!((0..100).all(|i| by_campaign.pick(&format!("x{i}"), Some("spring")) == first));
    }

    #[test]
    fn hosts_are_every_base_draining_included() {
        let list = IssuingBases::parse(
            "https://a.example/go weight=3 http://b.example:8080 https://c.example draining",
        )
        .unwrap();
        let hosts: Vec<String> = list.hosts().collect();
        assert_eq!(hosts, ["a.example", "b.example", "c.example"]);
    }
}

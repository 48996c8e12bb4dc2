//! Which short domain a new link is issued on. The issuing base (nginx's `$shortlink_public_base`,
//! sent as `X-Shortlink-Public-Base`) may list several bases with weights:
//!
//! ```text
//! https://s1.example weight=3 https://s2.example weight=1 https://s3.example draining spread=campaign
//! ```
//!
//! A URL starts an entry; `weight=N` (1 to 1000, default 1), `draining` (still in the pool,
//! never issued on) and `standby` (issued on only in place of a drained domain, issue 55)
//! qualify the entry before them; `spread=link` (default) or `spread=campaign`
//! applies to the whole list. The domain is a weighted pick by a hash of the link's code, or of
//! its campaign under `spread=campaign` (one domain per campaign): a pure function of the link
//! and the list, so reads show the short URL the create returned while the list is unchanged, and
//! a carrier block on one domain hits only its share of a campaign. Every code answers on every
//! pool domain whatever its pick: the pick only decides which URL is handed out.
//!
//! **Drains** (issue 55, [`crate::drain`]): a domain the health job (or an operator) drained is
//! skipped. The links whose pick is a drained domain go, in the drained domains' list order, to
//! the standbys not drained in weight order (one standby per drained domain), then spread by
//! weight over the active domains still issuing; only the drained domain's share moves, so a
//! link on a healthy domain keeps its short URL. With every domain drained issuing goes on, on
//! the healthiest, and says so ([`Pick::degraded`]).
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
    /// Its host name, the key of its health and drain state.
    pub host: String,
    pub weight: u32,
    pub draining: bool,
    /// Takes links only in place of a drained active domain.
    pub standby: bool,
}

impl IssuingBase {
    fn new(url: String) -> Self {
        let host = url::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        Self {
            url,
            host,
            weight: 1,
            draining: false,
            standby: false,
        }
    }

    /// Issued on in normal times: neither draining nor a standby.
    fn active(&self) -> bool {
        !self.draining && !self.standby
    }
}

/// Where a link is issued, and whether only because every domain is drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick<'a> {
    pub url: &'a str,
    pub host: &'a str,
    /// Every domain of the list is drained: issued on the healthiest all the same.
    pub degraded: bool,
}

/// What the pick needs to know of the domains' drain and health (see [`crate::drain::Snapshot`]).
pub trait DrainView {
    fn is_drained(&self, host: &str) -> bool;
    /// Lower is healthier: the order the degraded pick prefers.
    fn severity(&self, host: &str) -> u8;
}

/// Nothing drained: the pick of a list as configured.
pub struct NoDrains;

impl DrainView for NoDrains {
    fn is_drained(&self, _: &str) -> bool {
        false
    }
    fn severity(&self, _: &str) -> u8 {
        0
    }
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

    /// Each workspace's slug and list.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &IssuingBases)> + '_ {
        self.lists
            .iter()
            .map(|(slug, bases)| (slug.as_str(), bases))
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
                bases.push(IssuingBase::new(url));
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
            } else if token == "standby" {
                base.standby = true;
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
                    "has {token:?}; expected a base URL, weight=N, draining, standby or spread="
                ));
            }
        }
        if bases.is_empty() {
            return Err("names no base URL".into());
        }
        if bases.iter().all(|b| b.draining) {
            return Err("has every base draining: no domain to issue on".into());
        }
        if !bases.iter().any(IssuingBase::active) {
            return Err("has only standby or draining bases: no domain to issue on".into());
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
        self.shortest_live(&NoDrains)
    }

    /// [`Self::shortest`] among the active bases not drained; with none, among the standbys not
    /// drained; with none either, the whole list (its pick says it is degraded).
    pub fn shortest_live(&self, drains: &impl DrainView) -> Self {
        let live = |standby: bool| {
            (self.bases.iter())
                .filter(move |b| !b.draining && b.standby == standby && !drains.is_drained(&b.host))
                .min_by_key(|base| base.url.len())
        };
        match live(false).or_else(|| live(true)) {
            Some(base) => Self::single(base.url.clone()),
            None => self.clone(),
        }
    }

    /// The longest base a link may be issued on now (the draining and the drained left out, a
    /// standby kept: it may stand in): the bound on a message's length, and the stand-in of a
    /// dry run. With every domain drained, the longest of those issuing anyway.
    pub fn longest_live(&self, drains: &impl DrainView) -> &str {
        let longest = |live: bool| {
            (self.bases.iter())
                .filter(move |b| !b.draining && (!live || !drains.is_drained(&b.host)))
                .map(|base| base.url.as_str())
                .max_by_key(|url| url.len())
        };
        longest(true).or_else(|| longest(false)).unwrap_or_default()
    }

    pub fn single(url: String) -> Self {
        Self {
            bases: vec![IssuingBase::new(url)],
            spread: Spread::Link,
        }
    }

    /// The host names of the bases, draining and standby ones included (in the pool).
    pub fn hosts(&self) -> impl Iterator<Item = String> + '_ {
        (self.bases.iter())
            .filter(|base| !base.host.is_empty())
            .map(|base| base.host.clone())
    }

    /// The base a link is issued on, nothing drained: a weighted pick among the active bases.
    pub fn pick(&self, code: &str, campaign: Option<&str>) -> &str {
        self.pick_live(code, campaign, &NoDrains).url
    }

    /// The base a link is issued on with `drains` as they are now (module documentation).
    pub fn pick_live(
        &self,
        code: &str,
        campaign: Option<&str>,
        drains: &impl DrainView,
    ) -> Pick<'_> {
        let key = match (self.spread, campaign) {
            (Spread::Campaign, Some(campaign)) => campaign,
            _ => code,
        };
        let digest = Sha256::digest(key.as_bytes());
        let point = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        let issuing = |base: &&IssuingBase| !drains.is_drained(&base.host);
        let Some(first) = weighted(self.bases.iter().filter(|b| b.active()), point) else {
            return self.healthiest(drains);
        };
        if issuing(&first) {
            return Pick::of(first, false);
        }
        // The drained domain's share, to the standby of its rank among the drained ones.
        let rank = (self.bases.iter())
            .filter(|b| b.active() && !issuing(b))
            .position(|b| b.url == first.url)
            .unwrap_or(0);
        let mut standbys: Vec<&IssuingBase> = (self.bases.iter())
            .filter(|b| b.standby && !b.draining)
            .filter(issuing)
            .collect();
        // Stable: equal weights keep the list's order.
        standbys.sort_by_key(|b| std::cmp::Reverse(b.weight));
        if let Some(standby) = standbys.get(rank) {
            return Pick::of(standby, false);
        }
        let active = self.bases.iter().filter(|b| b.active()).filter(issuing);
        if let Some(base) = weighted(active, point) {
            return Pick::of(base, false);
        }
        match weighted(standbys.into_iter(), point) {
            Some(base) => Pick::of(base, false),
            None => self.healthiest(drains),
        }
    }

    /// Every base drained: the least severe state's, the first in the list among equals
    /// (active bases before standbys).
    fn healthiest(&self, drains: &impl DrainView) -> Pick<'_> {
        let candidates = (self.bases.iter())
            .filter(|b| !b.draining)
            .min_by_key(|b| (drains.severity(&b.host), b.standby));
        // A parsed list has a base not draining; the first base is sane otherwise.
        Pick::of(candidates.unwrap_or(&self.bases[0]), true)
    }
}

impl<'a> Pick<'a> {
    fn of(base: &'a IssuingBase, degraded: bool) -> Self {
        Self {
            url: &base.url,
            host: &base.host,
            degraded,
        }
    }
}

/// A weighted pick among `bases` at `point` (a hash); `None` for no base.
fn weighted<'a>(
    bases: impl Iterator<Item = &'a IssuingBase> + Clone,
    point: u64,
) -> Option<&'a IssuingBase> {
    let total: u64 = bases.clone().map(|b| u64::from(b.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut point = point % total;
    for base in bases {
        let weight = u64::from(base.weight);
        if point < weight {
            return Some(base);
        }
        point -= weight;
    }
    None
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
    fn parses_weights_draining_standby_and_spread() {
        let list = IssuingBases::parse(
            " https://S1.example/ weight=3 https://s2.example https://s3.example draining \
             https://s9.example standby weight=2 spread=campaign ",
        )
        .unwrap();
        assert_eq!(list.spread, Spread::Campaign);
        let base = |url: &str, host: &str, weight, draining, standby| IssuingBase {
            url: url.into(),
            host: host.into(),
            weight,
            draining,
            standby,
        };
        assert_eq!(
            list.bases,
            vec![
                base("https://s1.example", "s1.example", 3, false, false),
                base("https://s2.example", "s2.example", 1, false, false),
                base("https://s3.example", "s3.example", 1, true, false),
                base("https://s9.example", "s9.example", 2, false, true),
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
            ("https://s.example standby", "only standby or draining"),
            (
                "https://s.example draining https://t.example standby",
                "only standby or draining",
            ),
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

    /// Drained hosts with a severity each (the rest healthy, 0).
    struct Drained(&'static [(&'static str, u8)]);

    impl DrainView for Drained {
        fn is_drained(&self, host: &str) -> bool {
            self.0.iter().any(|(h, _)| *h == host)
        }
        fn severity(&self, host: &str) -> u8 {
            (self.0.iter())
                .find(|(h, _)| *h == host)
                .map_or(0, |(_, s)| *s)
        }
    }

    fn hosts_picked(list: &IssuingBases, drains: &impl DrainView) -> HashMap<String, usize> {
        let mut picked = HashMap::new();
        for i in 0..10_000 {
            let pick = list.pick_live(&format!("code{i}"), None, drains);
            assert!(!pick.degraded, "{pick:?}");
            *picked.entry(pick.host.to_owned()).or_insert(0) += 1;
        }
        picked
    }

    use std::collections::HashMap;

    #[test]
    fn a_standby_takes_links_only_in_place_of_a_drained_domain() {
        let list = IssuingBases::parse(
            "https://a.example https://b.example https://s9.example standby \
             https://s8.example standby weight=5",
        )
        .unwrap();
        let normal = hosts_picked(&list, &NoDrains);
        assert_eq!(
            normal.len(),
            2,
            "no standby while nothing is drained: {normal:?}"
        );
        // b drained: its share to the heaviest standby, a's links keep their domain.
        let picked = hosts_picked(&list, &Drained(&[("b.example", 3)]));
        assert_eq!(picked.get("a.example"), normal.get("a.example"));
        assert_eq!(picked.get("s8.example"), normal.get("b.example"));
        assert!(!picked.contains_key("b.example") && !picked.contains_key("s9.example"));
        for i in 0..1000 {
            let code = format!("code{i}");
            if list.pick(&code, None) == "https://a.example" {
                assert_eq!(
                    list.pick_live(&code, None, &Drained(&[("b.example", 3)]))
                        .url,
                    "https://a.example"
                );
            }
        }
        // Both actives drained: one standby each, in weight order.
        let picked = hosts_picked(&list, &Drained(&[("a.example", 3), ("b.example", 3)]));
        assert_eq!(picked.get("s8.example"), normal.get("a.example"));
        assert_eq!(picked.get("s9.example"), normal.get("b.example"));
    }

    #[test]
    fn a_drained_domains_weight_goes_to_the_others_without_a_standby() {
        let list =
            IssuingBases::parse("https://a.example weight=3 https://b.example https://c.example")
                .unwrap();
        let picked = hosts_picked(&list, &Drained(&[("a.example", 3)]));
        assert!(!picked.contains_key("a.example"), "{picked:?}");
        let (b, c) = (picked["b.example"], picked["c.example"]);
        assert!((4500..=5500).contains(&b) && b + c == 10_000, "{picked:?}");
        // The standby drained too: the actives left take it.
        let list =
            IssuingBases::parse("https://a.example https://b.example https://s.example standby")
                .unwrap();
        let picked = hosts_picked(&list, &Drained(&[("a.example", 3), ("s.example", 4)]));
        assert_eq!(picked.keys().collect::<Vec<_>>(), ["b.example"]);
    }

    #[test]
    fn every_domain_drained_issues_on_the_healthiest_and_says_so() {
        let list =
            IssuingBases::parse("https://a.example https://b.example https://s.example standby")
                .unwrap();
        let all = Drained(&[("a.example", 4), ("b.example", 3), ("s.example", 4)]);
        for i in 0..100 {
            let pick = list.pick_live(&format!("code{i}"), None, &all);
            assert_eq!((pick.host, pick.degraded), ("b.example", true));
        }
        assert_eq!(
            list.shortest_live(&Drained(&[("a.example", 3)])).bases[0].url,
            "https://b.example"
        );
    }
}

//! Every feed of the installation, the shorteners' list and the brands' look-alikes: the one
//! check a target meets ([`Threats::check`]), and the refresh that keeps the feeds current.
//!
//! Each sidecar loads its own copy from the sources: a feed is a public file, so fetching it
//! twice costs its host one conditional request per sidecar and refresh, and keeping it in this
//! process's memory is what lets a create ask it in microseconds. Shared in Redis or SQL it
//! would cost a round trip per create and a second copy to keep in step; the copies of two
//! sidecars differ at most for one refresh interval.

use crate::error::Error;
use crate::feed::{self, Loaded, Spec};
use crate::index::{Hit, Index};
use crate::lookalike;
use crate::normalize;
use crate::parse::Parsed;
use crate::reputation::TargetReputation;
use crate::source::{self, Fetched};
use metrics::{counter, gauge};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The shorteners a target may not point through (a nested short link hides the real target
/// from every filter, ours and the carriers'); `--threat-shorteners` adds to them.
pub const SHORTENERS: &[&str] = &[
    "bit.ly",
    "bitly.com",
    "tinyurl.com",
    "t.co",
    "goo.gl",
    "ow.ly",
    "is.gd",
    "v.gd",
    "buff.ly",
    "rebrand.ly",
    "cutt.ly",
    "shorturl.at",
    "rb.gy",
    "t.ly",
    "tiny.cc",
    "bl.ink",
    "short.io",
    "s.id",
    "lnkd.in",
    "trib.al",
    "qr.ae",
    "soo.gd",
    "clck.ru",
    "u.to",
    "shorte.st",
    "adf.ly",
    "tinu.be",
    "dub.sh",
    "kutt.it",
    "urlz.fr",
    "x.gd",
];

/// The feed name a refusal by the shorteners' list carries.
pub const SHORTENERS_FEED: &str = "shorteners";
/// The feed name a refusal as a brand's look-alike carries.
pub const LOOKALIKE_FEED: &str = "lookalike";

/// What a refresh changed in one feed's copy: the entries the new copy lists and the one
/// before did not (normalised hosts and URLs). What a quarantine sweep looks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedChange {
    pub feed: String,
    pub added_hosts: Vec<String>,
    pub added_urls: Vec<String>,
}

impl FeedChange {
    fn between(feed: &str, before: &Index, parsed: &Parsed) -> Self {
        let new = |entries: &[String], hit: fn(String) -> Hit| {
            (entries.iter())
                .filter(|entry| !before.contains(&hit((*entry).clone())))
                .cloned()
                .collect::<Vec<_>>()
        };
        let mut added_hosts = new(&parsed.hosts, Hit::Host);
        let mut added_urls = new(&parsed.urls, Hit::Url);
        for added in [&mut added_hosts, &mut added_urls] {
            added.sort_unstable();
            added.dedup();
        }
        Self {
            feed: feed.to_owned(),
            added_hosts,
            added_urls,
        }
    }
}

/// Why a target is refused: the feed that lists it and the entry it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub feed: String,
    pub entry: String,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub feeds: Vec<Spec>,
    pub refresh_every: Duration,
    pub max_bytes: u64,
    pub shorteners: Vec<String>,
    pub brand_hosts: Vec<String>,
}

struct Slot {
    spec: Spec,
    loaded: RwLock<Arc<Loaded>>,
    /// One refresh of a feed at a time.
    refreshing: tokio::sync::Mutex<()>,
}

pub struct Threats {
    slots: Vec<Slot>,
    shorteners: Index,
    brands: Vec<(String, String)>,
    reputation: Option<Arc<dyn TargetReputation>>,
    client: reqwest::Client,
    settings: Settings,
    /// The last refresh's outcome per feed, for the log and `/metrics`.
    last_errors: Mutex<Vec<Option<String>>>,
    /// What refreshes changed since [`Self::changes`] last took it, and its signal.
    pending: Mutex<Vec<FeedChange>>,
    changed: tokio::sync::Notify,
}

impl Threats {
    pub fn new(
        settings: Settings,
        client: reqwest::Client,
        reputation: Option<Arc<dyn TargetReputation>>,
    ) -> Self {
        let hosts: Vec<String> = (SHORTENERS.iter().map(|host| host.to_string()))
            .chain(settings.shorteners.iter().cloned())
            .filter_map(|host| normalize::host(&host))
            .collect();
        let shorteners = Index::new(&Parsed {
            hosts,
            ..Parsed::default()
        });
        let slots = (settings.feeds.iter())
            .map(|spec| Slot {
                spec: spec.clone(),
                loaded: RwLock::default(),
                refreshing: tokio::sync::Mutex::new(()),
            })
            .collect();
        Self {
            last_errors: Mutex::new(vec![None; settings.feeds.len()]),
            pending: Mutex::default(),
            changed: tokio::sync::Notify::new(),
            slots,
            shorteners,
            brands: lookalike::brands(&settings.brand_hosts),
            reputation,
            client,
            settings,
        }
    }

    /// Describes the metrics and gives each feed its series (once the process's recorder is
    /// installed: what is recorded before goes nowhere). A feed never loaded reads as loaded at
    /// 0: stale, so the alert names a feed that never came (one with no series would never fire).
    pub fn publish_metrics(&self) {
        describe();
        for slot in &self.slots {
            let feed = slot.spec.name.clone();
            let loaded = slot.current();
            if loaded.index.is_empty() {
                gauge!("shortlink_threat_feed_updated_timestamp_seconds", "feed" => feed.clone())
                    .set(0.0);
            }
            gauge!("shortlink_threat_feed_held_back", "feed" => feed.clone()).set(0.0);
            gauge!("shortlink_threat_feed_entries", "feed" => feed).set(loaded.index.len() as f64);
        }
        counter!("shortlink_threat_checks_total").increment(0);
    }

    /// Feeds, shorteners and look-alikes, in memory: what every create asks. `target` is a
    /// normalised target (`TargetUrl`, the url crate's serialisation).
    pub fn check(&self, target: &str) -> Option<Refusal> {
        counter!("shortlink_threat_checks_total").increment(1);
        let refusal = self.find(target);
        if let Some(refusal) = &refusal {
            counter!("shortlink_threat_refusals_total", "feed" => refusal.feed.clone())
                .increment(1);
        }
        refusal
    }

    fn find(&self, target: &str) -> Option<Refusal> {
        let (url, host) = normalize::serialized_parts(target)?;
        let refusal = |feed: &str, entry: &str| Refusal {
            feed: feed.to_owned(),
            entry: entry.to_owned(),
        };
        for slot in &self.slots {
            let loaded = slot.current();
            if let Some(hit) = loaded.index.lookup(url, host) {
                return Some(refusal(&slot.spec.name, hit.entry()));
            }
        }
        if let Some(entry) = self.shorteners.lookup_host(host) {
            return Some(refusal(SHORTENERS_FEED, entry));
        }
        lookalike::imitated(host, &self.brands).map(|brand| refusal(LOOKALIKE_FEED, brand))
    }

    /// [`Self::check`], then the commercial lookup when one is configured.
    pub async fn screen(&self, target: &str) -> Option<Refusal> {
        if let Some(refusal) = self.check(target) {
            return Some(refusal);
        }
        let reputation = self.reputation.as_ref()?;
        match reputation.lookup(target).await {
            Ok(Some(threat)) => {
                counter!("shortlink_threat_refusals_total", "feed" => reputation.name().to_owned())
                    .increment(1);
                Some(Refusal {
                    feed: reputation.name().to_owned(),
                    entry: threat,
                })
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "reputation lookup failed: the target was let through");
                None
            }
        }
    }

    /// Which feed lists `target` and by which entry, the feeds only (no shorteners, look-alikes
    /// or commercial lookup: what a quarantine after the fact follows).
    pub fn listed(&self, target: &str) -> Option<Refusal> {
        let (url, host) = normalize::serialized_parts(target)?;
        self.slots.iter().find_map(|slot| {
            let hit = slot.current().index.lookup(url, host)?;
            Some(Refusal {
                feed: slot.spec.name.clone(),
                entry: hit.entry().to_owned(),
            })
        })
    }

    /// Whether feed `feed` still lists `entry` as it did (what a quarantine's release holds to).
    pub fn lists(&self, feed: &str, entry: &str) -> bool {
        let Some(slot) = self.slots.iter().find(|slot| slot.spec.name == feed) else {
            return false;
        };
        let hit = match normalize::url(entry).filter(|_| entry.contains("://")) {
            Some(url) => Hit::Url(url),
            None => Hit::Host(entry.to_owned()),
        };
        slot.current().index.contains(&hit)
    }

    /// The feeds' names and their entries in memory.
    pub fn feeds(&self) -> Vec<(String, usize)> {
        (self.slots.iter())
            .map(|slot| (slot.spec.name.clone(), slot.current().index.len()))
            .collect()
    }

    /// Fetches every feed that changed and swaps in its new copy if it passes the checks.
    /// Returns the names of the feeds whose copy changed.
    pub async fn refresh(&self) -> Vec<String> {
        (self.refresh_changes().await.into_iter())
            .map(|change| change.feed)
            .collect()
    }

    /// What the refreshes changed since the last call (the first load's included), waiting
    /// for a change when there is none: what the quarantine sweep follows.
    pub async fn changes(&self) -> Vec<FeedChange> {
        loop {
            let taken =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            // A change signalled since the take left its permit: this returns at once.
            self.changed.notified().await;
        }
    }

    /// [`Self::refresh`], saying what each changed copy added.
    pub async fn refresh_changes(&self) -> Vec<FeedChange> {
        let mut changed = Vec::new();
        for (at, slot) in self.slots.iter().enumerate() {
            let outcome = self.refresh_one(slot).await;
            let error = outcome.as_ref().err().map(ToString::to_string);
            if let Some(error) = &error {
                tracing::warn!(feed = slot.spec.name, source = %slot.spec.source, %error, "threat feed not refreshed");
            }
            gauge!("shortlink_threat_feed_held_back", "feed" => slot.spec.name.clone()).set(
                f64::from(u8::from(matches!(outcome, Err(Error::Shrank { .. })))),
            );
            if let Ok(Some(change)) = outcome {
                changed.push(change);
            }
            if let Ok(mut errors) = self.last_errors.lock() {
                errors[at] = error;
            }
        }
        if !changed.is_empty() {
            (self.pending.lock().unwrap_or_else(|e| e.into_inner()))
                .extend(changed.iter().cloned());
            self.changed.notify_one();
        }
        changed
    }

    async fn refresh_one(&self, slot: &Slot) -> Result<Option<FeedChange>, Error> {
        let _one = slot.refreshing.lock().await;
        let current = slot.current();
        let max_bytes = self.settings.max_bytes;
        let fetched = source::fetch(
            &self.client,
            &slot.spec.source,
            &current.validators,
            max_bytes,
        );
        let name = slot.spec.name.clone();
        let updated = |name: String| {
            gauge!("shortlink_threat_feed_updated_timestamp_seconds", "feed" => name)
                .set(unix_seconds(SystemTime::now()));
        };
        let (body, validators) = match fetched.await? {
            Fetched::Body(body, validators) => (body, validators),
            // The copy is as current as its source: its age starts again.
            Fetched::NotModified => {
                updated(name);
                return Ok(None);
            }
        };
        let spec = slot.spec.clone();
        // Parsing and sorting a million entries is a few hundred milliseconds of CPU.
        let (loaded, change) = tokio::task::spawn_blocking(move || {
            let parsed = feed::read(&spec, &body);
            let loaded = Loaded::verify(&current, &parsed, validators)?;
            Ok::<_, Error>((
                loaded,
                FeedChange::between(&spec.name, &current.index, &parsed),
            ))
        })
        .await
        .map_err(|_| Error::Panicked)??;
        gauge!("shortlink_threat_feed_entries", "feed" => name.clone())
            .set(loaded.index.len() as f64);
        gauge!("shortlink_threat_feed_parse_errors", "feed" => name.clone())
            .set(loaded.errors as f64);
        *slot.loaded.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(loaded);
        updated(name);
        Ok(Some(change))
    }

    /// Refreshes every `--threat-refresh`, from one interval after now, until dropped.
    pub async fn run(self: Arc<Self>) {
        let period = self.settings.refresh_every.max(Duration::from_secs(1));
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.refresh().await;
        }
    }
}

impl Slot {
    fn current(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The families' help texts on `/metrics`.
fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(
        "shortlink_threat_checks_total",
        "New link targets checked against the threat feeds"
    );
    describe_counter!(
        "shortlink_threat_refusals_total",
        "New link targets refused, by the feed that lists them"
    );
    describe_gauge!(
        "shortlink_threat_feed_entries",
        "Distinct entries of the threat feed's copy in use"
    );
    describe_gauge!(
        "shortlink_threat_feed_parse_errors",
        "Lines of the threat feed's copy in use that could not be read"
    );
    describe_gauge!(
        "shortlink_threat_feed_held_back",
        "1 while the feed's newest copy is held back for shrinking by more than half"
    );
    describe_gauge!(
        "shortlink_threat_feed_updated_timestamp_seconds",
        Unit::Seconds,
        "When the feed's source last answered (a new copy or not modified); 0: never"
    );
}

fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

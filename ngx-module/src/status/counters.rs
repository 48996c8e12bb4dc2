//! The counters every worker adds to, one atomic each in the shared zone, and their names on the
//! status page. Below both the page (`status.rs`) and its Prometheus form.

use std::sync::atomic::{AtomicU64, Ordering};

/// Every counter, in the order the status page prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Requests that reached a `shortlink on` location.
    Requests,
    /// 301/302/307/308 answers.
    Redirects,
    /// Every 404 the module answered, whatever the reason (the next three are subsets).
    NotFound,
    Gone,
    /// "Not yet" pages: clicks before a link's `valid_since`.
    NotYet,
    /// Redirects a click-time rule chose (a subset of `Redirects`).
    RuleRedirects,
    /// Password pages shown (a protected link clicked without its password).
    PasswordPrompts,
    /// Password forms refused: a wrong password, or too many attempts.
    PasswordRejects,
    /// Preview cards answered to link preview fetchers (instead of a redirect).
    PreviewCards,
    /// Generated-shape codes with a wrong check character.
    CheckRejects,
    /// No code in the path, or a code of no known shape.
    Invalid,
    /// Hosts outside `shortlink_pool`.
    HostRejects,
    CacheHits,
    /// Lookups that had to ask Redis.
    CacheMisses,
    /// Redis unreachable, closed, protocol error, error reply or unreadable value.
    RedisErrors,
    RedisTimeouts,
    /// Lookups that found neither the link nor the projection marker (Redis lost its data).
    ProjectionMissing,
    /// Lookups that found no link while the projection marker did not vouch for this module's
    /// code scheme (code secret, length or check character differ from the sidecar's): sent to
    /// the fallback (or 503) instead of 404.
    SchemeMismatch,
    Fallbacks,
    /// 503 answers (Redis failed and no fallback).
    Unavailable,
    /// Visit events made (tracking on, redirect or 410 answered).
    EventsQueued,
    /// Events appended to a Redis connection's output (at once or from the spool).
    EventsSent,
    /// Events Redis answered with an error, or whose connection broke before the reply (they
    /// may or may not have been stored).
    EventsFailed,
    /// Events thrown away: spool full, or still spooled when the worker exited.
    EventsDropped,
    /// Gauge: events spooled now, waiting for Redis.
    EventsBuffered,
    /// Cluster: `-MOVED` and `-ASK` redirections followed by lookups and visit batches.
    ClusterRedirects,
    /// Cluster: lookups that failed on the cluster's account (`-TRYAGAIN`, `-CLUSTERDOWN`, a slot
    /// with no owner, too many redirections, a node unreachable); they went to the fallback. Also
    /// visit batches bounced between nodes that disagree on a slot's owner (they wait, not lost).
    ClusterFailures,
    /// Cluster: slot maps read (`CLUSTER SHARDS`), whether or not they changed anything.
    ClusterMapReads,
    /// Cluster: changes of a worker's slot map (each drops that worker's cache).
    ClusterMapChanges,
    /// Gauge: primaries serving slots in the slot map a worker read last.
    ClusterPrimaries,
    /// Cluster: visit events in batches a node redirected (`-MOVED`, `-ASK`), sent again to the
    /// node named instead of counted failed.
    EventsRerouted,
    /// Lookups of codes only `shortlink_imported_codes` sends to Redis (no shape of ours, or a
    /// wrong check character): a subset of `CacheMisses`.
    ImportedLookups,
    /// Gauge: primaries whose slots the worker reads from a replica in its zone
    /// (`read_replicas=`), in the slot map it read last.
    ClusterReplicasRead,
    /// Requests whose path was no code but the code before its trailing punctuation
    /// (`/abc1234.`, `/abc1234%E3%80%82`), answered as that code with a redirect, 410 or card.
    Recovered,
    /// Orphan events not queued: past the worker's `shortlink_orphans_per_second` in their
    /// second (a flood of bogus requests is counted here, not recorded one by one).
    OrphansUnrecorded,
    /// 404s and 410s answered with a not-found redirect instead (a subset of `NotFound` and
    /// `Gone`; `crate::not_found`).
    NotFoundRedirects,
}

pub(super) const COUNT: usize = 36;

pub(super) const NAMES: [&str; COUNT] = [
    "requests",
    "redirects",
    "not_found",
    "gone",
    "not_yet",
    "rule_redirects",
    "password_prompts",
    "password_rejects",
    "preview_cards",
    "check_rejects",
    "invalid",
    "host_rejects",
    "cache_hits",
    "cache_misses",
    "redis_errors",
    "redis_timeouts",
    "projection_missing",
    "scheme_mismatch",
    "fallbacks",
    "unavailable",
    "events_queued",
    "events_sent",
    "events_failed",
    "events_dropped",
    "events_buffered",
    "cluster_redirects",
    "cluster_failures",
    "cluster_map_reads",
    "cluster_map_changes",
    "cluster_primaries",
    "events_rerouted",
    "imported_lookups",
    "cluster_replicas_read",
    "recovered",
    "orphans_unrecorded",
    "not_found_redirects",
];

#[repr(C)]
pub struct Counters([AtomicU64; COUNT]);

impl Counters {
    pub fn bump(&self, counter: Counter) {
        // Relaxed: each counter is independent and only ever read as a snapshot.
        self.0[counter as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(&self, counter: Counter, n: u64) {
        self.0[counter as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// For gauges every worker sets to the same value (the last writer wins).
    pub fn set(&self, counter: Counter, n: u64) {
        self.0[counter as usize].store(n, Ordering::Relaxed);
    }

    /// For gauges: takes back what this worker added before.
    pub fn sub(&self, counter: Counter, n: u64) {
        self.0[counter as usize].fetch_sub(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> [u64; COUNT] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

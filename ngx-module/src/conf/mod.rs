//! Module configuration: what each directive stored, and the checks `nginx -t` runs once the
//! `http` block is read.

pub mod cluster;
pub mod commands;
pub mod ext;
pub mod parse;
mod shim;
mod slot;

use std::fmt;

use nginx_sys::{
    ngx_http_complex_value_t, ngx_int_t, ngx_shm_zone_t, ngx_str_t, ngx_uint_t, sockaddr, socklen_t,
};
use ngx::http::{Merge, MergeConfigError};
use shortcode::CodeScheme;

use crate::cache::{CacheConfig, Scope};
use crate::request::candidate::CodeCase;
use crate::request::host::PoolSet;
pub use parse::{AnswerPhase, SpoolLimits, DEFAULT_SPOOL};
use parse::{ArgError, CacheControl, RedisSpec};
use shortlink_wire::path::{Route, TrailingSlash};
use shortlink_wire::record::WorkspaceName;

/// Where Redis is, resolved by nginx at config time. The pointers are into the configuration
/// pool, which lives as long as the configuration.
#[derive(Clone, Copy)]
pub struct PeerAddr {
    pub sockaddr: *mut sockaddr,
    pub socklen: socklen_t,
    pub name: *mut ngx_str_t,
}

pub struct Redis {
    pub spec: RedisSpec,
    pub peer: PeerAddr,
}

/// `shortlink_redis_cluster`: the seed nodes asked for the slot map, the connection settings
/// every node gets, and the zone whose replicas this edge reads.
pub struct RedisCluster {
    pub spec: RedisSpec,
    pub seeds: Vec<PeerAddr>,
    pub read_replicas: Vec<shortlink_wire::rules::Cidr>,
}

/// `http`-level settings.
pub struct MainConf {
    pub secret: Option<Vec<u8>>,
    pub code_length: Option<u8>,
    pub code_check: Option<bool>,
    pub redis: Option<Redis>,
    /// Exclusive with `redis`.
    pub cluster: Option<RedisCluster>,
    /// `None`: not set; `Some(None)`: `shortlink_cache off`.
    pub cache: Option<Option<CacheConfig>>,
    /// `shortlink_cache_zone name size`: one cache shared by the workers.
    pub cache_zone: Option<parse::ZoneSpec>,
    /// `shortlink_cache_prefetch on`: ask for a request's place in the zone as it arrives
    /// (`crate::prefetch`). Off by default: it saved ~2% of worker CPU on a zone hit of a code
    /// not read lately and cost a hot or bogus request ~2% (bench/results/edge-cache-2026-11-27.md).
    pub cache_prefetch: Option<bool>,
    /// The zone nginx maps for `cache_zone`.
    pub cache_zone_shm: *mut ngx_shm_zone_t,
    /// Whether any location says `shortlink on` (only then are secret and Redis required).
    pub used: bool,
    /// Whether any location says `shortlink_status`.
    pub status: bool,
    /// Whether any level says `shortlink_answer_phase rewrite` (only then is the rewrite-phase
    /// handler added: `crate::phase`).
    pub rewrite_phase: bool,
    pub scheme: Option<CodeScheme>,
    /// What the projection marker must name for this module's check character to be trusted
    /// ([`crate::scheme::Expected`]).
    pub expected_scheme: crate::scheme::Expected,
    pub code_var_index: ngx_int_t,
    /// `$shortlink_click_token`: a capped click's token for the fallback (`crate::variables`).
    pub click_token_var_index: ngx_int_t,
    /// `$http_cookie`: every `Cookie` header of a request, joined (nginx 1.22 and 1.23+ keep
    /// them differently; the variable reads both).
    pub cookie_var_index: ngx_int_t,
    /// `$http_sec_fetch_mode`: read for a click's verdict over TLS only (`crate::request::signals`).
    pub fetch_mode_var_index: ngx_int_t,
    pub counters: *mut ngx_shm_zone_t,
    /// `shortlink_events_max_len`: the stream's `MAXLEN ~` cap.
    pub events_max_len: Option<u64>,
    /// `shortlink_events_buffer`: the per-worker spool while Redis is unreachable.
    pub events_buffer: Option<SpoolLimits>,
    /// `shortlink_events_flush`: how long visits may wait to leave as one stream entry.
    pub events_flush_ms: Option<u64>,
    /// `shortlink_orphans_per_second`: orphan events a worker queues at most each second.
    pub orphans_per_second: Option<u64>,
    /// `shortlink_cache_invalidation`: keep the cache coherent through Redis tracking.
    pub cache_invalidation: Option<bool>,
    /// Whether `shortlink_cache` gave `ttl=` (else the default depends on invalidation).
    pub cache_ttl_set: bool,
    /// `shortlink_geo`: the country database of click-time rules; without it no country
    /// condition holds.
    pub geo: Option<crate::geo::GeoDb>,
    /// `shortlink_hosting_networks`: the hosting/cloud address ranges a capped click's verdict
    /// reads (`crate::request::signals`); without it the network is not judged at click time.
    pub networks: Option<shortlink_wire::network::HostingRanges>,
    /// `shortlink_apple_app`, `shortlink_android_app`: the well-known files of the apps that
    /// open short links.
    pub app_links: crate::app_links::AppLinks,
}

impl Default for MainConf {
    fn default() -> Self {
        Self {
            secret: None,
            code_length: None,
            code_check: None,
            redis: None,
            cluster: None,
            cache: None,
            cache_zone: None,
            cache_prefetch: None,
            cache_zone_shm: std::ptr::null_mut(),
            used: false,
            status: false,
            rewrite_phase: false,
            scheme: None,
            expected_scheme: crate::scheme::Expected::default(),
            code_var_index: -1,
            click_token_var_index: -1,
            cookie_var_index: -1,
            fetch_mode_var_index: -1,
            counters: std::ptr::null_mut(),
            events_max_len: None,
            events_buffer: None,
            events_flush_ms: None,
            orphans_per_second: None,
            cache_invalidation: None,
            cache_ttl_set: false,
            geo: None,
            networks: None,
            app_links: Default::default(),
        }
    }
}

/// A config problem found after the whole `http` block was read.
#[derive(Debug)]
pub struct ConfError(String);

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfError {}

impl From<&str> for ConfError {
    fn from(why: &str) -> Self {
        ConfError(why.to_owned())
    }
}

/// With the check character off, the scheme's keys are never used: any secret will do.
const UNUSED_SECRET: [u8; shortcode::MIN_SECRET_LEN] = [0; shortcode::MIN_SECRET_LEN];

impl MainConf {
    /// Fills defaults and checks what only the whole `http` block can tell.
    pub fn finish(&mut self) -> Result<(), ConfError> {
        let check = self.code_check.unwrap_or(true);
        let length = self.code_length.unwrap_or(shortcode::DEFAULT_BODY_LEN);
        let secret = match (&self.secret, check) {
            (Some(secret), _) => secret.as_slice(),
            (None, false) => &UNUSED_SECRET,
            (None, true) if !self.used => &UNUSED_SECRET,
            (None, true) => return Err(ConfError(
                "\"shortlink_code_secret_file\" is required while \"shortlink_code_check\" is on"
                    .into(),
            )),
        };
        let scheme =
            CodeScheme::new(secret, length, check).map_err(|e| ConfError(e.to_string()))?;
        self.expected_scheme =
            crate::scheme::Expected::new(scheme.fingerprint(), self.secret.is_some());
        self.scheme = Some(scheme);
        if self.cache_zone.is_some() && self.cluster.is_some() {
            return Err(ConfError(
                "\"shortlink_cache_zone\" does not work with \"shortlink_redis_cluster\" yet \
                 (its invalidations arrive per primary): use the worker cache"
                    .into(),
            ));
        }
        if self.cache_zone.is_some() && self.cache == Some(None) {
            return Err(ConfError(
                "\"shortlink_cache_zone\" needs the cache: \"shortlink_cache off\" is set".into(),
            ));
        }
        if self.used && self.redis.is_none() && self.cluster.is_none() {
            return Err(ConfError(
                "\"shortlink_redis\" or \"shortlink_redis_cluster\" is required by \"shortlink on\""
                    .into(),
            ));
        }
        Ok(())
    }

    /// The longest a command written to Redis waits for its reply before its connection gives
    /// up on it and fails it: the connect timeout, then the read timeout.
    pub fn reply_bound_ms(&self) -> u64 {
        let spec = match (&self.redis, &self.cluster) {
            (Some(redis), _) => &redis.spec,
            (None, Some(cluster)) => &cluster.spec,
            (None, None) => return 0,
        };
        spec.connect_timeout_ms + spec.read_timeout_ms
    }

    pub fn cache_config(&self) -> Option<CacheConfig> {
        let mut config = self.cache.unwrap_or(Some(parse::DEFAULT_CACHE))?;
        if !self.cache_ttl_set && !self.cache_invalidation() {
            config.ttl_ms = parse::TTL_ONLY_DEFAULT_MS;
        }
        Some(config)
    }

    /// The shared cache zone, once nginx mapped it (in workers and the status page).
    pub fn cache_zone(&self) -> Option<crate::cache::zone::Zone> {
        // SAFETY: `cache_zone_shm` is null or the zone `add_cache_zone` declared with the
        // zone's own init; this configuration's cycle keeps it mapped.
        unsafe { crate::cache::zone::Zone::of(self.cache_zone_shm) }
    }

    pub fn cache_invalidation(&self) -> bool {
        self.cache_invalidation.unwrap_or(true)
    }

    pub fn events_max_len(&self) -> u64 {
        self.events_max_len.unwrap_or(DEFAULT_EVENTS_MAX_LEN)
    }

    pub fn events_spool(&self) -> SpoolLimits {
        self.events_buffer.unwrap_or(DEFAULT_SPOOL)
    }

    pub fn events_flush_ms(&self) -> u64 {
        self.events_flush_ms.unwrap_or(DEFAULT_EVENTS_FLUSH_MS)
    }

    pub fn orphans_per_second(&self) -> u64 {
        self.orphans_per_second
            .unwrap_or(DEFAULT_ORPHANS_PER_SECOND)
    }
}

/// A directive's value that holds variables, chosen at config time so that a request does the
/// least work: a lone variable is read without copying.
#[derive(Clone, Copy)]
pub enum Dynamic {
    /// The index of the single variable the directive names (`$shortlink_pool`).
    Variable(ngx_uint_t),
    /// Text mixing variables and literals, evaluated per request.
    Complex(*mut ngx_http_complex_value_t),
}

impl Dynamic {
    /// Tells this value apart from the configuration's others, for as long as the configuration
    /// lives: a variable's index is odd here, a compiled value's (aligned) address even.
    pub fn id(self) -> usize {
        match self {
            Dynamic::Variable(index) => index << 1 | 1,
            Dynamic::Complex(cv) => cv as usize,
        }
    }
}

/// Where `shortlink_pool` takes its names from: a fixed list is parsed once.
#[derive(Clone)]
pub enum PoolSource {
    Fixed(PoolSet),
    Dynamic(Dynamic),
}

/// Where `shortlink_workspace` takes the host's workspace from: a fixed name is checked once.
#[derive(Clone, Copy)]
pub enum WorkspaceSource {
    Fixed(WorkspaceName),
    Dynamic(Dynamic),
}

/// Location-level settings (also accepted at `http` and `server` level, inherited down).
#[derive(Default)]
pub struct LocConf {
    /// Set by `shortlink on` in this very location.
    pub route: Option<Route>,
    /// On a server's own configuration (the one a request has before its location is found):
    /// the route of the server's first `shortlink on` location, with which the zone's prefetch
    /// guesses a request's code as it arrives (`crate::prefetch`); `None`: the server has no
    /// such location and its requests skip the prefetch. Not inherited.
    pub server_route: Option<Route>,
    pub pool: Option<PoolSource>,
    /// `shortlink_workspace`: the workspace of the request's host; a code of another workspace
    /// answers as an unknown one. Unset: no check.
    pub workspace: Option<WorkspaceSource>,
    pub timeout_ms: Option<u64>,
    pub fallback: Option<Vec<u8>>,
    pub forward_query: Option<bool>,
    pub cache_control: Option<CacheControl>,
    /// `shortlink_track`: queue a visit event per answered redirect or 410.
    pub track: Option<bool>,
    /// `shortlink_miss_fallback`: a code Redis does not hold goes to the fallback, not 404.
    pub miss_fallback: Option<bool>,
    /// `shortlink_status_domains`: count this location's requests per host in the status zone.
    pub status_domains: Option<bool>,
    /// `shortlink_imported_codes`: the domain carries another shortener's codes, looked up
    /// whatever their shape ([`crate::request::candidate`]).
    pub imported_codes: Option<bool>,
    /// `shortlink_code_case`.
    pub code_case: Option<CodeCase>,
    /// `shortlink_trailing_slash`: `/abc/` answers as `/abc`.
    pub trailing_slash: Option<bool>,
    /// `shortlink_answer_phase`: in which of nginx's phases a `shortlink on` location answers.
    pub answer_phase: Option<AnswerPhase>,
}

pub const DEFAULT_TIMEOUT_MS: u64 = 200;
pub const DEFAULT_EVENTS_MAX_LEN: u64 = 1_000_000;
/// Long enough for a busy worker to fill a batch (128 visits are 13 ms at 10k redirects/s),
/// short enough that a worker exit loses little.
pub const DEFAULT_EVENTS_FLUSH_MS: u64 = 20;
/// Orphan events per worker and second: every mistyped tap of a campaign (a few a second at
/// most), not every request of a scanner's flood, whose each 404 would cost as much as a visit
/// (about 1,200 instructions, 11% of a bogus-code answer) and a row in SQL.
pub const DEFAULT_ORPHANS_PER_SECOND: u64 = 100;

impl LocConf {
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// The named location to use when Redis fails, unless unset or `off`.
    pub fn fallback(&self) -> Option<&[u8]> {
        self.fallback.as_deref().filter(|f| !f.is_empty())
    }

    pub fn forward_query(&self) -> bool {
        self.forward_query.unwrap_or(false)
    }

    pub fn track(&self) -> bool {
        self.track.unwrap_or(false)
    }

    /// Off by default: on the one-box topology Redis is written before the API answers, so a
    /// miss is final, and sending misses on would let code scanners load the fallback.
    pub fn miss_fallback(&self) -> bool {
        self.miss_fallback.unwrap_or(false) && self.fallback().is_some()
    }

    pub fn status_domains(&self) -> bool {
        self.status_domains.unwrap_or(true)
    }

    pub fn cache_control(&self) -> Option<&CacheControl> {
        self.cache_control.as_ref()
    }

    pub fn imported_codes(&self) -> bool {
        self.imported_codes.unwrap_or(false)
    }

    pub fn code_case(&self) -> CodeCase {
        self.code_case.unwrap_or_default()
    }

    pub fn trailing_slash(&self) -> TrailingSlash {
        match self.trailing_slash {
            Some(true) => TrailingSlash::Ignored,
            _ => TrailingSlash::Refused,
        }
    }

    pub fn answer_phase(&self) -> AnswerPhase {
        self.answer_phase.unwrap_or_default()
    }

    /// Which of the cache's entries this location may answer from.
    pub fn cache_scope(&self) -> Scope {
        if self.imported_codes() {
            Scope::Imported
        } else {
            Scope::All
        }
    }
}

impl Merge for LocConf {
    fn merge(&mut self, prev: &Self) -> Result<(), MergeConfigError> {
        fn inherit<T: Clone>(mine: &mut Option<T>, prev: &Option<T>) {
            if mine.is_none() {
                mine.clone_from(prev);
            }
        }
        inherit(&mut self.pool, &prev.pool);
        inherit(&mut self.workspace, &prev.workspace);
        inherit(&mut self.timeout_ms, &prev.timeout_ms);
        inherit(&mut self.fallback, &prev.fallback);
        inherit(&mut self.forward_query, &prev.forward_query);
        inherit(&mut self.cache_control, &prev.cache_control);
        inherit(&mut self.track, &prev.track);
        inherit(&mut self.miss_fallback, &prev.miss_fallback);
        inherit(&mut self.status_domains, &prev.status_domains);
        inherit(&mut self.imported_codes, &prev.imported_codes);
        inherit(&mut self.code_case, &prev.code_case);
        inherit(&mut self.trailing_slash, &prev.trailing_slash);
        inherit(&mut self.answer_phase, &prev.answer_phase);
        if self.cache_control.is_none() {
            self.cache_control = Some(CacheControl::default());
        }
        Ok(())
    }
}

impl From<ArgError> for ConfError {
    fn from(e: ArgError) -> Self {
        ConfError(e.0)
    }
}

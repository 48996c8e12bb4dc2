//! Directive argument parsers: pure, so `nginx -t` messages can be unit-tested.

use std::fmt;

use shortlink_wire::record::WorkspaceName;
use shortlink_wire::rules::Cidr;

use crate::cache::CacheConfig;
use crate::request::candidate::CodeCase;

/// Limits of a worker's event spool (`shortlink_events_buffer`), in visits and in bytes. Settings
/// are plain data here; the spool itself is `crate::events`'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpoolLimits {
    pub events: usize,
    pub bytes: usize,
}

pub const DEFAULT_SPOOL: SpoolLimits = SpoolLimits {
    events: 10_000,
    bytes: 8 << 20,
};

/// A directive argument that does not parse; shown by `nginx -t` after the directive name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(msg.into()))
}

fn show(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

pub fn flag(arg: &[u8]) -> Result<bool, ArgError> {
    if arg.eq_ignore_ascii_case(b"on") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"off") {
        Ok(false)
    } else {
        err(format!(
            "invalid value \"{}\", it must be \"on\" or \"off\"",
            show(arg)
        ))
    }
}

/// A duration as nginx writes them: `200ms`, `1s`, `10s`, `1m`, `1h`, `1d`; a bare number is
/// seconds. Returns milliseconds.
pub fn time_ms(arg: &[u8]) -> Result<u64, ArgError> {
    let digits = arg.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, unit) = arg.split_at(digits);
    let scale: u64 = match unit {
        b"ms" => 1,
        b"" | b"s" => 1_000,
        b"m" => 60_000,
        b"h" => 3_600_000,
        b"d" => 86_400_000,
        _ => {
            return err(format!(
                "invalid time \"{}\" (use e.g. 200ms, 10s, 1m)",
                show(arg)
            ))
        }
    };
    decimal(number)
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| ArgError(format!("invalid time \"{}\"", show(arg))))
}

/// A count: `10000`, `10k`, `1m`.
pub fn count(arg: &[u8]) -> Result<u64, ArgError> {
    let (number, scale) = match arg.last() {
        Some(b'k' | b'K') => (&arg[..arg.len() - 1], 1_000),
        Some(b'm' | b'M') => (&arg[..arg.len() - 1], 1_000_000),
        _ => (arg, 1),
    };
    decimal(number)
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| ArgError(format!("invalid number \"{}\"", show(arg))))
}

fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Splits `name=value`; the value may be empty.
fn key_value(arg: &[u8]) -> Result<(&[u8], &[u8]), ArgError> {
    match arg.iter().position(|&b| b == b'=') {
        Some(eq) => Ok((&arg[..eq], &arg[eq + 1..])),
        None => err(format!(
            "invalid parameter \"{}\", expected name=value",
            show(arg)
        )),
    }
}

/// With invalidation on, every change of a record evicts it at once, so the TTL only bounds
/// how long a link nobody changes stays in memory: an hour keeps a campaign's hot codes
/// resident (hit rate) while an idle one is reloaded hourly. Negative entries stay short:
/// the projection marker they depend on is not tracked.
pub const DEFAULT_CACHE: CacheConfig = CacheConfig {
    capacity: 10_000,
    ttl_ms: 3_600_000,
    negative_ttl_ms: 1_000,
};

/// `shortlink_cache_invalidation off`: changes are seen only when an entry expires, so the TTL
/// is the staleness bound and stays short.
pub const TTL_ONLY_DEFAULT_MS: u64 = 10_000;

/// Largest cache accepted per worker: far beyond any hot set, small enough to stay sane.
const MAX_CACHE_ENTRIES: u64 = 10_000_000;

/// `shortlink_cache off | [size=N] [ttl=T] [negative_ttl=T]`.
pub fn cache(args: &[&[u8]]) -> Result<Option<CacheConfig>, ArgError> {
    if let [off] = args {
        if off.eq_ignore_ascii_case(b"off") {
            return Ok(None);
        }
    }
    let mut config = DEFAULT_CACHE;
    for arg in args {
        match key_value(arg)? {
            (b"size", v) => {
                let n = count(v)?;
                if n == 0 || n > MAX_CACHE_ENTRIES {
                    return err(format!(
                        "size must be 1..={MAX_CACHE_ENTRIES} entries, or use \"off\""
                    ));
                }
                config.capacity = n as usize;
            }
            (b"ttl", v) => config.ttl_ms = time_ms(v)?,
            (b"negative_ttl", v) => config.negative_ttl_ms = time_ms(v)?,
            (k, _) => return err(format!("unknown parameter \"{}\"", show(k))),
        }
    }
    Ok(Some(config))
}

/// What `shortlink_redis` says, before the address is resolved by nginx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSpec {
    pub address: Vec<u8>,
    pub connections: usize,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
}

pub const DEFAULT_CONNECTIONS: usize = 2;
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 200;
pub const DEFAULT_READ_TIMEOUT_MS: u64 = 1_000;
const MAX_CONNECTIONS: u64 = 64;

/// `shortlink_redis <host:port> [connections=N] [connect_timeout=T] [read_timeout=T]`.
pub fn redis(args: &[&[u8]]) -> Result<RedisSpec, ArgError> {
    let Some((address, params)) = args.split_first() else {
        return err("missing address");
    };
    if address.is_empty() || address.contains(&b'=') {
        return err(format!("invalid address \"{}\"", show(address)));
    }
    let mut spec = RedisSpec {
        address: address.to_vec(),
        connections: DEFAULT_CONNECTIONS,
        connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
        read_timeout_ms: DEFAULT_READ_TIMEOUT_MS,
    };
    for arg in params {
        match key_value(arg)? {
            (b"connections", v) => {
                let n = count(v)?;
                if n == 0 || n > MAX_CONNECTIONS {
                    return err(format!("connections must be 1..={MAX_CONNECTIONS}"));
                }
                spec.connections = n as usize;
            }
            (b"connect_timeout", v) => spec.connect_timeout_ms = positive_time(v)?,
            (b"read_timeout", v) => spec.read_timeout_ms = positive_time(v)?,
            (k, _) => return err(format!("unknown parameter \"{}\"", show(k))),
        }
    }
    Ok(spec)
}

/// What `shortlink_redis_cluster` says, before the seeds are resolved by nginx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterArgs {
    pub seeds: Vec<Vec<u8>>,
    /// The settings every node's connections get (`address` is the first seed).
    pub spec: RedisSpec,
    /// `read_replicas=`: the networks of this edge's zone; a slot is read from an online replica
    /// there when its shard has one. Empty: every lookup reads the primary.
    pub read_replicas: Vec<Cidr>,
}

/// `shortlink_redis_cluster <host:port> [<host:port> ...] [connections=N] [connect_timeout=T]
/// [read_timeout=T] [read_replicas=<network>[,<network>...]]`: the seed nodes, then the
/// parameters `shortlink_redis` takes (they apply to every node's connections), then the zone
/// whose replicas this edge reads.
pub fn redis_cluster(args: &[&[u8]]) -> Result<ClusterArgs, ArgError> {
    let seeds = args.iter().take_while(|a| !a.contains(&b'=')).count();
    if seeds == 0 {
        return err("missing seed address");
    }
    let mut spec_args = vec![args[0]];
    let mut read_replicas = Vec::new();
    for arg in &args[seeds..] {
        match key_value(arg)? {
            (b"read_replicas", v) => read_replicas = networks(v)?,
            _ => spec_args.push(arg),
        }
    }
    Ok(ClusterArgs {
        seeds: args[..seeds].iter().map(|a| a.to_vec()).collect(),
        spec: redis(&spec_args)?,
        read_replicas,
    })
}

/// `10.1.0.0/16,fd00::/8`: IP networks, or single addresses.
fn networks(value: &[u8]) -> Result<Vec<Cidr>, ArgError> {
    let bad = || ArgError(format!("invalid network list \"{}\"", show(value)));
    let text = std::str::from_utf8(value).map_err(|_| bad())?;
    text.split(',')
        .map(|net| Cidr::parse(net).ok_or_else(bad))
        .collect()
}

pub fn positive_time(arg: &[u8]) -> Result<u64, ArgError> {
    match time_ms(arg)? {
        0 => err(format!("time \"{}\" must be greater than zero", show(arg))),
        ms => Ok(ms),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheControl {
    /// Sent with 301 and 308.
    pub permanent: Vec<u8>,
    /// Sent with 302 and 307.
    pub temporary: Vec<u8>,
}

impl Default for CacheControl {
    fn default() -> Self {
        Self {
            permanent: b"public, max-age=3600".to_vec(),
            temporary: b"no-store".to_vec(),
        }
    }
}

/// `shortlink_cache_control [permanent=<value>] [temporary=<value>]`; an empty value sends no
/// header. Values are quoted in the config when they contain spaces.
pub fn cache_control(args: &[&[u8]]) -> Result<CacheControl, ArgError> {
    let mut cc = CacheControl::default();
    if args.is_empty() {
        return err("expected permanent=<value> and/or temporary=<value>");
    }
    for arg in args {
        let (key, value) = key_value(arg)?;
        if !value.iter().all(|&b| b == b' ' || b.is_ascii_graphic()) {
            return err(format!("invalid header value in \"{}\"", show(arg)));
        }
        match key {
            b"permanent" => cc.permanent = value.to_vec(),
            b"temporary" => cc.temporary = value.to_vec(),
            k => return err(format!("unknown parameter \"{}\"", show(k))),
        }
    }
    Ok(cc)
}

/// `shortlink_fallback @name`: only named locations, so a fallback cannot loop back into the
/// redirect location through a URI.
pub fn fallback(arg: &[u8]) -> Result<Vec<u8>, ArgError> {
    if arg.len() < 2 || arg[0] != b'@' {
        return err(format!(
            "\"{}\" is not a named location (it must start with \"@\")",
            show(arg)
        ));
    }
    Ok(arg.to_vec())
}

/// `shortlink_cache_zone name size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSpec {
    pub name: Vec<u8>,
    pub size: usize,
}

/// Smallest zone: the header's removal stamps take 64 KiB; 256 KiB holds ~1,000 records.
pub const MIN_ZONE: u64 = 256 << 10;

pub fn cache_zone(args: &[&[u8]]) -> Result<ZoneSpec, ArgError> {
    let [name, size_arg] = args else {
        return err("takes a name and a size");
    };
    if name.is_empty() {
        return err("needs a name");
    }
    let size = size(size_arg)?;
    if !(MIN_ZONE..=(64 << 30)).contains(&size) {
        return err(format!(
            "size must be 256k..64g, not \"{}\"",
            show(size_arg)
        ));
    }
    Ok(ZoneSpec {
        name: name.to_vec(),
        size: size as usize,
    })
}

/// A size in bytes as nginx writes them: `512`, `64k`, `8m` (1024-based).
pub fn size(arg: &[u8]) -> Result<u64, ArgError> {
    let (number, scale) = match arg.last() {
        Some(b'k' | b'K') => (&arg[..arg.len() - 1], 1 << 10),
        Some(b'm' | b'M') => (&arg[..arg.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&arg[..arg.len() - 1], 1 << 30),
        _ => (arg, 1),
    };
    decimal(number)
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| ArgError(format!("invalid size \"{}\"", show(arg))))
}

/// Largest `MAXLEN ~` cap accepted for the events stream.
const MAX_EVENTS_MAX_LEN: u64 = 1 << 40;

/// `shortlink_events_max_len <count>`: the `MAXLEN ~` cap of `sl:events`.
pub fn events_max_len(arg: &[u8]) -> Result<u64, ArgError> {
    match count(arg)? {
        n @ 1..=MAX_EVENTS_MAX_LEN => Ok(n),
        _ => err(format!("must be 1..={MAX_EVENTS_MAX_LEN} entries")),
    }
}

/// Longest wait accepted before a batch of visits is written: what a worker exit may lose.
const MAX_EVENTS_FLUSH_MS: u64 = 1000;

/// `shortlink_events_flush <time>`: how long visits may wait to be written together; 0 writes
/// them at the end of each pass of the event loop.
pub fn events_flush(arg: &[u8]) -> Result<u64, ArgError> {
    match time_ms(arg)? {
        ms @ 0..=MAX_EVENTS_FLUSH_MS => Ok(ms),
        _ => err(format!("must be at most {MAX_EVENTS_FLUSH_MS}ms")),
    }
}

/// Most orphan events a worker may queue in a second.
const MAX_ORPHANS_PER_SECOND: u64 = 1_000_000;

/// `shortlink_orphans_per_second <count>`: orphan events a worker queues at most each second
/// (0 records none; the status page counts the rest as `orphans_unrecorded`).
pub fn orphans_per_second(arg: &[u8]) -> Result<u64, ArgError> {
    match count(arg)? {
        n @ 0..=MAX_ORPHANS_PER_SECOND => Ok(n),
        _ => err(format!("must be 0..={MAX_ORPHANS_PER_SECOND} events")),
    }
}

/// Largest spool accepted per worker.
const MAX_SPOOL_EVENTS: u64 = 10_000_000;
const MAX_SPOOL_BYTES: u64 = 1 << 30;
/// Smallest byte bound: room for a few events with long headers.
const MIN_SPOOL_BYTES: u64 = 16 << 10;

/// `shortlink_events_buffer <events> [size=<bytes>]`: the per-worker spool for visit events
/// while Redis is unreachable; 0 drops them at once.
pub fn events_buffer(args: &[&[u8]]) -> Result<SpoolLimits, ArgError> {
    let Some((events, params)) = args.split_first() else {
        return err("missing number of events");
    };
    let events = count(events)?;
    if events > MAX_SPOOL_EVENTS {
        return err(format!("must be 0..={MAX_SPOOL_EVENTS} events"));
    }
    let mut limits = SpoolLimits {
        events: events as usize,
        bytes: DEFAULT_SPOOL.bytes,
    };
    for arg in params {
        match key_value(arg)? {
            (b"size", v) => {
                let bytes = size(v)?;
                if !(MIN_SPOOL_BYTES..=MAX_SPOOL_BYTES).contains(&bytes) {
                    return err(format!(
                        "size must be {MIN_SPOOL_BYTES}..={MAX_SPOOL_BYTES} bytes"
                    ));
                }
                limits.bytes = bytes as usize;
            }
            (k, _) => return err(format!("unknown parameter \"{}\"", show(k))),
        }
    }
    Ok(limits)
}

/// The variable name when `arg` is exactly one variable (`$name` or `${name}`), else `None`.
pub fn lone_variable(arg: &[u8]) -> Option<&[u8]> {
    let rest = arg.strip_prefix(b"$")?;
    let name = match rest.strip_prefix(b"{") {
        Some(braced) => braced.strip_suffix(b"}")?,
        None => rest,
    };
    let ok = !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then_some(name)
}

/// `shortlink_workspace <name>` without variables: the name of a workspace.
pub fn workspace(arg: &[u8]) -> Result<WorkspaceName, ArgError> {
    WorkspaceName::parse(arg).ok_or_else(|| {
        ArgError(format!(
            "\"{}\" is not a workspace name ([a-z0-9][a-z0-9-]{{0,31}})",
            show(arg)
        ))
    })
}

/// `shortlink_code_case exact | lower`.
pub fn code_case(arg: &[u8]) -> Result<CodeCase, ArgError> {
    if arg.eq_ignore_ascii_case(b"exact") {
        Ok(CodeCase::Exact)
    } else if arg.eq_ignore_ascii_case(b"lower") {
        Ok(CodeCase::Lower)
    } else {
        err(format!(
            "invalid value \"{}\", it must be \"exact\" or \"lower\"",
            show(arg)
        ))
    }
}

/// `shortlink_answer_phase`: where nginx's phases meet the module's answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnswerPhase {
    /// As a content handler, after every access-phase module (`limit_req`, `allow`/`deny`,
    /// `auth_request`...): the default, which skips nothing an operator configured.
    #[default]
    Content,
    /// At the end of the location's rewrite phase, as `return` answers (`crate::phase`): a
    /// redirect skips the walk through the access, pre-content and content phases (about 400
    /// instructions, a twentieth of a redirect), and with it every module of those phases.
    Rewrite,
}

pub fn answer_phase(arg: &[u8]) -> Result<AnswerPhase, ArgError> {
    if arg.eq_ignore_ascii_case(b"content") {
        Ok(AnswerPhase::Content)
    } else if arg.eq_ignore_ascii_case(b"rewrite") {
        Ok(AnswerPhase::Rewrite)
    } else {
        err(format!(
            "invalid value \"{}\", it must be \"content\" or \"rewrite\"",
            show(arg)
        ))
    }
}

pub fn code_length(arg: &[u8]) -> Result<u8, ArgError> {
    let range = shortcode::MIN_BODY_LEN..=shortcode::MAX_BODY_LEN;
    match decimal(arg).and_then(|n| u8::try_from(n).ok()) {
        Some(n) if range.contains(&n) => Ok(n),
        _ => err(format!(
            "invalid code length \"{}\", it must be {}..={}",
            show(arg),
            range.start(),
            range.end()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(time_ms(b"200ms"), Ok(200));
        assert_eq!(time_ms(b"10s"), Ok(10_000));
        assert_eq!(time_ms(b"10"), Ok(10_000));
        assert_eq!(time_ms(b"1m"), Ok(60_000));
        assert_eq!(time_ms(b"0"), Ok(0));
        assert!(time_ms(b"").is_err());
        assert!(time_ms(b"ms").is_err());
        assert!(time_ms(b"1.5s").is_err());
        assert!(time_ms(b"10x").is_err());
        assert!(time_ms(b"-1s").is_err());
        assert!(time_ms(b"99999999999999999999d").is_err());
        assert!(positive_time(b"0ms").is_err());
    }

    #[test]
    fn cache_zone_takes_a_name_and_a_size_in_bytes() {
        let spec = cache_zone(&[b"edge", b"256m"]).unwrap();
        assert_eq!((spec.name.as_slice(), spec.size), (&b"edge"[..], 256 << 20));
        assert!(
            cache_zone(&[b"edge", b"64k"]).is_err(),
            "below the stamps' 64 KiB"
        );
        assert!(cache_zone(&[b"", b"1m"]).is_err());
        assert!(cache_zone(&[b"edge", b"lots"]).is_err());
        assert!(cache_zone(&[b"edge"]).is_err());
    }

    #[test]
    fn counts_and_flags() {
        assert_eq!(count(b"10000"), Ok(10_000));
        assert_eq!(count(b"10k"), Ok(10_000));
        assert_eq!(count(b"2M"), Ok(2_000_000));
        assert!(count(b"k").is_err());
        assert!(count(b"1g").is_err());
        assert_eq!(flag(b"ON"), Ok(true));
        assert_eq!(flag(b"off"), Ok(false));
        assert!(flag(b"yes").is_err());
    }

    #[test]
    fn cache_directive() {
        assert_eq!(cache(&[b"off"]), Ok(None));
        assert_eq!(
            cache(&[b"size=100", b"ttl=5s", b"negative_ttl=500ms"]),
            Ok(Some(CacheConfig {
                capacity: 100,
                ttl_ms: 5_000,
                negative_ttl_ms: 500
            }))
        );
        assert_eq!(
            cache(&[b"ttl=1s"]).unwrap().unwrap().capacity,
            DEFAULT_CACHE.capacity
        );
        assert!(cache(&[b"size=0"]).is_err());
        assert!(cache(&[b"size=ten"]).is_err());
        assert!(cache(&[b"colour=blue"]).is_err());
        assert!(cache(&[b"size"]).is_err());
    }

    #[test]
    fn redis_directive() {
        let spec = redis(&[b"127.0.0.1:6379", b"connections=4", b"read_timeout=300ms"]).unwrap();
        assert_eq!(spec.address, b"127.0.0.1:6379");
        assert_eq!(spec.connections, 4);
        assert_eq!(spec.read_timeout_ms, 300);
        assert_eq!(spec.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT_MS);
        assert!(redis(&[]).is_err());
        assert!(redis(&[b"connections=2"]).is_err());
        assert!(redis(&[b"h:1", b"connections=0"]).is_err());
        assert!(redis(&[b"h:1", b"connect_timeout=0"]).is_err());
        assert!(redis(&[b"h:1", b"db=3"]).is_err());
    }

    #[test]
    fn redis_cluster_directive() {
        let args = redis_cluster(&[b"10.0.0.1:7000", b"10.0.0.2:7000", b"connections=3"]).unwrap();
        assert_eq!(
            args.seeds,
            vec![b"10.0.0.1:7000".to_vec(), b"10.0.0.2:7000".to_vec()]
        );
        assert_eq!(args.spec.connections, 3);
        assert!(args.read_replicas.is_empty());
        assert!(redis_cluster(&[]).is_err());
        assert!(redis_cluster(&[b"connections=2"]).is_err());
        assert!(redis_cluster(&[b"h:1", b"db=3"]).is_err());
    }

    #[test]
    fn read_replicas_names_the_edges_zone() {
        let args = redis_cluster(&[
            b"h:1",
            b"read_replicas=10.1.0.0/16,fd00::/8",
            b"read_timeout=2s",
        ])
        .unwrap();
        let zone: Vec<String> = args.read_replicas.iter().map(|c| c.to_string()).collect();
        assert_eq!(zone, ["10.1.0.0/16", "fd00::/8"]);
        assert_eq!(args.spec.read_timeout_ms, 2000);
        for bad in [
            &b"read_replicas="[..],
            b"read_replicas=10.1.0.1/16",
            b"read_replicas=eu-west",
        ] {
            let e = redis_cluster(&[b"h:1", bad]).unwrap_err();
            assert!(e.0.contains("invalid network list"), "{e}");
        }
    }

    #[test]
    fn cache_control_directive() {
        let cc = cache_control(&[b"permanent=public, max-age=60", b"temporary="]).unwrap();
        assert_eq!(cc.permanent, b"public, max-age=60");
        assert_eq!(cc.temporary, b"");
        assert_eq!(
            cache_control(&[b"temporary=private"]).unwrap().permanent,
            CacheControl::default().permanent
        );
        assert!(cache_control(&[b"permanent=a\r\nb"]).is_err());
        assert!(cache_control(&[b"forever=1"]).is_err());
        assert!(cache_control(&[]).is_err());
    }

    #[test]
    fn events_directives() {
        assert_eq!(events_max_len(b"1000000"), Ok(1_000_000));
        assert_eq!(events_max_len(b"10k"), Ok(10_000));
        assert!(events_max_len(b"0").is_err());
        assert!(events_max_len(b"lots").is_err());
        assert_eq!(events_flush(b"10ms"), Ok(10));
        assert_eq!(events_flush(b"0"), Ok(0));
        assert_eq!(events_flush(b"1s"), Ok(1000));
        assert!(events_flush(b"2s").is_err());
        assert!(events_flush(b"soon").is_err());
        assert_eq!(
            events_buffer(&[b"500", b"size=1m"]),
            Ok(SpoolLimits {
                events: 500,
                bytes: 1 << 20
            })
        );
        assert_eq!(events_buffer(&[b"0"]).unwrap().events, 0);
        assert_eq!(events_buffer(&[b"10k"]).unwrap().bytes, DEFAULT_SPOOL.bytes);
        assert!(events_buffer(&[]).is_err());
        assert!(events_buffer(&[b"-1"]).is_err());
        assert!(events_buffer(&[b"100", b"size=1"]).is_err());
        assert!(events_buffer(&[b"100", b"size=2g"]).is_err());
        assert!(events_buffer(&[b"100", b"bytes=1m"]).is_err());
        assert_eq!(size(b"64k"), Ok(65_536));
        assert!(size(b"1x").is_err());
    }

    #[test]
    fn lone_variables() {
        assert_eq!(
            lone_variable(b"$shortlink_pool"),
            Some(&b"shortlink_pool"[..])
        );
        assert_eq!(lone_variable(b"${pool}"), Some(&b"pool"[..]));
        assert_eq!(lone_variable(b"$a $b"), None);
        assert_eq!(lone_variable(b"x.example $pool"), None);
        assert_eq!(lone_variable(b"$pool.example"), None);
        assert_eq!(lone_variable(b"$"), None);
        assert_eq!(lone_variable(b"${pool"), None);
        assert_eq!(lone_variable(b"pool"), None);
    }

    #[test]
    fn fallback_and_code_length() {
        assert_eq!(fallback(b"@resolve"), Ok(b"@resolve".to_vec()));
        assert!(fallback(b"/resolve").is_err());
        assert!(fallback(b"@").is_err());
        assert_eq!(code_length(b"6"), Ok(6));
        assert!(code_length(b"3").is_err());
        assert!(code_length(b"11").is_err());
        assert!(code_length(b"x").is_err());
    }

    #[test]
    fn code_case_directive() {
        assert_eq!(code_case(b"exact"), Ok(CodeCase::Exact));
        assert_eq!(code_case(b"lower"), Ok(CodeCase::Lower));
        assert_eq!(code_case(b"LOWER"), Ok(CodeCase::Lower));
        assert_eq!(
            code_case(b"upper"),
            Err(ArgError(
                "invalid value \"upper\", it must be \"exact\" or \"lower\"".into()
            ))
        );
        assert!(code_case(b"").is_err());
    }

    #[test]
    fn workspace_directive() {
        assert_eq!(workspace(b"brand-a").unwrap().as_str(), "brand-a");
        assert_eq!(
            workspace(b"Brand_A"),
            Err(ArgError(
                "\"Brand_A\" is not a workspace name ([a-z0-9][a-z0-9-]{0,31})".into()
            ))
        );
        assert!(workspace(b"").is_err());
    }
}

//! The Redis round-trip histogram and the Prometheus text format (version 0.0.4) of the page.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::counters::{COUNT, NAMES};
use super::domains::{DOMAIN_COUNT, DOMAIN_METRICS};

/// Upper bounds in microseconds: loopback Redis answers in well under a millisecond, the default
/// lookup timeout is 200 ms.
const BOUNDS_US: [u64; 11] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];
const BUCKETS: usize = BOUNDS_US.len() + 1;

#[repr(C)]
pub struct Histogram {
    /// Per bucket, not cumulative; the last one is above every bound.
    buckets: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    buckets: [u64; BUCKETS],
    sum_us: u64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        Self {
            buckets: [0; BUCKETS],
            sum_us: 0,
        }
    }
}

/// Counters whose value can go down.
const GAUGES: [&str; 3] = [
    "events_buffered",
    "cluster_primaries",
    "cluster_replicas_read",
];

/// One help line per global counter, in [`NAMES`] order.
const HELP: [&str; COUNT] = [
    "Requests that reached a shortlink location.",
    "Redirects answered.",
    "404 answers, whatever the reason.",
    "410 answers.",
    "Not-yet pages: clicks before a link's valid_since.",
    "Redirects a click-time rule chose.",
    "Password pages shown.",
    "Password forms refused: wrong password or too many attempts.",
    "Preview cards answered to link preview fetchers.",
    "Generated-shape codes with a wrong check character.",
    "Requests with no code or a code of no known shape.",
    "Requests for hosts outside the pool.",
    "Lookups answered from the worker cache.",
    "Lookups that asked Redis.",
    "Redis unreachable, closed, protocol error, error reply or unreadable value.",
    "Redis lookups that timed out.",
    "Lookups that found neither the link nor the projection marker.",
    "Misses sent to the fallback because the projection marker names another code scheme.",
    "Requests sent to the fallback location.",
    "503 answers (Redis failed and no fallback).",
    "Visit events made.",
    "Visit events written to Redis.",
    "Visit events Redis refused or may have lost.",
    "Visit events thrown away.",
    "Visit events spooled now, waiting for Redis.",
    "Cluster MOVED and ASK redirections followed, by lookups and visit batches.",
    "Lookups failed on the cluster's account (TRYAGAIN, CLUSTERDOWN, no owner, node down), and visit batches bounced between nodes that disagree.",
    "Cluster slot maps read.",
    "Changes of a worker's cluster slot map.",
    "Primaries serving slots in the last slot map read.",
    "Visit events a cluster node redirected (MOVED, ASK) and that were sent again.",
    "Lookups of codes only shortlink_imported_codes sends to Redis.",
    "Primaries whose slots a worker reads from a replica in its zone (read_replicas=).",
    "Paths answered as the code before their trailing punctuation (redirect, 410 or card).",
    "Orphan events not queued: past shortlink_orphans_per_second in their second (a flood counted, not recorded).",
    "404s and 410s answered with a not-found redirect of the host or its workspace instead.",
];

/// The whole page in the Prometheus text format.
pub fn render(
    values: &[u64; COUNT],
    domains: &[(String, [u64; DOMAIN_COUNT])],
    latency: &HistogramSnapshot,
) -> String {
    let mut out = String::with_capacity(4096 + domains.len() * 512);
    for ((name, help), value) in NAMES.iter().zip(HELP).zip(values) {
        if GAUGES.contains(name) {
            family(&mut out, &format!("shortlink_{name}"), help, "gauge");
            let _ = writeln!(out, "shortlink_{name} {value}");
        } else {
            family(
                &mut out,
                &format!("shortlink_{name}_total"),
                help,
                "counter",
            );
            let _ = writeln!(out, "shortlink_{name}_total {value}");
        }
    }
    for (i, (name, help)) in DOMAIN_METRICS.iter().enumerate() {
        let metric = format!("shortlink_domain_{name}_total");
        family(&mut out, &metric, help, "counter");
        for (domain, counts) in domains {
            let _ = writeln!(
                out,
                "{metric}{{domain=\"{}\"}} {}",
                escape(domain),
                counts[i]
            );
        }
    }
    let metric = "shortlink_redis_latency_seconds";
    family(
        &mut out,
        metric,
        "Round trip of a lookup to Redis, request sent to reply read.",
        "histogram",
    );
    let mut cumulative = 0;
    for (i, count) in latency.buckets.iter().enumerate() {
        cumulative += count;
        let le = match BOUNDS_US.get(i) {
            Some(us) => format!("{}", *us as f64 / 1e6),
            None => "+Inf".to_owned(),
        };
        let _ = writeln!(out, "{metric}_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{metric}_sum {}", latency.sum_us as f64 / 1e6);
    let _ = writeln!(out, "{metric}_count {cumulative}");
    out
}

fn family(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value: backslash, double quote and line feed escaped, as the format asks.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Whether the client asked for the Prometheus format: `format=prometheus` in the query, or an
/// `Accept` that names the Prometheus text or OpenMetrics format (what Prometheus sends).
pub fn wanted(args: &[u8], accept: &[u8]) -> bool {
    if args
        .split(|&b| b == b'&')
        .any(|pair| pair == b"format=prometheus")
    {
        return true;
    }
    let accept = String::from_utf8_lossy(accept).to_ascii_lowercase();
    accept.contains("application/openmetrics-text") || accept.contains("version=0.0.4")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_counted() {
        let h: Histogram = unsafe { std::mem::zeroed() };
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_micros(700));
        h.observe(Duration::from_secs(3));
        let text = render(
            &[0; COUNT],
            &[("s1.example".into(), [1; DOMAIN_COUNT])],
            &h.snapshot(),
        );
        assert!(text.contains("shortlink_redis_latency_seconds_bucket{le=\"0.00025\"} 1\n"));
        assert!(text.contains("shortlink_redis_latency_seconds_bucket{le=\"0.001\"} 2\n"));
        assert!(text.contains("shortlink_redis_latency_seconds_bucket{le=\"1\"} 2\n"));
        assert!(text.contains("shortlink_redis_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("shortlink_redis_latency_seconds_count 3\n"));
        assert!(text.contains("shortlink_redis_latency_seconds_sum 3.0008\n"));
        assert!(text.contains("shortlink_domain_redirects_total{domain=\"s1.example\"} 1\n"));
        assert!(
            text.contains("# TYPE shortlink_events_buffered gauge\nshortlink_events_buffered 0\n")
        );
        assert!(text.contains("# TYPE shortlink_requests_total counter\n"));
    }

    #[test]
    fn asks_by_query_or_accept() {
        assert!(wanted(b"format=prometheus", b""));
        assert!(wanted(b"a=1&format=prometheus", b""));
        assert!(!wanted(b"format=prometheusx", b""));
        assert!(wanted(
            b"",
            b"application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        ));
        assert!(!wanted(b"", b"text/plain"));
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

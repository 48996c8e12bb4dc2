//! The shared cache zone's lines on the status page (`shortlink_cache_zone`): read from the
//! zone's own header, printed only when a zone is configured.

use std::fmt::Write;

use crate::cache::zone::{Stats, SLOT_BYTES};

/// Name, help, whether it is a gauge, value.
fn rows(s: &Stats) -> [(&'static str, &'static str, bool, u64); 7] {
    [
        (
            "cache_zone_hits",
            "Lookups answered from the shared cache zone.",
            false,
            s.hits,
        ),
        (
            "cache_zone_misses",
            "Lookups the shared cache zone did not answer.",
            false,
            s.misses,
        ),
        (
            "cache_zone_prefills",
            "Records stored in the zone ahead of their first click.",
            false,
            s.prefills,
        ),
        (
            "cache_zone_evictions",
            "Fresh entries displaced from the zone by others.",
            false,
            s.evictions,
        ),
        (
            "cache_zone_entries",
            "Records in the shared cache zone now.",
            true,
            s.entries,
        ),
        (
            "cache_zone_capacity",
            "Records the shared cache zone can hold.",
            true,
            s.capacity,
        ),
        (
            "cache_zone_bytes",
            "Bytes of the zone holding records now.",
            true,
            s.entries * SLOT_BYTES as u64,
        ),
    ]
}

/// `name value` lines, as the rest of the page.
pub fn plain(out: &mut String, stats: &Stats) {
    for (name, _, _, value) in rows(stats) {
        let _ = writeln!(out, "{name} {value}");
    }
}

/// The Prometheus families.
pub fn prometheus(out: &mut String, stats: &Stats) {
    for (name, help, gauge, value) in rows(stats) {
        let (metric, kind) = match gauge {
            true => (format!("shortlink_{name}"), "gauge"),
            false => (format!("shortlink_{name}_total"), "counter"),
        };
        let _ = writeln!(
            out,
            "# HELP {metric} {help}\n# TYPE {metric} {kind}\n{metric} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_follow_entries() {
        let stats = Stats {
            entries: 3,
            capacity: 10,
            hits: 5,
            ..Stats::default()
        };
        let mut text = String::new();
        plain(&mut text, &stats);
        assert!(text.contains("cache_zone_hits 5\n"));
        assert!(text.contains(&format!("cache_zone_bytes {}\n", 3 * SLOT_BYTES)));
        let mut text = String::new();
        prometheus(&mut text, &stats);
        assert!(text.contains(
            "# TYPE shortlink_cache_zone_entries gauge\nshortlink_cache_zone_entries 3\n"
        ));
        assert!(text.contains("shortlink_cache_zone_hits_total 5\n"));
    }
}

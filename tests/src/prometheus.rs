//! Reading the Prometheus text pages the tests scrape (`/metrics`, `/shortlink_status?format=prometheus`).

use std::collections::HashMap;

/// A page's `name{labels} value` samples, keyed by everything before the value.
pub fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            Some((key.to_owned(), value.parse().ok()?))
        })
        .collect()
}

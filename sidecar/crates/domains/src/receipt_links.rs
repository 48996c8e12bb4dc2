//! A drain on receipts needs distinct recipients (issue 77): each link is one recipient (a
//! campaign issues a link per recipient, a re-send a new one), so the drain counts a link's first
//! final receipt of a window in each series (workspace, carrier, domain) and no other. Message ids are the reporter's to choose: without this,
//! one link reported 30 times under 30 made-up ids would count as 30 rejected messages.
//!
//! Here, this sidecar's memory of the links it counted: two generations of at most [`MAX_LINKS`]
//! each, swapped once a window, so that a link counted stays known for one to two windows at a
//! cost per receipt of one hash and one insert (no per-second sweep). What the sidecars count
//! together goes through Redis once a second: the first sidecar to claim a link there
//! (`receipt_share`, a `SET NX` expiring with the window) is the one that adds it.

use super::receipts::Series;
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::BuildHasher;

/// Links remembered per generation: past it, a new link is not counted by this sidecar's own
/// judgement (the shared counts still dedup it); 16 bytes or so each.
pub const MAX_LINKS: usize = 2_000_000;

/// The links counted in the current and the previous window, by a keyed hash of (series, code):
/// no string kept, and no collision a reporter can aim at.
#[derive(Debug, Default)]
pub struct CountedLinks {
    hasher: RandomState,
    current: HashSet<u64>,
    previous: HashSet<u64>,
    /// The second the current generation started.
    started: u64,
}

/// What to do with a link's final receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstOf {
    /// Its first of the window here: count it.
    Link,
    /// Counted already: count nothing.
    Repeat,
    /// No room to remember it: leave it to the shared counts.
    Unremembered,
}

impl CountedLinks {
    /// Whether link `code` is counted in `series` for the first time, remembering it.
    pub fn first(&mut self, series: &Series, code: &str) -> FirstOf {
        let key = self.hasher.hash_one((series, code));
        if self.previous.contains(&key) || self.current.contains(&key) {
            return FirstOf::Repeat;
        }
        if self.current.len() >= MAX_LINKS {
            return FirstOf::Unremembered;
        }
        self.current.insert(key);
        FirstOf::Link
    }

    /// Starts a new generation once `window` seconds have passed since the current one began:
    /// what was counted before the previous one is forgotten.
    pub fn forget(&mut self, now: u64, window: u64) {
        if now.saturating_sub(self.started) >= window.max(1) {
            self.previous = std::mem::take(&mut self.current);
            self.started = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_counts_once_per_window_and_series_and_again_after() {
        let on = |carrier: &str| Series {
            workspace: "w".into(),
            carrier: carrier.into(),
            domain: "a1.example".into(),
        };
        let mut links = CountedLinks::default();
        links.forget(1000, 60);
        assert_eq!(links.first(&on("x"), "abc"), FirstOf::Link);
        assert_eq!(links.first(&on("x"), "abc"), FirstOf::Repeat);
        assert_eq!(links.first(&on("y"), "abc"), FirstOf::Link);
        links.forget(1030, 60);
        assert_eq!(links.first(&on("x"), "abc"), FirstOf::Repeat);
        links.forget(1060, 60);
        let previous = links.first(&on("x"), "abc");
        assert_eq!(previous, FirstOf::Repeat, "the previous window");
        links.forget(1120, 60);
        assert_eq!(links.first(&on("x"), "abc"), FirstOf::Link);
    }
}

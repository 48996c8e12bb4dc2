//! The worker's click ids ([`shortlink_wire::click_id`]): a random prefix drawn on the first
//! click a worker answers (workers are forked processes and the master answers none, so every
//! worker draws its own), then a counter. One thread-local read and add per id.

use std::cell::RefCell;

use shortlink_wire::click_id::{ClickId, ClickIds};

thread_local! {
    static IDS: RefCell<Option<ClickIds>> = const { RefCell::new(None) };
}

/// The next id of this worker.
pub fn next() -> ClickId {
    IDS.with(|ids| {
        let mut ids = ids.borrow_mut();
        ids.get_or_insert_with(|| ClickIds::new(prefix()))
            .next(prefix)
    })
}

/// 64 random bits from the operating system. Should it fail (no entropy source at all), the
/// clock and the process id still tell workers apart, only with weaker odds.
fn prefix() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        shortlink_wire::rules::mix(nanos ^ u64::from(std::process::id()).rotate_left(32))
    })
}

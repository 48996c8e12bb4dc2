//! Orphan visits (issue 70): requests on a pool host that no link answered, as the module records
//! them (`shortlink_wire::event::OrphanKind`), and taps on a known link that is gone (410), which
//! the consumer files here rather than among the link's visits (Shlink's `invalid_short_url`: a
//! link that no longer answers is, to the visitor, no link). Each is stored under the workspace
//! nginx mapped its host to when it came (the module records it: `shortlink_wire::event`'s `ws`),
//! and a read names the asking workspace ([`OrphanScope`]): no answer depends on what a sidecar
//! has learned of the hosts since it started (issue 77).
//!
//! Raw rows (`orphan_visits`) are kept as long as raw visits (`--visit-retention`); the per-domain
//! counts (`orphan_counts`, one row per workspace, host and kind) are totals, added to by the rows actually
//! inserted, in the same transaction: a redelivered batch counts once.

mod model;
mod store;

pub use model::*;
pub use store::OrphanStore;

//! Orphan visits (issue 70): requests on a pool host that no link answered, as the module records
//! them (`shortlink_wire::event::OrphanKind`), and taps on a known link that is gone (410), which
//! the consumer files here rather than among the link's visits (Shlink's `invalid_short_url`: a
//! link that no longer answers is, to the visitor, no link). Stored by host, not by workspace: a
//! host's workspace is the issuing list's grouping as of the read (docs/WORKSPACES.md, "Whose
//! domain is it"), so a read names the hosts of the asking workspace ([`DomainScope`]), and a host
//! no workspace claims is the default's.
//!
//! Raw rows (`orphan_visits`) are kept as long as raw visits (`--visit-retention`); the per-domain
//! counts (`orphan_counts`, one row per host and kind) are totals, added to by the rows actually
//! inserted, in the same transaction: a redelivered batch counts once.

mod model;
mod store;

pub use model::*;
pub use store::OrphanStore;

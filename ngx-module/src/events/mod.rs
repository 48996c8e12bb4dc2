//! Visit events (analytics). Every answered redirect or 410 is one visit; the visits made in
//! one pass of nginx's event loop leave together as **one** stream entry. Redis spends most of
//! an XADD on the command and the entry, not on its fields: one entry per pass instead of one per
//! visit is what keeps tracking nearly free under load.
//!
//! The encoding, the stream's name and the limits are the contract with the sidecar's consumer,
//! so they live in `shortlink_wire::event`; what is the module's own is the bounded per-worker
//! spool that holds encoded entries while Redis is unreachable ([`spool`]).

mod spool;

pub use shortlink_wire::event::{Batch, Encoder, Visit, BATCH_MAX_BYTES, BATCH_MAX_VISITS};
pub use spool::{EventShared, KeptCommand, Rerouted, Spool, Spooled, MAX_REDIRECTS};

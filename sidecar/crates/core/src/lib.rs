//! The link service and its Redis projection: the one write path (SQL transaction, then the
//! record written through to Redis, undone if the commit fails) that the API, the console, the CLI
//! and imports share, and what it needs to run.
//!
//! - [`service`]: create, batch, compose, update/revoke, reads and the resolver;
//! - [`projection`]: the Redis link record and its writes, and its marker `sl:meta:projection`
//!   (refilling Redis after it lost its data); [`primary`]: where the Redis primary is (the
//!   URL, or Sentinel's answer); [`issuer`]: sequence blocks → codes; [`code_scheme`]: the code
//!   scheme's fingerprint, checked against the data at start-up;
//! - [`limits`]: per-key rate limits and per-workspace quotas, shared by every sidecar through
//!   Redis;
//! - [`background`]: how every periodic job and consumer is started and stopped;
//! - [`outbound`]: the one HTTP client for requests made on a user's behalf (webhooks, imports),
//!   and TLS clients that verify as browsers do; [`signing`]: how the sidecar signs what it POSTs;
//! - [`metrics`]: Prometheus metrics; [`csv_cell`]: CSV cells a spreadsheet never runs as formulas;
//!   [`sync`]: the one policy for a poisoned lock (recover it).

#![deny(unsafe_code)]

pub mod background;
pub mod code_scheme;
pub mod csv_cell;
pub mod issuer;
pub mod limits;
pub mod metrics;
pub mod outbound;
pub mod primary;
pub mod projection;
pub mod service;
pub mod signing;
pub mod sync;

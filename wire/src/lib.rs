//! The wire formats of shortlink's redirect path, free of nginx so that unit tests, fuzzers and
//! other crates can link them (the nginx module's own rlib cannot be linked outside nginx: it
//! references nginx symbols).
//!
//! - [`resp`]: RESP2 framing: the reader the module runs on every Redis reply, and command encoding;
//! - [`record`]: the link record v1 in `sl:c:<code>`, the contract between the sidecar that writes
//!   it and the module that reads it (docs/ARCHITECTURE.md);
//! - [`path`]: where the code sits in a raw request URI;
//! - [`cluster`]: hash slots, and the per-slot key names a Redis Cluster needs;
//! - [`rules`]: click-time rules, their bytes in the record and their evaluation.
//!
//! The module re-exports these under their old paths (`crate::redis::resp`, `crate::record`,
//! `crate::request::code`).

#![forbid(unsafe_code)]

pub mod cluster;
pub mod path;
pub mod record;
pub mod resp;
pub mod rules;

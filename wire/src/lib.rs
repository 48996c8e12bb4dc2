//! The wire formats of shortlink's redirect path, free of nginx so that unit tests, fuzzers and
//! other crates can link them (the nginx module's own rlib cannot be linked outside nginx: it
//! references nginx symbols).
//!
//! This crate is the whole contract between the module and the sidecar: every byte either writes
//! to Redis for the other is encoded and decoded here, with one set of names and limits.
//!
//! - [`agent`]: who sent a request (link preview fetchers, other machines), one table;
//! - [`click_id`]: the id a click carries to the landing page and its visit keeps;
//! - [`click_count`]: a capped click's count, idempotent per click (its token);
//! - [`fallback`]: what nginx's fallback location tells the sidecar (the host's workspace, a
//!   capped click's token);
//! - [`keys`]: every Redis key name and prefix;
//! - [`limits`]: every size the API accepts, and the room each hop of a click needs for it;
//! - [`record`]: the link record in `sl:c:<code>`, versioned: the sidecar's encoder and the
//!   module's decoder;
//! - [`event`]: the visit events in `sl:events`: the module's encoder, the consumer's framing,
//!   the limits both keep;
//! - [`resp`]: RESP2 framing: the reader the module runs on every Redis reply, and command encoding;
//! - [`path`]: where the code sits in a raw request URI;
//! - [`trailing`]: the punctuation a text glues to a link, stripped by module and fallback alike;
//! - [`page`]: the headers every page a click can get carries;
//! - [`preview`]: a link's preview card, in a key of its own, and the page fetchers get;
//! - [`cluster`]: hash slots, and the per-slot key names a Redis Cluster needs;
//! - [`rules`]: click-time rules, their bytes in the record and their evaluation;
//! - [`target`]: what a redirect target may be (it goes verbatim into `Location`);
//! - [`verdict`]: person, preview, scanner or bot, from the request's signals (one table);
//! - [`agent_cache`]: a worker's memory of the agents it judged (a capped click's verdict);
//! - [`sweeps`]: the sweeps the visit consumer noticed, for the capped path.
//!
//! The module re-exports these under their old paths (`crate::redis::resp`, `crate::record`,
//! `crate::request::code`).

// `unsafe` only in the visit encoder's hot path: `event::encode::Batch::push` and its writer `Out`.
#![deny(unsafe_code)]

pub mod agent;
pub mod agent_cache;
pub mod click_count;
pub mod click_id;
pub mod cluster;
pub mod event;
pub mod fallback;
pub mod keys;
pub mod limits;
pub mod network;
pub mod not_found;
pub mod page;
pub mod path;
pub mod preview;
pub mod record;
pub mod resp;
pub mod rules;
pub mod status;
pub mod sweeps;
pub mod target;
pub mod trailing;
pub mod verdict;

//! Redis over nginx's own event loop: RESP framing, pipelined peer connections, a per-worker
//! pool with reconnect backoff.

pub mod backoff;
pub mod cluster;
mod connection;
mod error;
mod pool;
mod track_state;
pub mod tracking;

// RESP framing lives in `shortlink-wire` (linkable without nginx, hence fuzzable).
pub use shortlink_wire::resp;

pub use connection::Reply;
pub use error::RedisError;
pub use pool::Pool;
pub use tracking::Tracker;

// cluster/ reaches the clock as `super::now_ms`.
use crate::ffi::now_ms;

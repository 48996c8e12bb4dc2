//! Request-side rules: which code, which host, which `Location`, what a click-time rule reads.

// The code-in-path rule lives in `shortlink-wire` (linkable without nginx, hence fuzzable).
pub use shortlink_wire::path as code;
pub mod candidate;
pub mod click;
pub mod click_id;
pub mod host;
pub mod host_workspaces;
pub mod location;
pub mod signals;
pub mod value;
pub mod workspace;

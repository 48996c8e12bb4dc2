//! Request-side rules: which host, which `Location`, what a click-time rule reads. Which code a
//! path names is `shortlink_wire::path`'s (linkable without nginx, hence fuzzable).

pub mod candidate;
pub mod click;
pub mod click_id;
pub mod host;
pub mod host_workspaces;
pub mod location;
pub mod signals;
pub mod swept;
pub mod value;
pub mod workspace;

//! Pure request-side rules: which code, which host, which `Location`.

pub mod code;
pub mod host;
pub mod location;

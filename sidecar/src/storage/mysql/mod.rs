//! MariaDB / MySQL backend: several sidecar processes may share one database.

mod connect;

pub use connect::{pool, SQL_MODE};

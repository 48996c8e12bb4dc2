//! What the SQL backends share: one [`Storage`](super::Storage) and one
//! [`LinkTx`](super::LinkTx) written once over a [`Dialect`], which holds only what differs
//! between SQLite, PostgreSQL and MariaDB/MySQL (how times are stored, the tag filter, locking,
//! the bulk insert). Statements are written once with `?` for each value ([`statement`]); sqlx's
//! query builder turns them into each database's placeholders (`?`, `$1`) when it runs.

mod access;
mod audit;
pub(crate) mod batch;
mod campaigns;
pub(crate) mod columns;
mod dialect;
mod driver;
pub mod feed;
mod imported;
mod not_found;
mod quarantine;
pub(crate) mod rows;
mod statement;
mod store;
mod tx;
mod workspaces;

// The toolkit as the backends and the crates above name it.
pub use dialect::Dialect;
pub use driver::Driver;
pub use statement::{statement, Statement, Value, IN_LIST};
pub(crate) use store::SqlStorage;

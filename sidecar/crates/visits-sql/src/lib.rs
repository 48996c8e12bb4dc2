//! The visit stores in SQL: every trait of `shortlink-visits` (visits and rollups, conversions,
//! delivery receipts, retention, orphans, subject requests, domain charts) and the webhooks'
//! store, written once for SQLite, PostgreSQL and MariaDB. Only the binary depends on this
//! crate: the API, the webhooks and domain health call the traits, so an edit to a statement
//! here rebuilds this crate and the binary alone.
//!
//! The write path is [`VisitStore::store_batch`]: one transaction per batch that inserts the raw
//! visits with `ON CONFLICT (event_id) DO NOTHING` (PostgreSQL: `(event_id, visited_at)`, the
//! table being partitioned by day, `postgres/partitions.rs`), and folds only the rows actually
//! inserted into the rollups and `links.visit_count` / `last_visit_at`. Which rows went in is
//! known without sending them back (SQLite: each one-row insert's change count, `sqlite/raw.rs`;
//! PostgreSQL: a binary `COPY` that succeeded inside a savepoint, otherwise rolled back to it and
//! made again with `ON CONFLICT DO NOTHING RETURNING event_id`; MariaDB: see `mysql`). A batch
//! delivered twice (the consumer died between commit and XACK) therefore changes nothing the
//! second time.

#![deny(unsafe_code)]

mod conversions;
mod corrections;
mod deliveries;
mod domain_chart;
mod feed;
mod mysql;
mod orphans;
mod postgres;
mod retention;
mod sql;
mod sqlite;
mod subjects;
mod webhooks;
mod write;

pub use self::mysql::MysqlVisitStore;
pub use self::postgres::PgVisitStore;
pub use self::sql::{SqlVisitStore, VisitDialect};
pub use self::sqlite::SqliteVisitStore;

use shortlink_store::{Backend, ConnectOptions, StorageError, StorageResult};
use shortlink_visits::store::VisitStore;
use shortlink_webhooks::{Stores, WebhookStore};
use std::sync::Arc;

/// One backend's store handed out as both trait objects: the same pools behind each.
fn stores<S: VisitStore + WebhookStore>(store: S) -> Stores {
    let store = Arc::new(store);
    Stores {
        visits: Arc::clone(&store) as Arc<dyn VisitStore>,
        webhooks: store,
    }
}

/// Opens the stores on the database `options` name (already migrated by
/// [`shortlink_store::connect`]).
pub async fn connect(options: &ConnectOptions) -> StorageResult<Stores> {
    let (url, max_connections, acquire_timeout) = (
        options.url.as_str(),
        options.max_connections,
        options.acquire_timeout,
    );
    match Backend::from_url(url) {
        Some(Backend::Sqlite) => Ok(stores(SqliteVisitStore::connect(options).await?)),
        Some(Backend::Postgres) => Ok(stores(
            PgVisitStore::connect(url, max_connections, acquire_timeout).await?,
        )),
        Some(Backend::Mysql) => Ok(stores(
            MysqlVisitStore::connect(url, max_connections, acquire_timeout).await?,
        )),
        None => Err(StorageError::UnsupportedUrl(
            shortlink_config::redact::redact_url(url),
        )),
    }
}

/// Opens the stores on the configured database.
pub async fn open(config: &shortlink_config::Config) -> StorageResult<Stores> {
    connect(&ConnectOptions::from_config(config)).await
}

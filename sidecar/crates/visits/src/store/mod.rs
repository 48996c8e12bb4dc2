//! Storage of visits, rollups and stats: one trait, one implementation per backend, opened from the
//! same database URL as the link storage (whose migrations create these tables too).
//!
//! The write path is [`VisitStore::store_batch`]: one transaction per batch that inserts the raw
//! visits with `ON CONFLICT (event_id) DO NOTHING` (PostgreSQL: `(event_id, visited_at)`, the
//! table being partitioned by day, `postgres/partitions.rs`), and folds only the rows actually
//! inserted into the rollups and `links.visit_count` / `last_visit_at`. Which rows went in is known without
//! sending them back (SQLite: each one-row insert's change count, `sqlite/raw.rs`; PostgreSQL: a
//! binary `COPY` that succeeded inside a savepoint, otherwise rolled back to it and made again
//! with `ON CONFLICT DO NOTHING RETURNING event_id`; MariaDB: see `mysql`). A batch
//! delivered twice (the consumer died between commit and XACK) therefore changes nothing the
//! second time.

mod api;
pub(crate) mod feed;
mod mysql;
mod postgres;
pub(crate) mod sql;
mod sqlite;
mod write;

pub use self::mysql::MysqlVisitStore;
pub use self::postgres::PgVisitStore;
pub use self::sql::{SqlVisitStore, VisitDialect};
pub use self::sqlite::SqliteVisitStore;

pub use self::api::breakdown_days;
pub use self::api::{
    BatchOutcome, Dimension, Entry, IdleLink, RuleEntry, Stats, StatsQuery, VisitStore,
};
pub use super::rollup::{Counts, ALL_LINKS};
use shortlink_store::{Backend, ConnectOptions, StorageError, StorageResult};
use std::sync::Arc;

/// Which SQL backend's store a `dyn VisitStore` is. The conversions, retention policies,
/// subject requests (and, in their own crate, the webhooks) are the same store seen through
/// another trait, implemented for every backend's: each such view matches on this, so that
/// "every visit store is one of the three" is said once.
pub enum SqlBackendStore<'a> {
    Sqlite(&'a SqliteVisitStore),
    Postgres(&'a PgVisitStore),
    Mysql(&'a MysqlVisitStore),
}

impl dyn VisitStore {
    pub fn sql_backend(&self) -> SqlBackendStore<'_> {
        let store = self.as_any();
        if let Some(store) = store.downcast_ref() {
            SqlBackendStore::Sqlite(store)
        } else if let Some(store) = store.downcast_ref() {
            SqlBackendStore::Postgres(store)
        } else if let Some(store) = store.downcast_ref() {
            SqlBackendStore::Mysql(store)
        } else {
            unreachable!("every visit store is one of the SQL backends' (connect, below)")
        }
    }
}

/// Opens the visit store on the database `options` name (already migrated by
/// [`shortlink_store::connect`]).
pub async fn connect(options: &ConnectOptions) -> StorageResult<Arc<dyn VisitStore>> {
    let (url, max_connections, acquire_timeout) = (
        options.url.as_str(),
        options.max_connections,
        options.acquire_timeout,
    );
    match Backend::from_url(url) {
        Some(Backend::Sqlite) => Ok(Arc::new(SqliteVisitStore::connect(options).await?)),
        Some(Backend::Postgres) => Ok(Arc::new(
            PgVisitStore::connect(url, max_connections, acquire_timeout).await?,
        )),
        Some(Backend::Mysql) => Ok(Arc::new(
            MysqlVisitStore::connect(url, max_connections, acquire_timeout).await?,
        )),
        None => Err(StorageError::UnsupportedUrl(
            shortlink_config::redact::redact_url(url),
        )),
    }
}
#[cfg(test)]
mod tests {
    use super::api::*;
    use super::*;
    use crate::rollup::Interval;

    #[test]
    fn chunks_have_few_shapes() {
        let rows: Vec<u32> = (0..1300).collect();
        let sizes = |budget| -> Vec<usize> {
            write::chunks(&rows, 512, budget, |_| 1)
                .map(<[u32]>::len)
                .collect()
        };
        assert_eq!(sizes(usize::MAX), [512, 512, 256, 16, 4]);
        // A byte budget halves each chunk until it fits.
        assert_eq!(sizes(300)[..3], [256, 256, 256]);
        let again: Vec<u32> = write::chunks(&rows, 512, 300, |_| 1)
            .flatten()
            .copied()
            .collect();
        assert_eq!(again, rows);
        assert_eq!(write::chunks::<u32>(&[], 512, 1, |_| 1).count(), 0);
    }

    #[test]
    fn series_is_dense() {
        let query = StatsQuery {
            workspace: shortlink_store::WorkspaceId::DEFAULT,
            code: None,
            from: 0,
            to: 4 * 3600,
            interval: Interval::Hour,
            include_bots: false,
            top: 10,
        };
        let one = Counts {
            humans: 1,
            ..Counts::default()
        };
        let series = dense_series(&query, vec![(3600, one), (3 * 3600, one)]);
        let humans: Vec<i64> = series.iter().map(|(_, c)| c.humans).collect();
        assert_eq!(humans, [0, 1, 0, 1]);
        assert_eq!(breakdown_days(&query), (0, 86_400));
    }

    #[test]
    fn breakdowns_rank_per_dimension() {
        let row = |values: [&str; 2], humans, bots| GroupRow {
            values: values.map(str::to_owned).to_vec(),
            humans,
            bots,
            previews: 0,
        };
        let rows = [
            row(["Chrome", ""], 3, 0),
            row(["", ""], 3, 0),
            row(["Safari", ""], 3, 0),
            row(["Chrome", "curl"], 0, 5),
            row(["Firefox", ""], 1, 0),
        ];
        let dims = [Dimension::Browser, Dimension::Agent];
        let got = rank_breakdowns(&dims, &rows, false, 3);
        let values = |i: usize| -> Vec<(Option<&str>, i64)> {
            got[i]
                .1
                .iter()
                .map(|e| (e.value.as_deref(), e.humans + e.bots))
                .collect()
        };
        // Ranked by humans; ties by value, unknown last; cut at `top`.
        assert_eq!(
            values(0),
            [(Some("Chrome"), 8), (Some("Safari"), 3), (None, 3)]
        );
        // Machines only, ranked by everyone.
        assert_eq!(values(1), [(Some("curl"), 5)]);
        let with_bots = rank_breakdowns(&dims, &rows, true, 1);
        assert_eq!(with_bots[0].1[0].value.as_deref(), Some("Chrome"));
        assert_eq!(with_bots[0].1[0].bots, 5);
    }
}

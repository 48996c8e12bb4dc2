//! PostgreSQL backend: several sidecar processes may share one database. What it does its own
//! way: jsonb tags, an expression index on the URL-hash prefix, a table lock to quiesce writers,
//! and batch inserts by binary `COPY` ([`copy`]).

mod copy;
mod marker;

pub use marker::Pg;

use super::api::{Backend, ConnectOptions, EncodedRows, StorageError, StorageResult};
use super::model::NewRow;
use super::sql::columns::{Column, Stored};
use super::sql::{Dialect, SqlStorage, Statement, Value};
use async_trait::async_trait;
use copy::LinksCopy;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Pool, Postgres, Transaction};
use std::str::FromStr;
use std::time::Duration;

pub(crate) type PgStorage = SqlStorage<Pg>;

#[async_trait]
impl Dialect for Pg {
    type DB = Postgres;

    const BACKEND: Backend = Backend::Postgres;

    /// Widened to the 64-bit integers and the text the shared row mapping reads.
    fn select_column(column: &Column) -> std::borrow::Cow<'static, str> {
        let name = column.name;
        match column.stored {
            Stored::Plain => name.into(),
            Stored::SmallInt => format!("{name}::int8 AS {name}").into(),
            Stored::Json => format!("{name}::text AS {name}").into(),
        }
    }

    const URL_PREFIX: &'static str = "left(url_hash, 16)";

    const WRITES_URL_PREFIX: bool = false;

    const TAGS_PARAM: &'static str = "?::jsonb";

    const BIGINT: &'static str = "BIGINT";

    fn push_tag(query: &mut Statement, tag: String) {
        query
            .push(" AND tags @> jsonb_build_array(")
            .bind(Value::Text(tag))
            .push("::text)");
    }

    fn push_search(query: &mut Statement, text: &str) {
        // The expression of the `links_search` trigram index, word for word.
        query
            .push(
                " AND lower(code || ' ' || target || ' ' || coalesce(recipient_ref, '') || ' ' || \
                 coalesce(campaign, '') || ' ' || coalesce(tags::text, '')) LIKE ",
            )
            .bind(Value::Text(crate::sql::rows::like_anywhere(text)))
            .push(" ESCAPE '!'");
    }

    async fn begin_quiesced(
        pool: &Pool<Postgres>,
    ) -> StorageResult<Transaction<'static, Postgres>> {
        let mut tx = Self::begin(pool).await?;
        // SHARE conflicts with the ROW EXCLUSIVE lock every INSERT/UPDATE takes: it waits for
        // the link writes in flight and blocks new ones until this transaction ends.
        sqlx::query("LOCK TABLE links IN SHARE MODE")
            .execute(&mut *tx)
            .await
            .map_err(StorageError::classify)?;
        Ok(tx)
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        Ok(EncodedRows::new(LinksCopy::new(rows)))
    }

    async fn insert_links(
        tx: &mut Transaction<'static, Postgres>,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>> {
        let data = encoded
            .into_inner::<LinksCopy>()
            .unwrap_or_else(|| LinksCopy::new(rows));
        if copy::copy_links(tx, &data).await? {
            return Ok(rows.iter().map(|row| row.link.code.clone()).collect());
        }
        copy::insert_links_skipping_conflicts(tx, &data).await
    }
}

impl PgStorage {
    pub(crate) async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        // Server-side bounds, so a request never waits indefinitely on a lock or a slow query
        // (answered 503), and a transaction left open by a stuck process cannot hold row locks.
        let lock_timeout = format!("{}ms", options.acquire_timeout.as_millis().max(1));
        let connect = PgConnectOptions::from_str(&options.url)?
            .application_name("shortlink-sidecar")
            .options([
                ("statement_timeout", "10s"),
                ("lock_timeout", lock_timeout.as_str()),
                ("idle_in_transaction_session_timeout", "60s"),
            ]);
        let pool = crate::pool::ping_after_idle(PgPoolOptions::new())
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(connect)
            .await
            .map_err(StorageError::classify)?;
        // The migrator takes an advisory lock, so sidecars starting together apply it once.
        sqlx_macros::migrate!("../../../migrations/postgres")
            .run(&pool)
            .await?;
        Ok(Self {
            dialect: Pg,
            writer: pool.clone(),
            reader: pool,
            audit_heads: Default::default(),
        })
    }
}

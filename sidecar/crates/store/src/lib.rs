//! SQL storage: the source of truth. One trait, one implementation per backend, chosen once from
//! the database URL's scheme.
//!
//! Writes that must reach Redis go through a [`LinkTx`], so the caller can publish to Redis between
//! the SQL write and the commit (see `shortlink_core::service`).

#![deny(unsafe_code)]

mod api;
pub mod audit;
mod error;
mod imported;
mod model;
pub mod mysql;
mod not_found;
pub mod patience;
pub mod pg_copy;
mod pool;
mod postgres;
mod quarantine;
pub mod sql;
mod sqlite;
pub mod sqlite_file;
mod sqlite_search;
pub mod sqlite_turn;
mod workspace;

pub use self::imported::ImportedLink;
pub use self::model::{
    ApiKey, CampaignStats, IdempotencyRecord, KeyRate, KeyWorkspace, LinkFilter, ListCursor,
    NewRow, Role, Slot,
};
use self::mysql::MysqlStorage;
pub use self::not_found::NotFoundRedirects;
use self::postgres::PgStorage;
pub use self::quarantine::{
    host_key, host_range, AbuseReport, LinkEvent, LinkEventKind, LinkEventReason, Quarantine,
    LINK_EVENT_PREFIX, WORKSPACE_LIST,
};
use self::sqlite::SqliteStorage;
pub use self::workspace::{
    display_name, is_valid_slug, DeletedWorkspace, Quotas, Standing, Workspace, WorkspaceChange,
    DEFAULT_SLUG, MAX_NAME_LEN, MAX_SLUG_LEN, NAME_RULE,
};
// The visit store (`shortlink_visits::store`) speaks the same dialects.
pub use self::{mysql::My, postgres::Pg, sqlite::Lite};

pub use self::api::{
    now, Backend, ConnectOptions, EncodedRows, LinkTx, SqliteCache, Storage, CODE_SCHEME_SETTING,
    RESTORED_BEHIND_REDIS_SETTING,
};
pub use self::error::{StorageError, StorageResult};
use std::sync::Arc;

/// Opens the database named by `options.url` and applies its migrations.
pub async fn connect(options: &ConnectOptions) -> StorageResult<Arc<dyn Storage>> {
    match Backend::from_url(&options.url) {
        Some(Backend::Sqlite) => Ok(Arc::new(SqliteStorage::connect(options).await?)),
        Some(Backend::Postgres) => Ok(Arc::new(PgStorage::connect(options).await?)),
        Some(Backend::Mysql) => Ok(Arc::new(MysqlStorage::connect(options).await?)),
        None => Err(StorageError::UnsupportedUrl(
            shortlink_config::redact::redact_url(&options.url),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        let cursor = ListCursor {
            created_at: now(),
            code: "a_b-c".into(),
        };
        assert_eq!(ListCursor::decode(&cursor.encode()), Some(cursor));
        // An imported code with dots and a tilde (issue 40).
        let imported = ListCursor {
            created_at: now(),
            code: "a.b~c".into(),
        };
        assert_eq!(ListCursor::decode(&imported.encode()), Some(imported));
        assert_eq!(ListCursor::decode("x.abc"), None);
        assert_eq!(ListCursor::decode("12.a'b"), None);
        assert_eq!(ListCursor::decode("12"), None);
        assert_eq!(ListCursor::decode("12."), None);
    }

    #[test]
    fn backend_from_url() {
        assert_eq!(Backend::from_url("sqlite://x.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::from_url("sqlite::memory:"), Some(Backend::Sqlite));
        assert_eq!(
            Backend::from_url("postgres://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::from_url("postgresql://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::from_url("mysql://u@h/db"), Some(Backend::Mysql));
        assert_eq!(Backend::from_url("mariadb://u@h/db"), Some(Backend::Mysql));
        assert_eq!(Backend::from_url("mssql://u@h/db"), None);
    }
}

//! How [`SqlStorage`] reaches its pools: reads on the reader, writes and read-backs on the writer,
//! every driver error sorted by [`StorageError::classify`].

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows::{self, API_KEY_SELECT};
use super::statement::{statement, Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::{StorageError, StorageResult};
use crate::model::ApiKey;
use shortlink_model::Link;
use sqlx::pool::PoolConnection;

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn read(&self) -> StorageResult<PoolConnection<D::DB>> {
        crate::patience::acquire(&self.reader)
            .await
            .map_err(StorageError::classify)
    }

    pub(super) async fn write(&self) -> StorageResult<PoolConnection<D::DB>> {
        crate::patience::acquire(&self.writer)
            .await
            .map_err(StorageError::classify)
    }

    pub(super) async fn rows(&self, query: Statement) -> StorageResult<Vec<Row<D>>> {
        let mut connection = self.read().await?;
        D::DB::fetch_all(&mut connection, query)
            .await
            .map_err(StorageError::classify)
    }

    pub(super) async fn row(&self, query: Statement) -> StorageResult<Option<Row<D>>> {
        let mut connection = self.read().await?;
        D::DB::fetch_optional(&mut connection, query)
            .await
            .map_err(StorageError::classify)
    }

    pub(super) async fn links(&self, query: Statement) -> StorageResult<Vec<Link>> {
        self.rows(query)
            .await?
            .iter()
            .map(rows::link::<D>)
            .collect()
    }

    pub(super) async fn text(
        &self,
        query: Statement,
        column: &str,
    ) -> StorageResult<Option<String>> {
        match self.row(query).await? {
            Some(row) => Ok(Some(D::read_text(&row, column)?)),
            None => Ok(None),
        }
    }

    /// Reads on the writer what was just written there (SQLite's readers are another pool).
    pub(super) async fn read_back(&self, query: Statement, what: &str) -> StorageResult<Row<D>> {
        let mut connection = self.write().await?;
        D::DB::fetch_optional(&mut connection, query)
            .await
            .map_err(StorageError::classify)?
            .ok_or_else(|| StorageError::Corrupt(format!("{what} vanished")))
    }

    /// Runs a write on its own (autocommit); returns the rows it affected.
    pub(super) async fn execute(&self, query: Statement) -> StorageResult<u64> {
        let mut connection = self.write().await?;
        D::DB::execute(&mut connection, query)
            .await
            .map_err(StorageError::classify)
    }

    /// Runs an insert; `false` if a unique key refused it.
    pub(super) async fn insert_unless_taken(&self, query: Statement) -> StorageResult<bool> {
        match self.execute(query).await {
            Ok(_) => Ok(true),
            Err(StorageError::Conflict) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn api_key_where(
        &self,
        condition: &str,
        value: Value,
    ) -> StorageResult<Option<ApiKey>> {
        let query = statement(
            &format!("{API_KEY_SELECT} WHERE k.{condition} = ?"),
            [value],
        );
        self.row(query)
            .await?
            .as_ref()
            .map(rows::api_key::<D>)
            .transpose()
    }
}

//! Not-found redirects in SQL (`not_found_redirects`): what [`SqlStorage`]'s trait methods of the
//! same names call.

use super::dialect::Dialect;
use super::driver::Driver;
use super::statement::{statement, Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::StorageResult;
use crate::not_found::NotFoundRedirects;
use chrono::{TimeZone, Utc};
use shortlink_model::WorkspaceId;

const COLUMNS: &str = "workspace_id, domain, root_url, unknown_url, expired_url, updated_ms";

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn not_found_rows(
        &self,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<NotFoundRedirects>> {
        let query = match workspace {
            Some(id) => statement(
                &format!(
                    "SELECT {COLUMNS} FROM not_found_redirects WHERE workspace_id = ? \
                     ORDER BY domain"
                ),
                [Value::Int(id.get())],
            ),
            None => Statement::new(format!(
                "SELECT {COLUMNS} FROM not_found_redirects ORDER BY workspace_id, domain"
            )),
        };
        self.rows(query).await?.iter().map(row::<D>).collect()
    }

    /// Replaces the row of (workspace, domain): delete and insert in one transaction (one
    /// statement for every backend's upsert); an empty one is only deleted.
    pub(super) async fn put_not_found_row(&self, r: &NotFoundRedirects) -> StorageResult<()> {
        let key = [Value::Int(r.workspace.get()), Value::Text(r.domain.clone())];
        let mut tx = D::begin(&self.writer).await?;
        let delete = statement(
            "DELETE FROM not_found_redirects WHERE workspace_id = ? AND domain = ?",
            key.clone(),
        );
        D::DB::execute(&mut tx, delete)
            .await
            .map_err(crate::StorageError::classify)?;
        if !r.is_empty() {
            let [workspace, domain] = key;
            let insert = statement(
                &format!("INSERT INTO not_found_redirects ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"),
                [
                    workspace,
                    domain,
                    Value::OptText(r.root_url.clone()),
                    Value::OptText(r.unknown_url.clone()),
                    Value::OptText(r.expired_url.clone()),
                    Value::Int(r.updated_at.timestamp_millis()),
                ],
            );
            D::DB::execute(&mut tx, insert)
                .await
                .map_err(crate::StorageError::classify)?;
        }
        tx.commit().await.map_err(crate::StorageError::classify)
    }
}

fn row<D: Dialect>(row: &Row<D>) -> StorageResult<NotFoundRedirects> {
    let ms = D::DB::int(row, "updated_ms")?;
    Ok(NotFoundRedirects {
        workspace: WorkspaceId::from_db(D::DB::int(row, "workspace_id")?),
        domain: D::read_text(row, "domain")?,
        root_url: D::read_opt_text(row, "root_url")?,
        unknown_url: D::read_opt_text(row, "unknown_url")?,
        expired_url: D::read_opt_text(row, "expired_url")?,
        updated_at: Utc.timestamp_millis_opt(ms).single().unwrap_or_default(),
    })
}

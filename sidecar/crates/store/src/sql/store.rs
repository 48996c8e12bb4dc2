//! The [`Storage`] of every SQL backend, written once over its [`Dialect`].
//!
//! Statements avoid what the backends do differently where a portable form costs nothing that
//! matters: no `RETURNING` (MariaDB lacks it on UPDATE), no `ON CONFLICT` (MySQL says
//! `ON DUPLICATE KEY`): a unique conflict is answered by the database as an error and read as
//! "already there", and a value written is read back in the same transaction.

use super::audit::HeadHints;
use super::campaigns;
use super::dialect::Dialect;
use super::driver::Driver;
use super::rows;
use super::statement::{statement, Statement, Value, IN_LIST};
use super::tx::SqlTx;
use crate::api::{Backend, EncodedRows, LinkTx, Storage, StorageError, StorageResult};
use crate::audit::{AuditEntry, AuditFilter, AuditHead, AuditRecord};
use crate::imported::ImportedLink;
use crate::model::{
    url_hash_prefix, ApiKey, CampaignStats, IdempotencyRecord, KeyRate, LinkFilter, ListCursor,
    NewRow, Role,
};
use crate::workspace::{DeletedWorkspace, Quotas, Workspace, WorkspaceChange};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::Link;
use shortlink_model::WorkspaceId;
use sqlx::{Database, Pool};
use std::sync::Arc;

/// Links, keys and settings in a SQL database. Writes go to `writer`, reads to `reader`: the same
/// pool except on SQLite, whose one writer is a pool of its own ([`super::super::sqlite_file`]).
pub(crate) struct SqlStorage<D: Dialect> {
    pub(crate) dialect: D,
    pub(crate) writer: Pool<D::DB>,
    pub(crate) reader: Pool<D::DB>,
    /// The audit chains' heads as this process last wrote them (see [`HeadHints`]).
    pub(crate) audit_heads: Arc<HeadHints>,
}

pub(super) type Row<D> = <<D as Dialect>::DB as Database>::Row;

// By hand: a derive would ask the driver type itself to be Clone.
impl<D: Dialect + Clone> Clone for SqlStorage<D> {
    fn clone(&self) -> Self {
        Self {
            dialect: self.dialect.clone(),
            writer: self.writer.clone(),
            reader: self.reader.clone(),
            audit_heads: Arc::clone(&self.audit_heads),
        }
    }
}

#[async_trait]
impl<D: Dialect> Storage for SqlStorage<D> {
    fn backend(&self) -> Backend {
        D::BACKEND
    }

    fn pool_use(&self) -> Vec<(&'static str, u32, usize)> {
        if D::BACKEND == Backend::Sqlite {
            vec![
                ("writer", self.writer.size(), self.writer.num_idle()),
                ("reader", self.reader.size(), self.reader.num_idle()),
            ]
        } else {
            vec![("main", self.writer.size(), self.writer.num_idle())]
        }
    }

    async fn ping(&self) -> StorageResult<()> {
        self.row(Statement::new("SELECT 1")).await?;
        Ok(())
    }

    async fn lease_sequence_block(&self, size: u64) -> StorageResult<u64> {
        // The update's row lock, held to the commit, serialises concurrent leases: the value read
        // back is this lease's, so blocks never overlap.
        let size = sequence_value(size)?;
        let mut tx = D::begin(&self.writer).await?;
        let update = statement(
            "UPDATE sequence_blocks SET next_value = next_value + ? WHERE name = 'links'",
            [Value::Int(size)],
        );
        D::DB::execute(&mut tx, update)
            .await
            .map_err(StorageError::classify)?;
        let read = Statement::new("SELECT next_value FROM sequence_blocks WHERE name = 'links'");
        let row = D::DB::fetch_optional(&mut tx, read)
            .await
            .map_err(StorageError::classify)?
            .ok_or_else(|| StorageError::Corrupt("no links sequence".into()))?;
        let end = D::DB::int(&row, "next_value")?;
        tx.commit().await.map_err(StorageError::classify)?;
        sequence_read(end - size)
    }

    async fn get_link(&self, workspace: WorkspaceId, code: &str) -> StorageResult<Option<Link>> {
        // By primary key, then the owner: the same work whether another workspace owns the code
        // or nobody does.
        let query = statement(
            &format!(
                "SELECT {} FROM links WHERE code = ? AND workspace_id = ?",
                rows::select_columns::<D>()
            ),
            [Value::Text(code.to_owned()), Value::Int(workspace.get())],
        );
        self.row(query)
            .await?
            .as_ref()
            .map(rows::link::<D>)
            .transpose()
    }

    async fn link_by_code(&self, code: &str) -> StorageResult<Option<Link>> {
        let query = statement(
            &format!(
                "SELECT {} FROM links WHERE code = ?",
                rows::select_columns::<D>()
            ),
            [Value::Text(code.to_owned())],
        );
        self.row(query)
            .await?
            .as_ref()
            .map(rows::link::<D>)
            .transpose()
    }

    async fn find_live_link(
        &self,
        workspace: WorkspaceId,
        url_hash: &str,
        recipient_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<Link>> {
        // Each form names its index's key and predicate (migration 9), so the planner can use it.
        let (by, key) = match recipient_ref {
            None => (
                format!("{} = ? AND recipient_ref IS NULL", D::URL_PREFIX),
                url_hash_prefix(url_hash),
            ),
            Some(recipient_ref) => ("recipient_ref = ?".to_owned(), recipient_ref),
        };
        let query = statement(
            &format!(
                "SELECT {} FROM links \
                 WHERE {by} AND url_hash = ? AND revoked_at IS NULL \
                   AND (expires_at IS NULL OR expires_at > ?) AND workspace_id = ? \
                 ORDER BY created_at DESC, code DESC LIMIT 1",
                rows::select_columns::<D>()
            ),
            [
                Value::Text(key.to_owned()),
                Value::Text(url_hash.to_owned()),
                D::time(now),
                Value::Int(workspace.get()),
            ],
        );
        self.row(query)
            .await?
            .as_ref()
            .map(rows::link::<D>)
            .transpose()
    }

    async fn list_links(
        &self,
        filter: &LinkFilter,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let mut query = rows::select_links::<D>(filter);
        if let Some(cursor) = after {
            query.push(" AND (created_at, code) < (");
            query.bind(D::time(cursor.created_at));
            query.push(", ");
            query.bind(Value::Text(cursor.code.clone()));
            query.push(")");
        }
        query.push(" ORDER BY created_at DESC, code DESC LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        self.links(query).await
    }

    async fn scan_links(
        &self,
        filter: &LinkFilter,
        after_code: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let mut query = rows::select_links::<D>(filter);
        if filter
            .workspace()
            .is_some_and(|w| w != WorkspaceId::DEFAULT)
        {
            // Spelled out: the code-order index covers only these rows (migration 49), and a
            // planner takes a partial index only when the query's text implies its condition.
            query.push(" AND workspace_id <> 1");
        }
        query.push(" AND code > ");
        query.bind(Value::Text(after_code.unwrap_or("").to_owned()));
        query.push(" ORDER BY code LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        self.links(query).await
    }

    async fn existing_codes(&self, codes: &[String]) -> StorageResult<Vec<String>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(IN_LIST) {
            let query = rows::in_list(
                "SELECT code FROM links WHERE code IN",
                part.iter().map(|code| Value::Text(code.clone())),
            );
            for row in self.rows(query).await? {
                found.push(D::read_text(&row, "code")?);
            }
        }
        Ok(found)
    }

    async fn count_links(&self, filter: &LinkFilter) -> StorageResult<u64> {
        let mut query = Statement::new("SELECT COUNT(*) AS n FROM links");
        rows::push_filter::<D>(&mut query, filter);
        let row = self.row(query).await?;
        let count = row.map(|row| D::DB::int(&row, "n")).transpose()?;
        Ok(count.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
    }

    async fn list_campaigns(
        &self,
        workspace: WorkspaceId,
        after: &str,
        limit: u32,
    ) -> StorageResult<Vec<String>> {
        // A skip scan of `links_workspace_campaign`: one index seek per campaign.
        let workspace = Value::Int(workspace.get());
        let query = statement(
            "WITH RECURSIVE c(name, n) AS ( \
               SELECT (SELECT MIN(campaign) FROM links WHERE workspace_id = ? AND campaign > ?), 1 \
               UNION ALL \
               SELECT (SELECT MIN(campaign) FROM links \
                       WHERE workspace_id = ? AND campaign > c.name), c.n + 1 \
               FROM c WHERE c.name IS NOT NULL AND c.n < ? \
             ) SELECT name FROM c WHERE name IS NOT NULL",
            [
                workspace.clone(),
                Value::Text(after.to_owned()),
                workspace,
                Value::Int(i64::from(limit)),
            ],
        );
        self.rows(query)
            .await?
            .iter()
            .map(|row| D::read_text(row, "name"))
            .collect()
    }

    async fn campaign_stats(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<CampaignStats> {
        let query = campaigns::one::<D>(workspace, campaign, now);
        let row = self
            .row(query)
            .await?
            .ok_or_else(|| StorageError::Corrupt("no campaign aggregate".into()))?;
        campaigns::stats::<D>(&row)
    }

    async fn campaign_totals(
        &self,
        workspace: WorkspaceId,
        only: Option<&[String]>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<Vec<(String, CampaignStats)>> {
        let Some(query) = campaigns::many::<D>(workspace, only, now, limit) else {
            return Ok(Vec::new());
        };
        (self.rows(query).await?.iter())
            .map(|row| Ok((D::read_text(row, "campaign")?, campaigns::stats::<D>(row)?)))
            .collect()
    }

    async fn claim_idempotency_key(
        &self,
        api_key_id: i64,
        key: &str,
        request_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<IdempotencyRecord> {
        let fresh = self
            .insert_unless_taken(statement(
                "INSERT INTO idempotency_keys (api_key_id, \"key\", request_hash, created_at) \
                 VALUES (?, ?, ?, ?)",
                [
                    Value::Int(api_key_id),
                    Value::Text(key.to_owned()),
                    Value::Text(request_hash.to_owned()),
                    D::time(now),
                ],
            ))
            .await?;
        // From the writer: a reader (SQLite's own pool) sees the row as soon as it is committed
        // too, but the writer is where it was just written.
        let query = statement(
            "SELECT id, request_hash FROM idempotency_keys WHERE api_key_id = ? AND \"key\" = ?",
            [Value::Int(api_key_id), Value::Text(key.to_owned())],
        );
        let row = self.read_back(query, "idempotency key").await?;
        Ok(IdempotencyRecord {
            id: D::DB::int(&row, "id")?,
            request_hash: D::read_text(&row, "request_hash")?,
            fresh,
        })
    }

    async fn links_by_slots(
        &self,
        batch_id: i64,
        from: i64,
        to: i64,
    ) -> StorageResult<Vec<(i64, Link)>> {
        let query = statement(
            &format!(
                "SELECT batch_index, {} FROM links \
                 WHERE batch_id = ? AND batch_index BETWEEN ? AND ?",
                rows::select_columns::<D>()
            ),
            [Value::Int(batch_id), Value::Int(from), Value::Int(to)],
        );
        self.rows(query)
            .await?
            .iter()
            .map(rows::slot_link::<D>)
            .collect()
    }

    async fn prune_idempotency_keys(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<u64> {
        // Ids first, then a delete by id: MariaDB has no LIMIT in an IN subquery, SQLite no
        // DELETE ... LIMIT.
        let query = statement(
            "SELECT id FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?",
            [D::time(before), Value::Int(i64::from(limit))],
        );
        let ids: Vec<Value> = self
            .rows(query)
            .await?
            .iter()
            .map(|row| Ok(Value::Int(D::DB::int(row, "id")?)))
            .collect::<StorageResult<_>>()?;
        let mut deleted = 0;
        for part in ids.chunks(IN_LIST) {
            deleted += self
                .execute(rows::in_list(
                    "DELETE FROM idempotency_keys WHERE id IN",
                    part.iter().cloned(),
                ))
                .await?;
        }
        Ok(deleted)
    }

    async fn raise_sequence(&self, next: u64) -> StorageResult<bool> {
        let next = sequence_value(next)?;
        let done = self
            .execute(statement(
                "UPDATE sequence_blocks SET next_value = ? WHERE name = 'links' AND next_value < ?",
                [Value::Int(next), Value::Int(next)],
            ))
            .await?;
        Ok(done > 0)
    }

    async fn setting(&self, name: &str) -> StorageResult<Option<String>> {
        let query = statement(
            "SELECT value FROM settings WHERE name = ?",
            [Value::Text(name.to_owned())],
        );
        self.text(query, "value").await
    }

    async fn init_setting(
        &self,
        name: &str,
        value: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<String> {
        self.insert_unless_taken(statement(
            "INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)",
            [
                Value::Text(name.to_owned()),
                Value::Text(value.to_owned()),
                D::time(now),
            ],
        ))
        .await?;
        let query = statement(
            "SELECT value FROM settings WHERE name = ?",
            [Value::Text(name.to_owned())],
        );
        let row = self.read_back(query, &format!("setting {name}")).await?;
        Ok(D::read_text(&row, "value")?)
    }

    async fn set_setting(&self, name: &str, value: &str, now: DateTime<Utc>) -> StorageResult<()> {
        let update = || {
            statement(
                "UPDATE settings SET value = ?, updated_at = ? WHERE name = ?",
                [
                    Value::Text(value.to_owned()),
                    D::time(now),
                    Value::Text(name.to_owned()),
                ],
            )
        };
        // Matched rows (MySQL's affected rows are matched ones for this client), so 0 means
        // there is no such setting yet; a concurrent first insert makes ours a conflict.
        if self.execute(update()).await? == 0
            && !self
                .insert_unless_taken(statement(
                    "INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)",
                    [
                        Value::Text(name.to_owned()),
                        Value::Text(value.to_owned()),
                        D::time(now),
                    ],
                ))
                .await?
        {
            self.execute(update()).await?;
        }
        Ok(())
    }

    async fn delete_setting(&self, name: &str) -> StorageResult<()> {
        self.execute(statement(
            "DELETE FROM settings WHERE name = ?",
            [Value::Text(name.to_owned())],
        ))
        .await?;
        Ok(())
    }

    async fn sequence_next(&self) -> StorageResult<u64> {
        let query = Statement::new("SELECT next_value FROM sequence_blocks WHERE name = 'links'");
        let row = self.read_back(query, "the links sequence").await?;
        sequence_read(D::DB::int(&row, "next_value")?)
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        self.dialect.encode_rows(rows)
    }

    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = D::begin(&self.writer).await?;
        let hints = Arc::clone(&self.audit_heads);
        Ok(Box::new(SqlTx::<D>::new(tx, false, hints)))
    }

    async fn begin_batch(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = self.dialect.begin_batch(&self.writer).await?;
        let hints = Arc::clone(&self.audit_heads);
        Ok(Box::new(SqlTx::<D>::new(tx, false, hints)))
    }

    async fn begin_quiesced(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = D::begin_quiesced(&self.writer).await?;
        let hints = Arc::clone(&self.audit_heads);
        Ok(Box::new(SqlTx::<D>::new(tx, true, hints)))
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>> {
        self.api_key_where("key_hash", Value::Text(key_hash.to_owned()))
            .await
    }

    async fn create_api_key(
        &self,
        name: &str,
        role: Role,
        workspace: Option<WorkspaceId>,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey> {
        self.insert_api_key(name, role, workspace, key_hash, now)
            .await
    }

    async fn ensure_api_key(
        &self,
        name: &str,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<bool> {
        self.insert_unless_taken(statement(
            "INSERT INTO api_keys (name, role, workspace_id, key_hash, created_at) \
             VALUES (?, 'admin', ?, ?, ?)",
            [
                Value::Text(name.to_owned()),
                Value::Int(WorkspaceId::DEFAULT.get()),
                Value::Text(key_hash.to_owned()),
                D::time(now),
            ],
        ))
        .await
    }

    async fn list_api_keys(&self, workspace: Option<WorkspaceId>) -> StorageResult<Vec<ApiKey>> {
        self.api_keys_of(workspace).await
    }

    async fn revoke_api_key(
        &self,
        workspace: Option<WorkspaceId>,
        id: i64,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<ApiKey>> {
        self.revoke_key(workspace, id, now).await
    }

    async fn set_api_key_rate(&self, id: i64, rate: Option<KeyRate>) -> StorageResult<()> {
        let column =
            |value: Option<u64>| Value::OptInt(value.map(|v| i64::try_from(v).unwrap_or(i64::MAX)));
        self.execute(statement(
            "UPDATE api_keys SET rate_per_second = ?, rate_burst = ? WHERE id = ?",
            [
                column(rate.map(|rate| rate.per_second)),
                column(rate.map(|rate| rate.burst)),
                Value::Int(id),
            ],
        ))
        .await?;
        Ok(())
    }

    async fn workspaces(&self) -> StorageResult<Vec<Workspace>> {
        self.workspace_rows(None).await
    }

    async fn workspace(&self, id: WorkspaceId) -> StorageResult<Option<Workspace>> {
        Ok(self
            .workspace_rows(Some(("id", Value::Int(id.get()))))
            .await?
            .pop())
    }

    async fn workspace_by_slug(&self, slug: &str) -> StorageResult<Option<Workspace>> {
        Ok(self
            .workspace_rows(Some(("slug", Value::Text(slug.to_owned()))))
            .await?
            .pop())
    }

    async fn create_workspace(
        &self,
        slug: &str,
        name: &str,
        quotas: Quotas,
        now: DateTime<Utc>,
    ) -> StorageResult<Workspace> {
        self.insert_workspace(slug, name, quotas, now).await
    }

    async fn change_workspace(
        &self,
        id: WorkspaceId,
        change: &WorkspaceChange,
    ) -> StorageResult<Option<Workspace>> {
        self.update_workspace(id, change).await
    }

    async fn delete_workspace(&self, id: WorkspaceId) -> StorageResult<DeletedWorkspace> {
        self.delete_workspace_rows(id).await
    }

    async fn imported_links(&self, codes: &[String]) -> StorageResult<Vec<ImportedLink>> {
        self.imported_rows(codes).await
    }

    async fn record_imported(&self, links: &[ImportedLink]) -> StorageResult<()> {
        self.insert_imported(links).await
    }

    async fn raise_visit_count(
        &self,
        workspace: WorkspaceId,
        code: &str,
        total: i64,
        at: DateTime<Utc>,
    ) -> StorageResult<()> {
        SqlStorage::raise_visit_count(self, workspace, code, total, at).await
    }

    async fn not_found_redirects(
        &self,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<crate::NotFoundRedirects>> {
        self.not_found_rows(workspace).await
    }

    async fn put_not_found_redirects(&self, row: &crate::NotFoundRedirects) -> StorageResult<()> {
        self.put_not_found_row(row).await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> StorageResult<()> {
        self.append_audit_alone(entry).await
    }

    async fn list_audit(&self, filter: &AuditFilter) -> StorageResult<Vec<AuditRecord>> {
        self.audit_rows(filter).await
    }

    async fn audit_heads(&self) -> StorageResult<Vec<AuditHead>> {
        self.audit_head_rows().await
    }

    async fn audit_chain(
        &self,
        workspace_id: i64,
        after_seq: i64,
        limit: u32,
    ) -> StorageResult<Vec<AuditRecord>> {
        self.audit_chain_rows(workspace_id, after_seq, limit).await
    }

    async fn prune_audit(&self, before_ms: i64) -> StorageResult<u64> {
        self.prune_audit_rows(before_ms).await
    }

    async fn links_on_host(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        self.links_on_host_page(host, after, limit).await
    }

    async fn link_host_keys(&self, after: Option<&str>, limit: u32) -> StorageResult<Vec<String>> {
        self.host_keys_page(after, limit).await
    }

    async fn links_sending_to_host(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        self.links_sending_to_host_page(host, after, limit).await
    }

    async fn destination_host_keys(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<String>> {
        self.destination_keys_page(after, limit).await
    }

    async fn fill_link_host_keys(&self, limit: u32) -> StorageResult<u64> {
        self.fill_host_keys(limit).await
    }

    async fn quarantines(
        &self,
        feed: Option<&str>,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<crate::Quarantine>> {
        self.quarantine_rows(feed, workspace).await
    }

    async fn record_abuse_report(&self, report: &crate::AbuseReport) -> StorageResult<()> {
        self.insert_abuse_report(report).await
    }

    async fn abuse_reports(&self, limit: u32) -> StorageResult<Vec<crate::AbuseReport>> {
        self.abuse_report_rows(limit).await
    }
}

/// A sequence's value as SQL keeps it (a signed 64-bit integer).
fn sequence_value(value: u64) -> StorageResult<i64> {
    i64::try_from(value).map_err(|_| StorageError::Corrupt(format!("sequence value {value}")))
}

/// A sequence's value as SQL returned it.
fn sequence_read(value: i64) -> StorageResult<u64> {
    u64::try_from(value).map_err(|_| StorageError::Corrupt(format!("sequence value {value}")))
}

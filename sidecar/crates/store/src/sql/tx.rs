//! The [`LinkTx`] of every SQL backend, written once over its [`Dialect`].

use super::audit::HeadHints;
use super::dialect::Dialect;
use super::driver::Driver;
use super::quarantine;
use super::rows::{self, insert_columns, link_placeholders, link_values, push_list};
use super::statement::{statement, Statement, Value, IN_LIST};
use crate::api::{EncodedRows, LinkTx, StorageError, StorageResult};
use crate::audit::AuditEntry;
use crate::model::{NewRow, Slot};
use crate::quarantine::{LinkEvent, Quarantine};
use crate::workspace::Standing;
use async_trait::async_trait;
use shortlink_model::Link;
use shortlink_model::WorkspaceId;
use sqlx::{Database, Transaction};
use std::sync::Arc;

pub(crate) struct SqlTx<D: Dialect> {
    tx: Transaction<'static, D::DB>,
    /// Begun by [`Storage::begin_quiesced`](crate::Storage::begin_quiesced): reads of
    /// codes add [`Dialect::QUIESCE_READ`].
    quiesced: bool,
    audit_heads: Arc<HeadHints>,
    /// Link events to store with a feed row of their own at the commit, last (the feed clock's
    /// lock held only to the commit).
    events: Vec<LinkEvent>,
}

type Row<D> = <<D as Dialect>::DB as Database>::Row;

impl<D: Dialect> SqlTx<D> {
    pub(crate) fn new(
        tx: Transaction<'static, D::DB>,
        quiesced: bool,
        audit_heads: Arc<HeadHints>,
    ) -> Self {
        Self {
            tx,
            quiesced,
            audit_heads,
            events: Vec::new(),
        }
    }

    async fn rows(&mut self, query: Statement) -> StorageResult<Vec<Row<D>>> {
        D::DB::fetch_all(&mut self.tx, query)
            .await
            .map_err(StorageError::classify)
    }

    async fn execute(&mut self, query: Statement) -> StorageResult<u64> {
        D::DB::execute(&mut self.tx, query)
            .await
            .map_err(StorageError::classify)
    }

    /// Reads the link with `code` (of `workspace` only, if given) and locks its row.
    async fn lock_where(
        &mut self,
        code: &str,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Option<Link>> {
        let mut query = statement(
            &format!(
                "SELECT {} FROM links WHERE code = ?",
                rows::select_columns::<D>()
            ),
            [Value::Text(code.to_owned())],
        );
        if let Some(workspace) = workspace {
            query.push(" AND workspace_id = ");
            query.bind(Value::Int(workspace.get()));
        }
        query.push(D::FOR_UPDATE);
        let row = D::DB::fetch_optional(&mut self.tx, query)
            .await
            .map_err(StorageError::classify)?;
        row.as_ref().map(rows::link::<D>).transpose()
    }
}

#[async_trait]
impl<D: Dialect> LinkTx for SqlTx<D> {
    async fn insert_link(&mut self, link: &Link, slot: Option<Slot>) -> StorageResult<()> {
        self.execute(insert_link::<D>(link, slot)).await?;
        Ok(())
    }

    async fn insert_link_audited(
        &mut self,
        link: &Link,
        slot: Option<Slot>,
        audit: &AuditEntry,
    ) -> StorageResult<bool> {
        let insert = insert_link::<D>(link, slot);
        super::audit::append_with::<D>(&mut self.tx, &self.audit_heads, insert, audit).await
    }

    async fn insert_links(
        &mut self,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        D::insert_links(&mut self.tx, rows, encoded).await
    }

    async fn links_by_slot_list(
        &mut self,
        batch_id: i64,
        indexes: &[i64],
    ) -> StorageResult<Vec<(i64, Link)>> {
        let mut found = Vec::new();
        for part in indexes.chunks(IN_LIST) {
            let mut query = statement(
                &format!(
                    "SELECT batch_index, {} FROM links WHERE batch_id = ? AND batch_index IN",
                    rows::select_columns::<D>()
                ),
                [Value::Int(batch_id)],
            );
            push_list(&mut query, part.iter().map(|&index| Value::Int(index)));
            for row in self.rows(query).await? {
                found.push(rows::slot_link::<D>(&row)?);
            }
        }
        Ok(found)
    }

    async fn existing_codes(&mut self, codes: &[String]) -> StorageResult<Vec<String>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(IN_LIST) {
            let mut query = rows::in_list(
                "SELECT code FROM links WHERE code IN",
                part.iter().map(|code| Value::Text(code.clone())),
            );
            if self.quiesced {
                query.push(D::QUIESCE_READ);
            }
            for row in self.rows(query).await? {
                found.push(D::read_text(&row, "code")?);
            }
        }
        Ok(found)
    }

    async fn delete_new_links(&mut self, codes: &[String]) -> StorageResult<()> {
        for part in codes.chunks(IN_LIST) {
            self.execute(rows::in_list(
                "DELETE FROM links WHERE code IN",
                part.iter().map(|code| Value::Text(code.clone())),
            ))
            .await?;
        }
        Ok(())
    }

    async fn lock_link(
        &mut self,
        workspace: WorkspaceId,
        code: &str,
    ) -> StorageResult<Option<Link>> {
        self.lock_where(code, Some(workspace)).await
    }

    async fn lock_link_by_code(&mut self, code: &str) -> StorageResult<Option<Link>> {
        self.lock_where(code, None).await
    }

    async fn update_link(&mut self, link: &Link) -> StorageResult<()> {
        self.execute(rows::update_link::<D>(link)).await?;
        Ok(())
    }

    async fn quarantine_of(&mut self, code: &str) -> StorageResult<Option<Quarantine>> {
        let rows = self.rows(quarantine::select_one(code)).await?;
        rows.first().map(quarantine::row::<D>).transpose()
    }

    async fn put_quarantine(&mut self, row: &Quarantine) -> StorageResult<()> {
        self.execute(quarantine::delete(&row.code)).await?;
        self.execute(quarantine::insert::<D>(row)).await?;
        Ok(())
    }

    async fn delete_quarantine(&mut self, code: &str) -> StorageResult<()> {
        self.execute(quarantine::delete(code)).await?;
        Ok(())
    }

    async fn append_audit(&mut self, entry: &AuditEntry) -> StorageResult<()> {
        super::audit::append::<D>(&mut self.tx, &self.audit_heads, entry).await
    }

    async fn standing(
        &mut self,
        workspace: WorkspaceId,
        key: Option<i64>,
        hold: bool,
    ) -> StorageResult<Standing> {
        let lock = if hold { D::FOR_SHARE } else { "" };
        // The workspace's row first, the key's only while it is live: a delete (which suspends
        // before it deletes, and deletes keys before the workspace) never finds this
        // transaction holding a key it waits for while it waits for the workspace.
        let query = statement(
            &format!("SELECT suspended_at FROM workspaces WHERE id = ?{lock}"),
            [Value::Int(workspace.get())],
        );
        let Some(row) = self.rows(query).await?.pop() else {
            return Ok(Standing::WorkspaceDeleted);
        };
        if D::read_opt_time(&row, "suspended_at")?.is_some() {
            return Ok(Standing::WorkspaceSuspended);
        }
        let Some(key) = key else {
            return Ok(Standing::Live);
        };
        let query = statement(
            &format!("SELECT revoked_at FROM api_keys WHERE id = ? AND workspace_id = ?{lock}"),
            [Value::Int(key), Value::Int(workspace.get())],
        );
        Ok(match self.rows(query).await?.pop() {
            None => Standing::WorkspaceDeleted,
            Some(row) if D::read_opt_time(&row, "revoked_at")?.is_some() => Standing::KeyRevoked,
            Some(_) => Standing::Live,
        })
    }

    async fn set_destination_hosts(&mut self, code: &str, urls: &[String]) -> StorageResult<()> {
        for write in quarantine::destination_hosts(code, urls) {
            self.execute(write).await?;
        }
        Ok(())
    }

    fn stage_link_event(&mut self, event: LinkEvent) {
        self.events.push(event);
    }

    async fn commit(mut self: Box<Self>) -> StorageResult<()> {
        if !self.events.is_empty() {
            super::feed::append_link_events::<D>(&mut self.tx, &self.events).await?;
        }
        self.tx.commit().await.map_err(StorageError::classify)
    }

    async fn rollback(self: Box<Self>) -> StorageResult<()> {
        self.tx.rollback().await.map_err(StorageError::classify)
    }
}

fn insert_link<D: Dialect>(link: &Link, slot: Option<Slot>) -> Statement {
    statement(
        &format!(
            "INSERT INTO links ({}) VALUES {}",
            insert_columns::<D>(),
            link_placeholders::<D>()
        ),
        link_values::<D>(link, slot),
    )
}

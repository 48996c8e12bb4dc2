//! The audit log's statements (`crate::audit`), the same on every backend: times are integers,
//! and the head row's lock (`FOR UPDATE`; SQLite: its one writer) serialises a chain's appends.

use super::dialect::Dialect;
use super::driver::Driver;
use super::statement::{statement, Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::{Backend, StorageError, StorageResult};
use crate::audit::hash::{row_hash, GENESIS};
use crate::audit::{AuditEntry, AuditFilter, AuditHead, AuditRecord};
use chrono::Utc;
use sqlx::Database;
use std::collections::HashMap;
use std::sync::Mutex;

type Connection<D> = <<D as Dialect>::DB as Database>::Connection;

const COLUMNS: &str = "id, workspace_id, seq, at_ms, actor_kind, actor_id, actor_name, action, \
    object, changes, request_id, client_addr, batch_size, idempotency_key, prev_hash, hash";

/// Each workspace's chain head (last `seq` and hash) as this process last wrote it: a hint that
/// spares an append the read of its head. The append's update of the head is conditional on the
/// hint, so a stale one (another process appended since, or the transaction that wrote it rolled
/// back) costs a locked re-read, never a wrong row.
#[derive(Default)]
pub(crate) struct HeadHints(Mutex<HashMap<i64, (i64, String)>>);

impl HeadHints {
    fn get(&self, workspace: i64) -> Option<(i64, String)> {
        let hints = self.0.lock().unwrap_or_else(|e| e.into_inner());
        hints.get(&workspace).cloned()
    }

    fn set(&self, workspace: i64, seq: i64, hash: String) {
        let mut hints = self.0.lock().unwrap_or_else(|e| e.into_inner());
        hints.insert(workspace, (seq, hash));
    }
}

/// Appends `entry` to its workspace's chain on `connection`, which must be in a transaction:
/// the head stays locked until it ends, so the row and the change it records commit together.
///
/// With a hint, one statement on PostgreSQL (the head's conditional update and the insert in one
/// CTE) and two elsewhere; without one, or with a stale one, the head is read under lock first.
pub(crate) async fn append<D: Dialect>(
    connection: &mut Connection<D>,
    hints: &HeadHints,
    entry: &AuditEntry,
) -> StorageResult<()> {
    let workspace = entry.workspace_id;
    if let Some((last_seq, last_hash)) = hints.get(workspace) {
        let row = record_of(entry, last_seq, last_hash);
        if append_after_hint::<D>(connection, &row).await? {
            hints.set(workspace, row.seq, row.hash);
            return Ok(());
        }
    }
    let (last_seq, last_hash) = match lock_head::<D>(connection, workspace).await? {
        Some(head) => head,
        None => {
            // A workspace's first row: make its head (a concurrent first append's is kept),
            // then lock it like any other.
            let (head, tail) = match D::BACKEND {
                Backend::Sqlite => ("INSERT OR IGNORE INTO", ""),
                Backend::Postgres => ("INSERT INTO", " ON CONFLICT (workspace_id) DO NOTHING"),
                Backend::Mysql => ("INSERT IGNORE INTO", ""),
            };
            let insert = statement(
                &format!(
                    "{head} audit_heads (workspace_id, last_seq, last_hash, anchor_seq, \
                     anchor_hash) VALUES (?, 0, ?, 0, ?){tail}"
                ),
                [
                    Value::Int(workspace),
                    Value::Text(GENESIS.into()),
                    Value::Text(GENESIS.into()),
                ],
            );
            execute::<D>(connection, insert).await?;
            lock_head::<D>(connection, workspace)
                .await?
                .ok_or_else(|| StorageError::Corrupt("audit head vanished".into()))?
        }
    };
    let row = record_of(entry, last_seq, last_hash);
    execute::<D>(connection, insert_row(&row, "VALUES (", ")")).await?;
    let update = statement(
        "UPDATE audit_heads SET last_seq = ?, last_hash = ? WHERE workspace_id = ?",
        [
            Value::Int(row.seq),
            Value::Text(row.hash.clone()),
            Value::Int(workspace),
        ],
    );
    execute::<D>(connection, update).await?;
    hints.set(workspace, row.seq, row.hash);
    Ok(())
}

/// Runs `change`, a statement that changes exactly one row (a link's insert), and in the same
/// round trip appends `entry` when this process's hint of the chain head is right: `true`.
/// `false`: `change` ran alone (no hint, a stale one, or MariaDB, which takes neither a statement
/// list nor an insert in a CTE), and the caller appends with [`append`] before its commit.
///
/// What it saves is the append's round trip (PostgreSQL) or its two calls into SQLite's writer
/// thread, a create's only statements beyond its insert and commit. The chain head stays locked
/// from here to the commit, across the create's Redis write: on SQLite the one writer is held
/// that long anyway; on PostgreSQL it serialises a workspace's single creates over that write.
pub(crate) async fn append_with<D: Dialect>(
    connection: &mut Connection<D>,
    hints: &HeadHints,
    change: Statement,
    entry: &AuditEntry,
) -> StorageResult<bool> {
    let hint = match D::BACKEND {
        Backend::Mysql => None,
        Backend::Sqlite | Backend::Postgres => hints.get(entry.workspace_id),
    };
    let Some((last_seq, last_hash)) = hint else {
        execute::<D>(connection, change).await?;
        return Ok(false);
    };
    let row = record_of(entry, last_seq, last_hash);
    let mut head = head_after_hint(&row);
    let appended = if D::BACKEND == Backend::Postgres {
        // The update and the audit insert as CTEs of the change; the change reports whether
        // the head moved (it always runs: a data-modifying CTE runs whether read or not).
        head.push(" RETURNING workspace_id");
        let mut query = Statement::new("WITH head AS (");
        append_statement(&mut query, head);
        query.push("), audit AS (");
        append_statement(&mut query, insert_row(&row, "SELECT ", " FROM head"));
        query.push(") ");
        append_statement(&mut query, change);
        query.push(" RETURNING (SELECT count(*) FROM head) AS appended");
        let answer = D::DB::fetch_optional(connection, query)
            .await
            .map_err(StorageError::classify)?;
        match answer {
            Some(answer) => D::DB::int(&answer, "appended")? == 1,
            None => false,
        }
    } else {
        // SQLite runs a list of statements in one call, binding in order; `changes()` is the
        // rows the head's update changed, so the row goes in only if the head moved. Three
        // rows changed in all when it did.
        let mut query = change;
        query.push("; ");
        append_statement(&mut query, head);
        query.push("; ");
        append_statement(
            &mut query,
            insert_row(&row, "SELECT ", " WHERE changes() = 1"),
        );
        execute::<D>(connection, query).await? == 3
    };
    if appended {
        hints.set(entry.workspace_id, row.seq, row.hash);
    }
    Ok(appended)
}

/// The row `entry` makes after a head at `last_seq` with `last_hash`, its hash computed.
fn record_of(entry: &AuditEntry, last_seq: i64, last_hash: String) -> AuditRecord {
    let mut row = AuditRecord {
        id: 0,
        workspace_id: entry.workspace_id,
        seq: last_seq + 1,
        at_ms: Utc::now().timestamp_millis(),
        actor_kind: entry.actor.kind.as_str().to_owned(),
        actor_id: entry.actor.id,
        actor_name: entry.actor.name.clone(),
        action: entry.action.clone(),
        object: entry.object.clone(),
        changes: entry.changes.to_json(),
        request_id: entry.request.request_id.clone(),
        client_addr: entry.request.client_addr.clone(),
        batch_size: entry.batch_size,
        idempotency_key: entry.idempotency_key.clone(),
        prev_hash: last_hash,
        hash: String::new(),
    };
    row.hash = row_hash(&row);
    row
}

/// `INSERT INTO audit_log (...) <open><the row's values><close>`.
fn insert_row(row: &AuditRecord, open: &str, close: &str) -> Statement {
    let values = [
        Value::Int(row.workspace_id),
        Value::Int(row.seq),
        Value::Int(row.at_ms),
        Value::Text(row.actor_kind.clone()),
        Value::OptInt(row.actor_id),
        Value::Text(row.actor_name.clone()),
        Value::Text(row.action.clone()),
        Value::Text(row.object.clone()),
        Value::Text(row.changes.clone()),
        Value::OptText(row.request_id.clone()),
        Value::OptText(row.client_addr.clone()),
        Value::OptInt(row.batch_size),
        Value::OptText(row.idempotency_key.clone()),
        Value::Text(row.prev_hash.clone()),
        Value::Text(row.hash.clone()),
    ];
    let mut query = Statement::new(format!(
        "INSERT INTO audit_log (workspace_id, seq, at_ms, actor_kind, actor_id, actor_name, \
         action, object, changes, request_id, client_addr, batch_size, idempotency_key, \
         prev_hash, hash) {open}"
    ));
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            query.push(", ");
        }
        query.bind(value);
    }
    query.push(close);
    query
}

/// Appends `row` if its workspace's head is still the row before it (the hint was right): moves
/// the head, which locks it, then inserts; `false`, with nothing written, if the head is
/// elsewhere.
async fn append_after_hint<D: Dialect>(
    connection: &mut Connection<D>,
    row: &AuditRecord,
) -> StorageResult<bool> {
    let mut head = head_after_hint(row);
    if D::BACKEND == Backend::Postgres {
        // One round trip: the insert takes its one row from the update's, so it writes only
        // if the head moved.
        head.push(" RETURNING workspace_id");
        let mut query = Statement::new("WITH head AS (");
        append_statement(&mut query, head);
        query.push(") ");
        append_statement(&mut query, insert_row(row, "SELECT ", " FROM head"));
        return Ok(execute::<D>(connection, query).await? == 1);
    }
    if execute::<D>(connection, head).await? == 0 {
        return Ok(false);
    }
    execute::<D>(connection, insert_row(row, "VALUES (", ")")).await?;
    Ok(true)
}

/// Moves the head to `row` if it is still at the row before it (which locks it).
fn head_after_hint(row: &AuditRecord) -> Statement {
    statement(
        "UPDATE audit_heads SET last_seq = ?, last_hash = ? \
         WHERE workspace_id = ? AND last_seq = ? AND last_hash = ?",
        [
            Value::Int(row.seq),
            Value::Text(row.hash.clone()),
            Value::Int(row.workspace_id),
            Value::Int(row.seq - 1),
            Value::Text(row.prev_hash.clone()),
        ],
    )
}

/// `query` followed by `more` (its text and its values).
fn append_statement(query: &mut Statement, more: Statement) {
    let mut values = more.values.into_iter();
    let mut pieces = more.pieces.into_iter();
    query.push(&pieces.next().unwrap_or_default());
    for piece in pieces {
        if let Some(value) = values.next() {
            query.bind(value);
        }
        query.push(&piece);
    }
}

/// The head's last row, locked until the transaction ends.
async fn lock_head<D: Dialect>(
    connection: &mut Connection<D>,
    workspace: i64,
) -> StorageResult<Option<(i64, String)>> {
    let query = statement(
        &format!(
            "SELECT last_seq, last_hash FROM audit_heads WHERE workspace_id = ?{}",
            D::FOR_UPDATE
        ),
        [Value::Int(workspace)],
    );
    let row = D::DB::fetch_optional(connection, query)
        .await
        .map_err(StorageError::classify)?;
    row.map(|row| {
        Ok((
            D::DB::int(&row, "last_seq")?,
            D::read_text(&row, "last_hash")?,
        ))
    })
    .transpose()
}

async fn execute<D: Dialect>(
    connection: &mut Connection<D>,
    query: Statement,
) -> StorageResult<u64> {
    D::DB::execute(connection, query)
        .await
        .map_err(StorageError::classify)
}

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn append_audit_alone(&self, entry: &AuditEntry) -> StorageResult<()> {
        let mut tx = D::begin(&self.writer).await?;
        append::<D>(&mut tx, &self.audit_heads, entry).await?;
        tx.commit().await.map_err(StorageError::classify)
    }

    pub(super) async fn audit_rows(&self, filter: &AuditFilter) -> StorageResult<Vec<AuditRecord>> {
        let mut query = Statement::new(format!("SELECT {COLUMNS} FROM audit_log WHERE 1 = 1"));
        if let Some(workspace) = filter.workspace_id {
            query
                .push(" AND workspace_id = ")
                .bind(Value::Int(workspace));
        }
        if let Some(action) = &filter.action {
            match action.strip_suffix('*') {
                // A family, `webhook.*`: the range of names starting `webhook.` (byte order:
                // every column compared here has a binary collation).
                Some(prefix) if !prefix.is_empty() => {
                    let mut end = prefix.as_bytes().to_vec();
                    if let Some(last) = end.last_mut() {
                        *last = last.saturating_add(1);
                    }
                    let end = String::from_utf8_lossy(&end).into_owned();
                    query
                        .push(" AND action >= ")
                        .bind(Value::Text(prefix.to_owned()))
                        .push(" AND action < ")
                        .bind(Value::Text(end));
                }
                _ => {
                    query
                        .push(" AND action = ")
                        .bind(Value::Text(action.clone()));
                }
            }
        }
        if let Some(actor) = &filter.actor {
            match actor
                .strip_prefix("key:")
                .and_then(|id| id.parse::<i64>().ok())
            {
                Some(id) => query
                    .push(" AND actor_kind = 'key' AND actor_id = ")
                    .bind(Value::Int(id)),
                None => query
                    .push(" AND actor_name = ")
                    .bind(Value::Text(actor.clone())),
            };
        }
        if let Some(object) = &filter.object {
            query
                .push(" AND object = ")
                .bind(Value::Text(object.clone()));
        }
        if let Some(since) = filter.since_ms {
            query.push(" AND at_ms >= ").bind(Value::Int(since));
        }
        if let Some(until) = filter.until_ms {
            query.push(" AND at_ms < ").bind(Value::Int(until));
        }
        match filter.workspace_id {
            // A workspace's rows in chain order, on its `(workspace_id, seq)` key: the order of
            // their ids too (a chain's appends are serialised), so pages are the same, and a
            // create maintains no index of ids per workspace. A cursor that is not a row of the
            // workspace (another's, or pruned: then so is every row before it) ends the list.
            Some(workspace) => {
                if let Some(before) = filter.before_id {
                    query
                        .push(" AND seq < (SELECT last_seen.seq FROM audit_log last_seen WHERE last_seen.id = ")
                        .bind(Value::Int(before))
                        .push(" AND last_seen.workspace_id = ")
                        .bind(Value::Int(workspace))
                        .push(")");
                }
                query.push(" ORDER BY seq DESC LIMIT ");
            }
            None => {
                if let Some(before) = filter.before_id {
                    query.push(" AND id < ").bind(Value::Int(before));
                }
                query.push(" ORDER BY id DESC LIMIT ");
            }
        }
        query.bind(Value::Int(i64::from(filter.limit)));
        self.rows(query).await?.iter().map(record::<D>).collect()
    }

    pub(super) async fn audit_head_rows(&self) -> StorageResult<Vec<AuditHead>> {
        let query = Statement::new(
            "SELECT workspace_id, last_seq, last_hash, anchor_seq, anchor_hash FROM audit_heads",
        );
        let mut heads = Vec::new();
        for row in self.rows(query).await? {
            heads.push(AuditHead {
                workspace_id: D::DB::int(&row, "workspace_id")?,
                last: Some((
                    D::DB::int(&row, "last_seq")?,
                    D::read_text(&row, "last_hash")?,
                )),
                anchor: Some((
                    D::DB::int(&row, "anchor_seq")?,
                    D::read_text(&row, "anchor_hash")?,
                )),
            });
        }
        // Rows of a workspace without a head: no append made them.
        let orphans = Statement::new(
            "SELECT DISTINCT workspace_id FROM audit_log \
             WHERE workspace_id NOT IN (SELECT workspace_id FROM audit_heads)",
        );
        for row in self.rows(orphans).await? {
            heads.push(AuditHead {
                workspace_id: D::DB::int(&row, "workspace_id")?,
                last: None,
                anchor: None,
            });
        }
        heads.sort_by_key(|head| head.workspace_id);
        Ok(heads)
    }

    pub(super) async fn audit_chain_rows(
        &self,
        workspace: i64,
        after_seq: i64,
        limit: u32,
    ) -> StorageResult<Vec<AuditRecord>> {
        let query = statement(
            &format!(
                "SELECT {COLUMNS} FROM audit_log WHERE workspace_id = ? AND seq > ? \
                 ORDER BY seq LIMIT ?"
            ),
            [
                Value::Int(workspace),
                Value::Int(after_seq),
                Value::Int(i64::from(limit)),
            ],
        );
        self.rows(query).await?.iter().map(record::<D>).collect()
    }

    /// Deletes each chain's rows older than `before_ms`, oldest first and only as a prefix of the
    /// chain, and moves its anchor to the last row deleted; returns how many were deleted.
    pub(super) async fn prune_audit_rows(&self, before_ms: i64) -> StorageResult<u64> {
        let mut deleted = 0;
        for head in self.audit_head_rows().await? {
            if head.last.is_none() {
                continue;
            }
            while let Some(count) = self.prune_audit_page(head.workspace_id, before_ms).await? {
                deleted += count;
            }
        }
        Ok(deleted)
    }

    /// One page of [`Self::prune_audit_rows`] in its own transaction (appends wait on the head
    /// only that long); `None` when nothing more is old enough.
    async fn prune_audit_page(&self, workspace: i64, before_ms: i64) -> StorageResult<Option<u64>> {
        let mut tx = D::begin(&self.writer).await?;
        let query = statement(
            &format!(
                "SELECT anchor_seq FROM audit_heads WHERE workspace_id = ?{}",
                D::FOR_UPDATE
            ),
            [Value::Int(workspace)],
        );
        let Some(head) = D::DB::fetch_optional(&mut tx, query)
            .await
            .map_err(StorageError::classify)?
        else {
            return Ok(None);
        };
        let anchor = D::DB::int(&head, "anchor_seq")?;
        let query = statement(
            "SELECT seq, at_ms, hash FROM audit_log WHERE workspace_id = ? AND seq > ? \
             ORDER BY seq LIMIT 1000",
            [Value::Int(workspace), Value::Int(anchor)],
        );
        let rows = D::DB::fetch_all(&mut tx, query)
            .await
            .map_err(StorageError::classify)?;
        let mut cut = None;
        for row in &rows {
            if D::DB::int(row, "at_ms")? >= before_ms {
                break;
            }
            cut = Some((D::DB::int(row, "seq")?, D::read_text(row, "hash")?));
        }
        let Some((seq, hash)) = cut else {
            return Ok(None);
        };
        let delete = statement(
            "DELETE FROM audit_log WHERE workspace_id = ? AND seq > ? AND seq <= ?",
            [Value::Int(workspace), Value::Int(anchor), Value::Int(seq)],
        );
        let count = execute::<D>(&mut tx, delete).await?;
        let update = statement(
            "UPDATE audit_heads SET anchor_seq = ?, anchor_hash = ? WHERE workspace_id = ?",
            [Value::Int(seq), Value::Text(hash), Value::Int(workspace)],
        );
        execute::<D>(&mut tx, update).await?;
        tx.commit().await.map_err(StorageError::classify)?;
        Ok(Some(count))
    }
}

fn record<D: Dialect>(row: &Row<D>) -> StorageResult<AuditRecord> {
    Ok(AuditRecord {
        id: D::DB::int(row, "id")?,
        workspace_id: D::DB::int(row, "workspace_id")?,
        seq: D::DB::int(row, "seq")?,
        at_ms: D::DB::int(row, "at_ms")?,
        actor_kind: D::read_text(row, "actor_kind")?,
        actor_id: D::DB::opt_int(row, "actor_id")?,
        actor_name: D::read_text(row, "actor_name")?,
        action: D::read_text(row, "action")?,
        object: D::read_text(row, "object")?,
        changes: D::read_text(row, "changes")?,
        request_id: D::read_opt_text(row, "request_id")?,
        client_addr: D::read_opt_text(row, "client_addr")?,
        batch_size: D::DB::opt_int(row, "batch_size")?,
        idempotency_key: D::read_opt_text(row, "idempotency_key")?,
        prev_hash: D::read_text(row, "prev_hash")?,
        hash: D::read_text(row, "hash")?,
    })
}

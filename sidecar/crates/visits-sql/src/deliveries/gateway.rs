//! Compose's hand-off to an SMS gateway in SQL: a workspace's gateway (`gateway_configs`), each
//! compose request that sends (`gateway_jobs`) and, per recipient, what the gateway answered
//! (`gateway_sends`: its `answer` column holds shortlink's own description of the outcome, never
//! the gateway's body). No password (a file name the operator's directory holds) and no phone
//! number is stored.

use super::store::ms;
use crate::sql::{db, execute, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value, IN_LIST};
use shortlink_store::StorageResult;
use shortlink_visits::deliveries::gateway::{
    GatewayConfig, GatewayStore, SendJob, SendOutcome, SendRecord,
};
use shortlink_visits::deliveries::model::at_ms;
use sqlx::Database;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

const CONFIG_COLUMNS: &str = "workspace_id, kind, url, username, password_file, sender, \
    callback_base, per_second, attempts, backoff_ms, updated_ms, reports_hours, timeout_ms";

const JOB_COLUMNS: &str =
    "id, workspace_id, campaign, callback_token_id, created_ms, finished_ms, stopped, waiting_ms";

const SEND_COLUMNS: &str =
    "idx, code, message_id, outcome, http_status, answer, attempts, at_ms, gateway_code";

/// The outcomes of a hand-off that may have reached the gateway: never sent again.
const MAY_HAVE_IT: &str = "('accepted', 'queued', 'unknown', 'interrupted')";

/// The one `INSERT` of a recipient's outcome, made by the send job's record of a queued message
/// (`queue.rs`, with its removal from the queue) and by [`GatewayStore::insert_send`].
pub(super) fn insert_send(workspace: WorkspaceId, job: &str, s: &SendRecord) -> Statement {
    statement(
        &format!(
            "INSERT INTO gateway_sends (workspace_id, job_id, {SEND_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        [
            Value::Int(workspace.get()),
            Value::Text(job.into()),
            Value::Int(s.index),
            Value::Text(s.code.clone()),
            Value::Text(s.message_id.clone()),
            Value::Text(s.outcome.as_str().to_owned()),
            Value::OptInt(s.http_status.map(i64::from)),
            Value::OptText(s.detail.clone()),
            Value::Int(i64::from(s.attempts)),
            ms(s.at),
            Value::OptInt(s.gateway_code.map(i64::from)),
        ],
    )
}

fn config<V: VisitDialect>(row: &Row<V>) -> StorageResult<GatewayConfig> {
    let text = |c| V::Sql::read_text(row, c);
    let int = |c| Db::<V>::int(row, c).map_err(db);
    Ok(GatewayConfig {
        workspace: WorkspaceId::from_db(int("workspace_id")?),
        kind: text("kind")?,
        url: text("url")?,
        username: text("username")?,
        password_file: text("password_file")?,
        sender: text("sender")?,
        callback_base: text("callback_base")?,
        per_second: u32::try_from(int("per_second")?).unwrap_or(1),
        attempts: u32::try_from(int("attempts")?).unwrap_or(1),
        backoff_ms: u64::try_from(int("backoff_ms")?).unwrap_or(0),
        reports_hours: u32::try_from(int("reports_hours")?).unwrap_or(72),
        timeout_ms: u64::try_from(int("timeout_ms")?).unwrap_or(10_000),
        updated_at: at_ms(int("updated_ms")?),
    })
}

fn job<V: VisitDialect>(row: &Row<V>) -> StorageResult<SendJob> {
    let int = |c| Db::<V>::int(row, c).map_err(db);
    Ok(SendJob {
        id: V::Sql::read_text(row, "id")?,
        workspace: WorkspaceId::from_db(int("workspace_id")?),
        campaign: V::Sql::read_opt_text(row, "campaign")?,
        callback_token_id: V::Sql::read_text(row, "callback_token_id")?,
        created_at: at_ms(int("created_ms")?),
        finished_at: Db::<V>::opt_int(row, "finished_ms").map_err(db)?.map(at_ms),
        stopped: V::Sql::read_opt_text(row, "stopped")?,
        waiting_since: Db::<V>::opt_int(row, "waiting_ms").map_err(db)?.map(at_ms),
    })
}

fn send<V: VisitDialect>(row: &Row<V>) -> StorageResult<SendRecord> {
    let int = |c| Db::<V>::int(row, c).map_err(db);
    Ok(SendRecord {
        index: int("idx")?,
        code: V::Sql::read_text(row, "code")?,
        message_id: V::Sql::read_text(row, "message_id")?,
        outcome: {
            let outcome = V::Sql::read_text(row, "outcome")?;
            SendOutcome::parse(&outcome).ok_or_else(|| {
                shortlink_store::StorageError::Corrupt(format!("send outcome {outcome:?}"))
            })?
        },
        http_status: (Db::<V>::opt_int(row, "http_status").map_err(db)?)
            .and_then(|status| u16::try_from(status).ok()),
        gateway_code: (Db::<V>::opt_int(row, "gateway_code").map_err(db)?)
            .and_then(|code| u32::try_from(code).ok()),
        detail: V::Sql::read_opt_text(row, "answer")?,
        attempts: u32::try_from(int("attempts")?).unwrap_or(0),
        at: at_ms(int("at_ms")?),
    })
}

#[async_trait]
impl<V: VisitDialect> GatewayStore for SqlVisitStore<V> {
    async fn put_gateway(&self, c: &GatewayConfig) -> StorageResult<()> {
        let ws = Value::Int(c.workspace.get());
        // Delete and insert in one transaction: one statement for every backend's upsert.
        let mut tx = V::Sql::begin(&self.writer).await?;
        let delete = statement(
            "DELETE FROM gateway_configs WHERE workspace_id = ?",
            [ws.clone()],
        );
        Db::<V>::execute(&mut *tx, delete).await.map_err(db)?;
        let insert = statement(
            &format!(
                "INSERT INTO gateway_configs ({CONFIG_COLUMNS}) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            [
                ws,
                Value::Text(c.kind.clone()),
                Value::Text(c.url.clone()),
                Value::Text(c.username.clone()),
                Value::Text(c.password_file.clone()),
                Value::Text(c.sender.clone()),
                Value::Text(c.callback_base.clone()),
                Value::Int(i64::from(c.per_second)),
                Value::Int(i64::from(c.attempts)),
                Value::Int(i64::try_from(c.backoff_ms).unwrap_or(i64::MAX)),
                ms(c.updated_at),
                Value::Int(i64::from(c.reports_hours)),
                Value::Int(i64::try_from(c.timeout_ms).unwrap_or(i64::MAX)),
            ],
        );
        Db::<V>::execute(&mut *tx, insert).await.map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn gateway(&self, workspace: WorkspaceId) -> StorageResult<Option<GatewayConfig>> {
        let query = statement(
            &format!("SELECT {CONFIG_COLUMNS} FROM gateway_configs WHERE workspace_id = ?"),
            [Value::Int(workspace.get())],
        );
        let rows = fetch_all::<V>(&self.writer, query).await?;
        rows.first().map(config::<V>).transpose()
    }

    async fn delete_gateway(&self, workspace: WorkspaceId) -> StorageResult<bool> {
        let query = statement(
            "DELETE FROM gateway_configs WHERE workspace_id = ?",
            [Value::Int(workspace.get())],
        );
        Ok(execute::<V>(&self.writer, query).await? > 0)
    }

    async fn insert_job(&self, j: &SendJob) -> StorageResult<()> {
        let query = statement(
            &format!("INSERT INTO gateway_jobs ({JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
            [
                Value::Text(j.id.clone()),
                Value::Int(j.workspace.get()),
                Value::OptText(j.campaign.clone()),
                Value::Text(j.callback_token_id.clone()),
                ms(j.created_at),
                Value::OptInt(j.finished_at.map(|at| at.timestamp_millis())),
                Value::OptText(j.stopped.clone()),
                Value::OptInt(j.waiting_since.map(|at| at.timestamp_millis())),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn finish_job(
        &self,
        workspace: WorkspaceId,
        id: &str,
        at: DateTime<Utc>,
        stopped: Option<&str>,
    ) -> StorageResult<()> {
        let query = statement(
            "UPDATE gateway_jobs SET finished_ms = ?, stopped = ? WHERE workspace_id = ? AND id = ?",
            [
                ms(at),
                Value::OptText(stopped.map(str::to_owned)),
                Value::Int(workspace.get()),
                Value::Text(id.into()),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn job(&self, workspace: WorkspaceId, id: &str) -> StorageResult<Option<SendJob>> {
        let query = statement(
            &format!("SELECT {JOB_COLUMNS} FROM gateway_jobs WHERE workspace_id = ? AND id = ?"),
            [Value::Int(workspace.get()), Value::Text(id.into())],
        );
        let rows = fetch_all::<V>(&self.writer, query).await?;
        rows.first().map(job::<V>).transpose()
    }

    async fn insert_send(
        &self,
        workspace: WorkspaceId,
        job: &str,
        s: &SendRecord,
    ) -> StorageResult<()> {
        let query = insert_send(workspace, job, s);
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn sends(&self, workspace: WorkspaceId, job: &str) -> StorageResult<Vec<SendRecord>> {
        let query = statement(
            &format!(
                "SELECT {SEND_COLUMNS} FROM gateway_sends WHERE workspace_id = ? AND job_id = ? \
                 ORDER BY idx"
            ),
            [Value::Int(workspace.get()), Value::Text(job.into())],
        );
        (fetch_all::<V>(&self.writer, query).await?.iter())
            .map(send::<V>)
            .collect()
    }

    async fn accepted(&self, workspace: WorkspaceId, code: &str) -> StorageResult<bool> {
        let query = statement(
            &format!(
                "SELECT idx FROM gateway_sends WHERE workspace_id = ? AND code = ? \
                 AND outcome IN {MAY_HAVE_IT}"
            ),
            [Value::Int(workspace.get()), Value::Text(code.into())],
        );
        Ok(!fetch_all::<V>(&self.writer, query).await?.is_empty())
    }

    async fn unknown_handoffs(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<String>> {
        let mut found = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT DISTINCT code FROM gateway_sends WHERE workspace_id = ? \
                     AND outcome IN ('unknown', 'interrupted') AND code IN ({})",
                    marks(chunk.len())
                ),
                std::iter::once(Value::Int(workspace.get()))
                    .chain(chunk.iter().cloned().map(Value::Text)),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                found.push(V::Sql::read_text(&row, "code")?);
            }
        }
        Ok(found)
    }
}

//! The send jobs' queue in SQL (`gateway_pending`, and the lease columns of `gateway_jobs`):
//! compose writes a job's messages before its answer; one sidecar at a time, the job's lease
//! holder, hands them to the gateway, records each outcome and deletes the row.
//!
//! Who sends a job is decided by one conditional `UPDATE` of the job's row (the claim, taken
//! only when the lease ran out); the mark of a hand-off about to start renews the lease in the
//! same row, conditional on still holding it. The two write one row, so the database orders
//! them: a sidecar whose lease was taken over cannot start another hand-off, and the one that
//! took over sees the hand-off that had started (`handing_idx`) and never sends it again.

use crate::sql::{db, execute, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::StorageResult;
use shortlink_visits::deliveries::queue::{NewJob, OpenJob, Pending, SendQueueStore};
use shortlink_visits::deliveries::SendRecord;
use sqlx::Database;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

/// Rows per `INSERT` of queued messages (7 values each: within every backend's bound).
const ROWS_PER_INSERT: usize = 500;

const OPEN_COLUMNS: &str = "id, workspace_id, api_key_id, dlr_base, handing_idx, queued_ms";

const PENDING_COLUMNS: &str = "idx, code, short_url, phone, text";

fn open_job<V: VisitDialect>(row: &Row<V>) -> StorageResult<OpenJob> {
    let opt = |c| Db::<V>::opt_int(row, c).map_err(db);
    Ok(OpenJob {
        id: V::Sql::read_text(row, "id")?,
        workspace: WorkspaceId::from_db(Db::<V>::int(row, "workspace_id").map_err(db)?),
        api_key: opt("api_key_id")?,
        dlr_base: V::Sql::read_opt_text(row, "dlr_base")?,
        handing: opt("handing_idx")?,
        queued: opt("queued_ms")?.is_some(),
    })
}

fn pending<V: VisitDialect>(row: &Row<V>) -> StorageResult<Pending> {
    Ok(Pending {
        index: Db::<V>::int(row, "idx").map_err(db)?,
        code: V::Sql::read_text(row, "code")?,
        short_url: V::Sql::read_opt_text(row, "short_url")?,
        phone: V::Sql::read_text(row, "phone")?,
        text: V::Sql::read_text(row, "text")?,
    })
}

fn ms(at: DateTime<Utc>) -> Value {
    Value::Int(at.timestamp_millis())
}

#[async_trait]
impl<V: VisitDialect> SendQueueStore for SqlVisitStore<V> {
    async fn open_job(&self, n: &NewJob<'_>) -> StorageResult<()> {
        let j = n.job;
        let query = statement(
            "INSERT INTO gateway_jobs (id, workspace_id, campaign, callback_token_id, created_ms, \
             api_key_id, dlr_base, reports_ms, claimed_by, lease_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                Value::Text(j.id.clone()),
                Value::Int(j.workspace.get()),
                Value::OptText(j.campaign.clone()),
                Value::Text(j.callback_token_id.clone()),
                ms(j.created_at),
                Value::OptInt(n.api_key),
                Value::Text(n.dlr_base.to_owned()),
                Value::Int(n.reports_ms),
                Value::Text(n.owner.to_owned()),
                ms(n.lease_until),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn enqueue(
        &self,
        workspace: WorkspaceId,
        job: &str,
        rows: &[Pending],
    ) -> StorageResult<()> {
        for part in rows.chunks(ROWS_PER_INSERT) {
            let values = vec![format!("({})", marks(7)); part.len()].join(", ");
            let mut args = Vec::with_capacity(part.len() * 7);
            for p in part {
                args.extend([
                    Value::Int(workspace.get()),
                    Value::Text(job.to_owned()),
                    Value::Int(p.index),
                    Value::Text(p.code.clone()),
                    Value::OptText(p.short_url.clone()),
                    Value::Text(p.phone.clone()),
                    Value::Text(p.text.clone()),
                ]);
            }
            let query = statement(
                &format!(
                    "INSERT INTO gateway_pending (workspace_id, job_id, {PENDING_COLUMNS}) \
                     VALUES {values}"
                ),
                args,
            );
            execute::<V>(&self.writer, query).await?;
        }
        Ok(())
    }

    async fn seal(&self, job: &str, at: DateTime<Utc>) -> StorageResult<()> {
        let query = statement(
            "UPDATE gateway_jobs SET queued_ms = ? WHERE id = ? AND queued_ms IS NULL",
            [ms(at), Value::Text(job.to_owned())],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn claimable(&self, now: DateTime<Utc>, limit: i64) -> StorageResult<Vec<String>> {
        let query = statement(
            "SELECT id FROM gateway_jobs WHERE finished_ms IS NULL \
             AND (lease_ms IS NULL OR lease_ms < ?) ORDER BY created_ms LIMIT ?",
            [ms(now), Value::Int(limit)],
        );
        (fetch_all::<V>(&self.writer, query).await?.iter())
            .map(|row| V::Sql::read_text(row, "id"))
            .collect()
    }

    async fn claim(
        &self,
        id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StorageResult<Option<OpenJob>> {
        let query = statement(
            "UPDATE gateway_jobs SET claimed_by = ?, lease_ms = ?, \
             queued_ms = COALESCE(queued_ms, ?), waiting_ms = NULL \
             WHERE id = ? AND finished_ms IS NULL AND (lease_ms IS NULL OR lease_ms < ?)",
            [
                Value::Text(owner.to_owned()),
                ms(lease_until),
                ms(now),
                Value::Text(id.to_owned()),
                ms(now),
            ],
        );
        if execute::<V>(&self.writer, query).await? == 0 {
            return Ok(None);
        }
        self.held(id, owner).await
    }

    async fn held(&self, id: &str, owner: &str) -> StorageResult<Option<OpenJob>> {
        let query = statement(
            &format!(
                "SELECT {OPEN_COLUMNS} FROM gateway_jobs \
                 WHERE id = ? AND claimed_by = ? AND finished_ms IS NULL"
            ),
            [Value::Text(id.to_owned()), Value::Text(owner.to_owned())],
        );
        let rows = fetch_all::<V>(&self.writer, query).await?;
        rows.first().map(open_job::<V>).transpose()
    }

    async fn renew(
        &self,
        id: &str,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> StorageResult<bool> {
        let query = statement(
            "UPDATE gateway_jobs SET lease_ms = ? \
             WHERE id = ? AND claimed_by = ? AND finished_ms IS NULL",
            [
                ms(lease_until),
                Value::Text(id.to_owned()),
                Value::Text(owner.to_owned()),
            ],
        );
        Ok(execute::<V>(&self.writer, query).await? > 0)
    }

    async fn handing(
        &self,
        id: &str,
        owner: &str,
        index: i64,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StorageResult<bool> {
        // `handing_idx` is NULL before (the last outcome cleared it): the row always changes,
        // so every backend counts it.
        let query = statement(
            "UPDATE gateway_jobs SET handing_idx = ?, lease_ms = ? \
             WHERE id = ? AND claimed_by = ? AND lease_ms >= ? AND finished_ms IS NULL \
             AND EXISTS (SELECT 1 FROM gateway_pending WHERE job_id = ? AND idx = ?)",
            [
                Value::Int(index),
                ms(lease_until),
                Value::Text(id.to_owned()),
                Value::Text(owner.to_owned()),
                ms(now),
                Value::Text(id.to_owned()),
                Value::Int(index),
            ],
        );
        Ok(execute::<V>(&self.writer, query).await? > 0)
    }

    async fn pending(&self, job: &str, limit: i64) -> StorageResult<Vec<Pending>> {
        let query = statement(
            &format!(
                "SELECT {PENDING_COLUMNS} FROM gateway_pending WHERE job_id = ? \
                 ORDER BY idx LIMIT ?"
            ),
            [Value::Text(job.to_owned()), Value::Int(limit)],
        );
        (fetch_all::<V>(&self.writer, query).await?.iter())
            .map(pending::<V>)
            .collect()
    }

    async fn pending_at(&self, job: &str, index: i64) -> StorageResult<Option<Pending>> {
        let query = statement(
            &format!("SELECT {PENDING_COLUMNS} FROM gateway_pending WHERE job_id = ? AND idx = ?"),
            [Value::Text(job.to_owned()), Value::Int(index)],
        );
        let rows = fetch_all::<V>(&self.writer, query).await?;
        rows.first().map(pending::<V>).transpose()
    }

    async fn record(&self, workspace: WorkspaceId, job: &str, s: &SendRecord) -> StorageResult<()> {
        let mut tx = V::Sql::begin(&self.writer).await?;
        let delete = statement(
            "DELETE FROM gateway_pending WHERE job_id = ? AND idx = ?",
            [Value::Text(job.into()), Value::Int(s.index)],
        );
        // Gone from the queue: its subject was erased meanwhile (or its workspace deleted):
        // nothing is recorded of it.
        let queued = Db::<V>::execute(&mut *tx, delete).await.map_err(db)? > 0;
        let insert = super::gateway::insert_send(workspace, job, s);
        if queued {
            Db::<V>::execute(&mut *tx, insert).await.map_err(db)?;
        }
        let done = statement(
            "UPDATE gateway_jobs SET handing_idx = NULL WHERE id = ? AND handing_idx = ?",
            [Value::Text(job.into()), Value::Int(s.index)],
        );
        Db::<V>::execute(&mut *tx, done).await.map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn waiting(
        &self,
        id: &str,
        owner: &str,
        since: Option<DateTime<Utc>>,
    ) -> StorageResult<()> {
        let query = statement(
            "UPDATE gateway_jobs SET waiting_ms = ? \
             WHERE id = ? AND claimed_by = ? AND finished_ms IS NULL",
            [
                Value::OptInt(since.map(|at| at.timestamp_millis())),
                Value::Text(id.to_owned()),
                Value::Text(owner.to_owned()),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn finish(
        &self,
        id: &str,
        owner: &str,
        at: DateTime<Utc>,
        stopped: Option<&str>,
    ) -> StorageResult<()> {
        let query = statement(
            "UPDATE gateway_jobs SET finished_ms = ?, stopped = ?, dlr_base = NULL, \
             handing_idx = NULL, lease_ms = NULL, waiting_ms = NULL WHERE id = ? AND claimed_by = ? \
             AND finished_ms IS NULL",
            [
                ms(at),
                Value::OptText(stopped.map(str::to_owned)),
                Value::Text(id.to_owned()),
                Value::Text(owner.to_owned()),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn revoke_ended_tokens(&self, now: DateTime<Utc>) -> StorageResult<u64> {
        let cutoff = now.timestamp_millis();
        let mut tx = V::Sql::begin(&self.writer).await?;
        let revoke = statement(
            "UPDATE callback_tokens SET revoked_ms = ? WHERE revoked_ms IS NULL AND id IN \
             (SELECT callback_token_id FROM gateway_jobs WHERE reports_ms IS NOT NULL \
             AND finished_ms IS NOT NULL AND finished_ms + reports_ms <= ?)",
            [ms(now), Value::Int(cutoff)],
        );
        let revoked = Db::<V>::execute(&mut *tx, revoke).await.map_err(db)?;
        // Done for these jobs: later sweeps pass them over.
        let done = statement(
            "UPDATE gateway_jobs SET reports_ms = NULL WHERE reports_ms IS NOT NULL \
             AND finished_ms IS NOT NULL AND finished_ms + reports_ms <= ?",
            [Value::Int(cutoff)],
        );
        Db::<V>::execute(&mut *tx, done).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(revoked)
    }
}

//! The send jobs' queue as stored: the messages waiting for their hand-off and the jobs' leases
//! ([`SendQueueStore`]; `shortlink-visits-sql` says how one sidecar at a time holds a job).

use super::gateway::{SendJob, SendRecord};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

/// One message waiting for its hand-off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The recipient's line in the compose request.
    pub index: i64,
    pub code: String,
    pub short_url: Option<String>,
    /// E.164: kept until the hand-off is recorded, then deleted with the row.
    pub phone: String,
    pub text: String,
}

/// What a sidecar needs to send a job it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenJob {
    pub id: String,
    pub workspace: WorkspaceId,
    /// The key that composed it (`None`: the command line's).
    pub api_key: Option<i64>,
    /// `<callback base>/callbacks/<token>/kannel`.
    pub dlr_base: Option<String>,
    /// The message whose hand-off started and whose outcome was never recorded.
    pub handing: Option<i64>,
    /// Whether compose queued its last message.
    pub queued: bool,
}

/// A job as compose opens it, held by the composing sidecar.
pub struct NewJob<'a> {
    pub job: &'a SendJob,
    pub api_key: Option<i64>,
    pub dlr_base: &'a str,
    /// How long after the job ends its reports may come.
    pub reports_ms: i64,
    pub owner: &'a str,
    pub lease_until: DateTime<Utc>,
}

#[async_trait]
pub trait SendQueueStore: Send + Sync {
    /// Inserts the job, held by `owner` until `lease_until`.
    async fn open_job(&self, new: &NewJob<'_>) -> StorageResult<()>;
    /// Queues messages of `job`.
    async fn enqueue(
        &self,
        workspace: WorkspaceId,
        job: &str,
        rows: &[Pending],
    ) -> StorageResult<()>;
    /// Compose queued its last message.
    async fn seal(&self, job: &str, at: DateTime<Utc>) -> StorageResult<()>;
    /// Unfinished jobs whose lease ran out by `now` (at most `limit`, oldest first).
    async fn claimable(&self, now: DateTime<Utc>, limit: i64) -> StorageResult<Vec<String>>;
    /// Takes job `id` for `owner` if its lease ran out by `now`: what it needs to send it. A job
    /// taken over is sealed (the sidecar that composed it is gone: no more messages come), and
    /// no longer says it waits for its callback base (its new sidecar probes it afresh).
    async fn claim(
        &self,
        id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StorageResult<Option<OpenJob>>;
    /// The job as `owner` holds it (`None`: not held by `owner`, finished or gone).
    async fn held(&self, id: &str, owner: &str) -> StorageResult<Option<OpenJob>>;
    /// Extends `owner`'s lease; `false` once it lost the job.
    async fn renew(&self, id: &str, owner: &str, lease_until: DateTime<Utc>)
        -> StorageResult<bool>;
    /// Marks the hand-off of message `index` as started, renewing the lease: `false` (nothing
    /// marked) unless `owner` still holds an unexpired lease at `now` and the message is still
    /// queued (a subject's erase deletes it).
    async fn handing(
        &self,
        id: &str,
        owner: &str,
        index: i64,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StorageResult<bool>;
    /// The first `limit` messages still queued, by line.
    async fn pending(&self, job: &str, limit: i64) -> StorageResult<Vec<Pending>>;
    /// Queued message `index` of `job`, if it still is.
    async fn pending_at(&self, job: &str, index: i64) -> StorageResult<Option<Pending>>;
    /// Records a message's outcome and deletes it from the queue (its number with it), in one
    /// transaction; a message no longer queued (erased meanwhile) is not recorded.
    async fn record(
        &self,
        workspace: WorkspaceId,
        job: &str,
        send: &SendRecord,
    ) -> StorageResult<()>;
    /// Says since when the job `owner` holds waits for its callback base (`None`: it sends).
    async fn waiting(
        &self,
        id: &str,
        owner: &str,
        since: Option<DateTime<Utc>>,
    ) -> StorageResult<()>;
    /// Ends the job `owner` holds, forgetting its token-bearing `dlr-url` base.
    async fn finish(
        &self,
        id: &str,
        owner: &str,
        at: DateTime<Utc>,
        stopped: Option<&str>,
    ) -> StorageResult<()>;
    /// Revokes the callback tokens of the jobs whose reports window ended by `now`: how many.
    async fn revoke_ended_tokens(&self, now: DateTime<Utc>) -> StorageResult<u64>;
}

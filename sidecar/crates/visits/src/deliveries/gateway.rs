//! Compose's hand-off to an SMS gateway as stored: a workspace's gateway, each compose request
//! that sends and, per recipient, what the gateway answered ([`GatewayStore`]; in SQL in
//! `shortlink-visits-sql`). No password and no phone number is stored.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use utoipa::ToSchema;

/// A workspace's gateway (Kannel's `sendsms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    pub workspace: WorkspaceId,
    /// `kannel`, the one kind so far.
    pub kind: String,
    pub url: String,
    pub username: String,
    /// A file name in `--gateway-secrets-dir`.
    pub password_file: String,
    /// Kannel's `from`.
    pub sender: String,
    /// Where the gateway reaches this sidecar's `/callbacks/` (the `dlr-url`'s base).
    pub callback_base: String,
    pub per_second: u32,
    pub attempts: u32,
    pub backoff_ms: u64,
    /// How long one hand-off may take before its outcome is unknown.
    pub timeout_ms: u64,
    /// How long after a job ends its reports may still come: then its callback token is revoked.
    pub reports_hours: u32,
    pub updated_at: DateTime<Utc>,
}

/// One compose request that sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendJob {
    /// `snd_` and 16 hex digits.
    pub id: String,
    pub workspace: WorkspaceId,
    pub campaign: Option<String>,
    /// The Kannel callback token its `dlr-url`s carry.
    pub callback_token_id: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it stopped before its last recipient, if it did.
    pub stopped: Option<String>,
    /// Since when it holds its messages back, its callback base not answering.
    pub waiting_since: Option<DateTime<Utc>>,
}

/// What one recipient's hand-off came to, as shortlink understood it: never the gateway's body.
/// Stored as it is answered (`GET /api/v1/gateway/jobs/{job}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SendRecord {
    /// The recipient's line in the compose request.
    pub index: i64,
    pub code: String,
    /// The `mid` of its `dlr-url`: its receipts' message id.
    pub message_id: String,
    pub outcome: SendOutcome,
    pub http_status: Option<u16>,
    /// The numeric code the gateway's body started with (Kannel's `0:`, `3:`…), if it did: the
    /// only thing read from the body.
    pub gateway_code: Option<u32>,
    /// shortlink's own words for the outcome (a fixed text per outcome, never the gateway's
    /// bytes).
    pub detail: Option<String>,
    pub attempts: u32,
    pub at: DateTime<Utc>,
}

/// What a hand-off came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SendOutcome {
    /// Kannel's `0:`: taken for delivery.
    Accepted,
    /// Kannel's `3:`: taken, sent once an SMSC connects.
    Queued,
    /// A 4xx: it never will be.
    Refused,
    /// No connection, or a 5xx, on every try.
    Failed,
    /// No answer after the request was sent, or the connection failed then: the gateway may
    /// have it; never sent again, the operator decides.
    Unknown,
    /// The gateway may have this link's message from before.
    Skipped,
    /// The job's key was revoked or its workspace suspended.
    Stopped,
    /// Its sidecar stopped during the hand-off: never sent again.
    Interrupted,
    /// A subject's erase removed it before its turn.
    Erased,
}

impl SendOutcome {
    pub const ALL: [SendOutcome; 9] = [
        SendOutcome::Accepted,
        SendOutcome::Queued,
        SendOutcome::Refused,
        SendOutcome::Failed,
        SendOutcome::Unknown,
        SendOutcome::Skipped,
        SendOutcome::Stopped,
        SendOutcome::Interrupted,
        SendOutcome::Erased,
    ];

    /// Its name, as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            SendOutcome::Accepted => "accepted",
            SendOutcome::Queued => "queued",
            SendOutcome::Refused => "refused",
            SendOutcome::Failed => "failed",
            SendOutcome::Unknown => "unknown",
            SendOutcome::Skipped => "skipped",
            SendOutcome::Stopped => "stopped",
            SendOutcome::Interrupted => "interrupted",
            SendOutcome::Erased => "erased",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
    }
}

#[async_trait]
pub trait GatewayStore: Send + Sync {
    /// Sets the workspace's gateway, replacing any.
    async fn put_gateway(&self, config: &GatewayConfig) -> StorageResult<()>;
    async fn gateway(&self, workspace: WorkspaceId) -> StorageResult<Option<GatewayConfig>>;
    /// Whether there was one to delete.
    async fn delete_gateway(&self, workspace: WorkspaceId) -> StorageResult<bool>;

    async fn insert_job(&self, job: &SendJob) -> StorageResult<()>;
    async fn finish_job(
        &self,
        workspace: WorkspaceId,
        id: &str,
        at: DateTime<Utc>,
        stopped: Option<&str>,
    ) -> StorageResult<()>;
    async fn job(&self, workspace: WorkspaceId, id: &str) -> StorageResult<Option<SendJob>>;

    async fn insert_send(
        &self,
        workspace: WorkspaceId,
        job: &str,
        send: &SendRecord,
    ) -> StorageResult<()>;
    /// A job's records by recipient line.
    async fn sends(&self, workspace: WorkspaceId, job: &str) -> StorageResult<Vec<SendRecord>>;
    /// Whether a message carrying the link `code` may be with the gateway already: accepted,
    /// queued, or handed over with an unknown outcome (never sent again).
    async fn accepted(&self, workspace: WorkspaceId, code: &str) -> StorageResult<bool>;
    /// Those of `codes` whose last hand-off's outcome is unknown (`unknown`, `interrupted`).
    async fn unknown_handoffs(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<String>>;
}

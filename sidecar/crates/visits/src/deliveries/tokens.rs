//! Callback tokens in SQL: the credential a gateway's callback URL carries in its path, made,
//! listed and revoked by a workspace's admin. The token itself is never stored, only its SHA-256
//! (hex, as API keys'); the API hashes what a callback presents and looks that up.

use super::model::Gateway;
use super::store::{at_ms, ms};
use crate::store::sql::{db, execute, fetch_all};
use crate::store::{SqlBackendStore, SqlVisitStore, VisitDialect, VisitStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::{StorageError, StorageResult, WorkspaceId};
use sqlx::Database;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;
type Row<V> = <Db<V> as Database>::Row;

const COLUMNS: &str =
    "id, workspace_id, name, gateway, token_hash, twilio_auth_token, created_ms, revoked_ms";

/// A stored callback token (its hash, never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackToken {
    /// `cbt_` and 16 hex digits.
    pub id: String,
    pub workspace: WorkspaceId,
    pub name: String,
    pub gateway: Gateway,
    pub token_hash: String,
    /// Twilio's auth token, when given: `X-Twilio-Signature` is checked with it.
    pub twilio_auth_token: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait CallbackTokenStore: Send + Sync {
    async fn insert_token(&self, token: &CallbackToken) -> StorageResult<()>;

    /// The workspace's tokens, oldest first, revoked ones included.
    async fn tokens(&self, workspace: WorkspaceId) -> StorageResult<Vec<CallbackToken>>;

    /// What a callback checks, in one query: the token with this hash (in any workspace,
    /// revoked or not) and whether its workspace is suspended.
    async fn token_for_callback(&self, hash: &str) -> StorageResult<Option<(CallbackToken, bool)>>;

    /// Revokes the workspace's token `id` (a revoked one stays as it was); `None`: no such
    /// token in this workspace.
    async fn revoke_token(
        &self,
        workspace: WorkspaceId,
        id: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<CallbackToken>>;
}

/// The callback tokens of the database a visit store writes to.
pub trait CallbackTokens {
    fn callback_tokens(&self) -> &dyn CallbackTokenStore;
}

impl CallbackTokens for dyn VisitStore {
    fn callback_tokens(&self) -> &dyn CallbackTokenStore {
        match self.sql_backend() {
            SqlBackendStore::Sqlite(store) => store,
            SqlBackendStore::Postgres(store) => store,
            SqlBackendStore::Mysql(store) => store,
        }
    }
}

/// A new token id: `cbt_` and 64 random bits in hex.
pub fn new_token_id() -> StorageResult<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| StorageError::Corrupt(format!("no randomness: {error}")))?;
    Ok(format!("cbt_{:016x}", u64::from_be_bytes(bytes)))
}

fn token<V: VisitDialect>(row: &Row<V>) -> StorageResult<CallbackToken> {
    let text = |c| V::Sql::read_text(row, c);
    let int = |c| Db::<V>::int(row, c).map_err(db);
    let gateway = text("gateway")?;
    Ok(CallbackToken {
        id: text("id")?,
        workspace: WorkspaceId::from_db(int("workspace_id")?),
        name: text("name")?,
        gateway: Gateway::parse(&gateway)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown gateway {gateway:?}")))?,
        token_hash: text("token_hash")?,
        twilio_auth_token: V::Sql::read_opt_text(row, "twilio_auth_token")?,
        created_at: at_ms(int("created_ms")?),
        revoked_at: Db::<V>::opt_int(row, "revoked_ms").map_err(db)?.map(at_ms),
    })
}

impl<V: VisitDialect> SqlVisitStore<V> {
    async fn token_where(
        &self,
        condition: &str,
        values: Vec<Value>,
    ) -> StorageResult<Vec<CallbackToken>> {
        let query = statement(
            &format!("SELECT {COLUMNS} FROM callback_tokens WHERE {condition}"),
            values,
        );
        (fetch_all::<V>(&self.writer, query).await?.iter())
            .map(token::<V>)
            .collect()
    }
}

#[async_trait]
impl<V: VisitDialect> CallbackTokenStore for SqlVisitStore<V> {
    async fn insert_token(&self, t: &CallbackToken) -> StorageResult<()> {
        let query = statement(
            &format!("INSERT INTO callback_tokens ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
            [
                Value::Text(t.id.clone()),
                Value::Int(t.workspace.get()),
                Value::Text(t.name.clone()),
                Value::Text(t.gateway.as_str().into()),
                Value::Text(t.token_hash.clone()),
                Value::OptText(t.twilio_auth_token.clone()),
                ms(t.created_at),
                Value::OptInt(t.revoked_at.map(|at| at.timestamp_millis())),
            ],
        );
        execute::<V>(&self.writer, query).await.map(|_| ())
    }

    async fn tokens(&self, workspace: WorkspaceId) -> StorageResult<Vec<CallbackToken>> {
        self.token_where(
            "workspace_id = ? ORDER BY created_ms, id",
            vec![Value::Int(workspace.get())],
        )
        .await
    }

    async fn token_for_callback(&self, hash: &str) -> StorageResult<Option<(CallbackToken, bool)>> {
        // The workspace's id only while it is suspended.
        let query = statement(
            &format!(
                "SELECT {COLUMNS}, (SELECT w.id FROM workspaces w \
                 WHERE w.id = callback_tokens.workspace_id AND w.suspended_at IS NOT NULL) \
                 AS suspended_id FROM callback_tokens WHERE token_hash = ?"
            ),
            [Value::Text(hash.into())],
        );
        let rows = fetch_all::<V>(&self.writer, query).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let suspended = Db::<V>::opt_int(row, "suspended_id").map_err(db)?.is_some();
        Ok(Some((token::<V>(row)?, suspended)))
    }

    async fn revoke_token(
        &self,
        workspace: WorkspaceId,
        id: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<CallbackToken>> {
        let query = statement(
            "UPDATE callback_tokens SET revoked_ms = ? WHERE workspace_id = ? AND id = ? \
             AND revoked_ms IS NULL",
            [ms(now), Value::Int(workspace.get()), Value::Text(id.into())],
        );
        execute::<V>(&self.writer, query).await?;
        let found = self
            .token_where(
                "workspace_id = ? AND id = ?",
                vec![Value::Int(workspace.get()), Value::Text(id.into())],
            )
            .await?;
        Ok(found.into_iter().next())
    }
}

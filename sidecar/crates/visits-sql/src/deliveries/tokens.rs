//! Callback tokens in SQL: the credential a gateway's callback URL carries in its path, made,
//! listed and revoked by a workspace's admin. The token itself is never stored, only its SHA-256
//! (hex, as API keys'); the API hashes what a callback presents and looks that up.

use super::store::ms;
use crate::sql::{db, execute, fetch_all};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::model::at_ms;
use shortlink_visits::deliveries::model::Gateway;
use shortlink_visits::deliveries::tokens::{CallbackToken, CallbackTokenStore};
use sqlx::Database;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

const COLUMNS: &str =
    "id, workspace_id, name, gateway, token_hash, twilio_auth_token, created_ms, revoked_ms";

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
    async fn unsealed_secrets(&self) -> StorageResult<Vec<CallbackToken>> {
        self.token_where(
            "twilio_auth_token IS NOT NULL AND twilio_auth_token NOT LIKE 'v1:%'",
            Vec::new(),
        )
        .await
    }

    async fn reseal_secret(&self, id: &str, old: &str, sealed: &str) -> StorageResult<bool> {
        let query = statement(
            "UPDATE callback_tokens SET twilio_auth_token = ? WHERE id = ? AND twilio_auth_token = ?",
            [
                Value::Text(sealed.to_owned()),
                Value::Text(id.to_owned()),
                Value::Text(old.to_owned()),
            ],
        );
        Ok(execute::<V>(&self.writer, query).await? > 0)
    }

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

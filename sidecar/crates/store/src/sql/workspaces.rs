//! Workspaces and API keys in SQL: what [`SqlStorage`]'s trait methods of the same names call.

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows::{self, API_KEY_SELECT};
use super::statement::{statement, Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::{StorageError, StorageResult};
use crate::model::{ApiKey, Role};
use crate::workspace::{
    quota_column, quota_read, DeletedWorkspace, Quotas, Workspace, WorkspaceChange,
};
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

const WORKSPACE_COLUMNS: &str = "id, slug, name, created_at, suspended_at, links_per_day, \
    compose_recipients, webhooks, key_rate_per_second, key_rate_burst";

/// Tables keyed by a link's code that a deleted workspace's links take with them. The
/// all-links rollups (no code) keep their visits: they are the installation's totals.
const PER_LINK_TABLES: [&str; 11] = [
    "visits",
    "link_visitors",
    "visit_buckets",
    "visit_agents",
    "visit_places",
    "visit_sources",
    "imported_links",
    "ab_arms",
    "ab_conversions",
    "ab_values",
    "ab_converters",
];

/// Tables whose rows carry the workspace's id, besides links, keys and webhook subscriptions
/// (whose counts the delete reports).
const WORKSPACE_TABLES: [&str; 12] = [
    "conversions",
    "retention_policies",
    "subject_requests",
    "delivery_receipts",
    "delivery_messages",
    "callback_tokens",
    "gateway_configs",
    "gateway_jobs",
    "gateway_sends",
    "gateway_pending",
    "not_found_redirects",
    "link_quarantines",
];

impl<D: Dialect> SqlStorage<D> {
    /// Workspaces where `column = value`, or all of them, by id.
    pub(super) async fn workspace_rows(
        &self,
        filter: Option<(&str, Value)>,
    ) -> StorageResult<Vec<Workspace>> {
        let query = match filter {
            Some((column, value)) => statement(
                &format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE {column} = ?"),
                [value],
            ),
            None => Statement::new(format!(
                "SELECT {WORKSPACE_COLUMNS} FROM workspaces ORDER BY id"
            )),
        };
        self.rows(query).await?.iter().map(workspace::<D>).collect()
    }

    pub(super) async fn insert_workspace(
        &self,
        slug: &str,
        name: &str,
        quotas: Quotas,
        now: DateTime<Utc>,
    ) -> StorageResult<Workspace> {
        self.execute(statement(
            "INSERT INTO workspaces \
               (slug, name, created_at, links_per_day, compose_recipients, webhooks, \
                key_rate_per_second, key_rate_burst) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                Value::Text(slug.to_owned()),
                Value::Text(name.to_owned()),
                D::time(now),
                Value::OptInt(quota_column(quotas.links_per_day)),
                Value::OptInt(quota_column(quotas.compose_recipients)),
                Value::OptInt(quota_column(quotas.webhooks)),
                Value::OptInt(quota_column(quotas.key_rate_per_second)),
                Value::OptInt(quota_column(quotas.key_rate_burst)),
            ],
        ))
        .await?;
        let query = statement(
            &format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE slug = ?"),
            [Value::Text(slug.to_owned())],
        );
        workspace::<D>(&self.read_back(query, "workspace").await?)
    }

    pub(super) async fn update_workspace(
        &self,
        id: WorkspaceId,
        change: &WorkspaceChange,
    ) -> StorageResult<Option<Workspace>> {
        let mut query = Statement::new("UPDATE workspaces SET id = id");
        if let Some(name) = &change.name {
            query.push(", name = ");
            query.bind(Value::Text(name.clone()));
        }
        if let Some(suspended_at) = change.suspended_at {
            query.push(", suspended_at = ");
            query.bind(D::opt_time(suspended_at));
        }
        if let Some(quotas) = change.quotas {
            for (column, value) in [
                ("links_per_day", quotas.links_per_day),
                ("compose_recipients", quotas.compose_recipients),
                ("webhooks", quotas.webhooks),
                ("key_rate_per_second", quotas.key_rate_per_second),
                ("key_rate_burst", quotas.key_rate_burst),
            ] {
                query.push(&format!(", {column} = "));
                query.bind(Value::OptInt(quota_column(value)));
            }
        }
        query.push(" WHERE id = ");
        query.bind(Value::Int(id.get()));
        self.execute(query).await?;
        let read = statement(
            &format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE id = ?"),
            [Value::Int(id.get())],
        );
        let mut connection = self.write().await?;
        let row = D::DB::fetch_optional(&mut connection, read)
            .await
            .map_err(StorageError::classify)?;
        row.as_ref().map(workspace::<D>).transpose()
    }

    pub(super) async fn delete_workspace_rows(
        &self,
        id: WorkspaceId,
    ) -> StorageResult<DeletedWorkspace> {
        let mut tx = D::begin(&self.writer).await?;
        let workspace = Value::Int(id.get());
        let run = |sql: String| statement(&sql, [workspace.clone()]);
        let mut deleted = DeletedWorkspace::default();
        for table in PER_LINK_TABLES {
            let query = run(format!(
                "DELETE FROM {table} WHERE code IN (SELECT code FROM links WHERE workspace_id = ?)"
            ));
            D::DB::execute(&mut tx, query)
                .await
                .map_err(StorageError::classify)?;
        }
        // Rows that name the workspace itself: conversions and delivery receipts (keyed to it),
        // its retention policies, its subject requests (which list erased links' codes), its
        // callback tokens.
        for table in WORKSPACE_TABLES {
            let query = run(format!("DELETE FROM {table} WHERE workspace_id = ?"));
            D::DB::execute(&mut tx, query)
                .await
                .map_err(StorageError::classify)?;
        }
        // Keys before their idempotency rows' links: the slots stay on deleted links only.
        let idempotency = run("DELETE FROM idempotency_keys WHERE api_key_id IN \
               (SELECT id FROM api_keys WHERE workspace_id = ?)"
            .into());
        D::DB::execute(&mut tx, idempotency)
            .await
            .map_err(StorageError::classify)?;
        for (table, count) in [
            ("links", &mut deleted.links),
            ("api_keys", &mut deleted.keys),
            ("webhook_subscriptions", &mut deleted.webhooks),
        ] {
            let query = run(format!("DELETE FROM {table} WHERE workspace_id = ?"));
            *count = D::DB::execute(&mut tx, query)
                .await
                .map_err(StorageError::classify)?;
        }
        let query = run("DELETE FROM workspaces WHERE id = ?".into());
        D::DB::execute(&mut tx, query)
            .await
            .map_err(StorageError::classify)?;
        tx.commit().await.map_err(StorageError::classify)?;
        Ok(deleted)
    }

    pub(super) async fn insert_api_key(
        &self,
        name: &str,
        role: Role,
        workspace: Option<WorkspaceId>,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey> {
        self.execute(statement(
            "INSERT INTO api_keys (name, role, workspace_id, key_hash, created_at) \
             VALUES (?, ?, ?, ?, ?)",
            [
                Value::Text(name.to_owned()),
                Value::Text(role.as_str().to_owned()),
                Value::OptInt(workspace.map(WorkspaceId::get)),
                Value::Text(key_hash.to_owned()),
                D::time(now),
            ],
        ))
        .await?;
        let query = statement(
            &format!("{API_KEY_SELECT} WHERE k.key_hash = ?"),
            [Value::Text(key_hash.to_owned())],
        );
        let row = self.read_back(query, "API key").await?;
        rows::api_key::<D>(&row)
    }

    pub(super) async fn api_keys_of(
        &self,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<ApiKey>> {
        let query = match workspace {
            Some(workspace) => statement(
                &format!("{API_KEY_SELECT} WHERE k.workspace_id = ? ORDER BY k.id"),
                [Value::Int(workspace.get())],
            ),
            None => Statement::new(format!("{API_KEY_SELECT} ORDER BY k.id")),
        };
        self.rows(query)
            .await?
            .iter()
            .map(rows::api_key::<D>)
            .collect()
    }

    pub(super) async fn revoke_key(
        &self,
        workspace: Option<WorkspaceId>,
        id: i64,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<ApiKey>> {
        let mut revoke = statement(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
            [D::time(now), Value::Int(id)],
        );
        and_in_workspace(&mut revoke, workspace);
        self.execute(revoke).await?;
        let mut query = statement(
            &format!("{API_KEY_SELECT} WHERE k.id = ?"),
            [Value::Int(id)],
        );
        and_in_workspace(&mut query, workspace);
        let mut connection = self.write().await?;
        let row = D::DB::fetch_optional(&mut connection, query)
            .await
            .map_err(StorageError::classify)?;
        row.as_ref().map(rows::api_key::<D>).transpose()
    }
}

/// Limits a key statement to `workspace`'s keys (`None`: any).
fn and_in_workspace(query: &mut Statement, workspace: Option<WorkspaceId>) {
    if let Some(workspace) = workspace {
        query.push(" AND workspace_id = ");
        query.bind(Value::Int(workspace.get()));
    }
}

fn workspace<D: Dialect>(row: &Row<D>) -> StorageResult<Workspace> {
    Ok(Workspace {
        id: WorkspaceId::from_db(D::DB::int(row, "id")?),
        slug: D::read_text(row, "slug")?,
        name: D::read_text(row, "name")?,
        created_at: D::read_time(row, "created_at")?,
        suspended_at: D::read_opt_time(row, "suspended_at")?,
        quotas: Quotas {
            links_per_day: quota_read(D::DB::opt_int(row, "links_per_day")?)?,
            compose_recipients: quota_read(D::DB::opt_int(row, "compose_recipients")?)?,
            webhooks: quota_read(D::DB::opt_int(row, "webhooks")?)?,
            key_rate_per_second: quota_read(D::DB::opt_int(row, "key_rate_per_second")?)?,
            key_rate_burst: quota_read(D::DB::opt_int(row, "key_rate_burst")?)?,
        },
    })
}

//! Retention policies and the deletes they ask for, written once for every backend's visit store:
//! [`RetentionStore`], implemented for [`SqlVisitStore`]. Which links a policy covers is a
//! condition on `links` (by workspace, and by campaign through `links_workspace_campaign`);
//! expired visits are found by that condition and their time, then deleted by id, a bounded
//! number at a time (short locks on SQLite, no `DELETE ... LIMIT` needed on PostgreSQL).

use crate::sql::{db, execute, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value, IN_LIST};
use shortlink_store::StorageResult;
use shortlink_visits::retention::RetentionStore;
use shortlink_visits::retention::{
    CampaignRetention, RetentionPolicy, VisitScope, WorkspaceRetention,
};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// The links of a scope: `code IN (...)` or `code NOT IN (...)` over `links`, and its values.
fn links_condition(scope: &VisitScope) -> (String, Vec<Value>) {
    let ws = |w: WorkspaceId| Value::Int(w.get());
    match scope {
        VisitScope::Campaign {
            workspace,
            campaign,
        } => (
            "code IN (SELECT code FROM links WHERE workspace_id = ? AND campaign = ?)".into(),
            vec![ws(*workspace), Value::Text(campaign.clone())],
        ),
        VisitScope::Workspace { workspace, except } if except.is_empty() => (
            "code IN (SELECT code FROM links WHERE workspace_id = ?)".into(),
            vec![ws(*workspace)],
        ),
        VisitScope::Workspace { workspace, except } => (
            format!(
                "code IN (SELECT code FROM links WHERE workspace_id = ? \
                 AND (campaign IS NULL OR campaign NOT IN ({})))",
                marks(except.len())
            ),
            std::iter::once(ws(*workspace))
                .chain(except.iter().cloned().map(Value::Text))
                .collect(),
        ),
        VisitScope::Rest {
            workspaces,
            campaigns,
        } => {
            let mut parts = Vec::new();
            let mut values = Vec::new();
            if !workspaces.is_empty() {
                parts.push(format!("workspace_id IN ({})", marks(workspaces.len())));
                values.extend(workspaces.iter().map(|w| ws(*w)));
            }
            for (workspace, campaign) in campaigns {
                parts.push("(workspace_id = ? AND campaign = ?)".into());
                values.extend([ws(*workspace), Value::Text(campaign.clone())]);
            }
            if parts.is_empty() {
                return ("1 = 1".into(), Vec::new());
            }
            (
                format!(
                    "code NOT IN (SELECT code FROM links WHERE {})",
                    parts.join(" OR ")
                ),
                values,
            )
        }
    }
}

#[async_trait]
impl<V: VisitDialect> RetentionStore for SqlVisitStore<V> {
    async fn policy(&self, workspace: WorkspaceId) -> StorageResult<RetentionPolicy> {
        let query = statement(
            "SELECT campaign, visits_days, conversions_days, webhook_failures_days, anonymize_ip \
             FROM retention_policies WHERE workspace_id = ? ORDER BY campaign",
            [Value::Int(workspace.get())],
        );
        let mut policy = RetentionPolicy::default();
        for row in fetch_all::<V>(&self.writer, query).await? {
            let int = |c| Db::<V>::opt_int(&row, c).map_err(db);
            let campaign = V::Sql::read_text(&row, "campaign")?;
            if campaign.is_empty() {
                policy.workspace = WorkspaceRetention {
                    visits_days: int("visits_days")?,
                    conversions_days: int("conversions_days")?,
                    webhook_failures_days: int("webhook_failures_days")?,
                    anonymize_ip: int("anonymize_ip")?.map(|v| v != 0),
                };
            } else {
                policy.campaigns.push(CampaignRetention {
                    campaign,
                    visits_days: int("visits_days")?,
                    conversions_days: int("conversions_days")?,
                });
            }
        }
        Ok(policy)
    }

    async fn set_policy(
        &self,
        workspace: WorkspaceId,
        policy: &RetentionPolicy,
    ) -> StorageResult<()> {
        let ws = Value::Int(workspace.get());
        let mut tx = V::Sql::begin(&self.writer).await?;
        let clear = statement(
            "DELETE FROM retention_policies WHERE workspace_id = ?",
            [ws.clone()],
        );
        Db::<V>::execute(&mut *tx, clear).await.map_err(db)?;
        let w = &policy.workspace;
        let rows = std::iter::once((
            String::new(),
            w.visits_days,
            w.conversions_days,
            w.webhook_failures_days,
            w.anonymize_ip.map(i64::from),
        ))
        .filter(|_| !w.is_empty())
        .chain(policy.campaigns.iter().map(|c| {
            (
                c.campaign.clone(),
                c.visits_days,
                c.conversions_days,
                None,
                None,
            )
        }));
        for (campaign, visits, conversions, failures, anonymize) in rows {
            let insert = statement(
                "INSERT INTO retention_policies (workspace_id, campaign, visits_days, \
                 conversions_days, webhook_failures_days, anonymize_ip) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    ws.clone(),
                    Value::Text(campaign),
                    Value::OptInt(visits),
                    Value::OptInt(conversions),
                    Value::OptInt(failures),
                    Value::OptInt(anonymize),
                ],
            );
            Db::<V>::execute(&mut *tx, insert).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    async fn policies(&self) -> StorageResult<Vec<(WorkspaceId, RetentionPolicy)>> {
        let query = Statement::new(
            "SELECT DISTINCT workspace_id FROM retention_policies ORDER BY workspace_id",
        );
        let mut out = Vec::new();
        for row in fetch_all::<V>(&self.reader, query).await? {
            let workspace = WorkspaceId::from_db(Db::<V>::int(&row, "workspace_id").map_err(db)?);
            out.push((workspace, self.policy(workspace).await?));
        }
        Ok(out)
    }

    async fn delete_scoped_visits(
        &self,
        scope: &VisitScope,
        before: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<u64> {
        let (condition, values) = links_condition(scope);
        let mut query = statement(
            "SELECT event_id FROM visits WHERE visited_at < ?",
            [V::visit_time(before)],
        );
        query.push(" AND ");
        let mut parts = condition.split('?');
        query.push(parts.next().unwrap_or_default());
        for (value, part) in values.into_iter().zip(parts) {
            query.bind(value).push(part);
        }
        query.push(" LIMIT ").bind(Value::Int(i64::from(limit)));
        let ids: Vec<String> = (fetch_all::<V>(&self.writer, query).await?.iter())
            .map(|row| V::Sql::read_text(row, "event_id"))
            .collect::<StorageResult<_>>()?;
        let mut deleted = 0;
        for chunk in ids.chunks(IN_LIST) {
            // The time again: PostgreSQL then reads only the partitions of those days (and the
            // row found, not another of the same id in another day).
            let delete = statement(
                &format!(
                    "DELETE FROM visits WHERE visited_at < ? AND event_id IN ({})",
                    marks(chunk.len())
                ),
                std::iter::once(V::visit_time(before))
                    .chain(chunk.iter().cloned().map(Value::Text)),
            );
            deleted += execute::<V>(&self.writer, delete).await?;
        }
        Ok(deleted)
    }

    async fn delete_scoped_receipts(
        &self,
        scope: &VisitScope,
        before_ms: i64,
    ) -> StorageResult<u64> {
        let (condition, values) = links_condition(scope);
        let mut deleted = 0;
        for table in ["delivery_receipts", "delivery_messages"] {
            let query = statement(
                &format!("DELETE FROM {table} WHERE received_ms < ? AND {condition}"),
                std::iter::once(Value::Int(before_ms)).chain(values.iter().cloned()),
            );
            let n = execute::<V>(&self.writer, query).await?;
            if table == "delivery_receipts" {
                deleted = n;
            }
        }
        Ok(deleted)
    }

    async fn delete_conversions(
        &self,
        workspace: WorkspaceId,
        campaign: Option<&str>,
        except: &[String],
        before_ms: i64,
    ) -> StorageResult<u64> {
        let ws = Value::Int(workspace.get());
        let query = match (campaign, except.is_empty()) {
            (Some(campaign), _) => statement(
                "DELETE FROM conversions WHERE workspace_id = ? AND campaign = ? \
                 AND converted_ms < ?",
                [ws, Value::Text(campaign.into()), Value::Int(before_ms)],
            ),
            (None, true) => statement(
                "DELETE FROM conversions WHERE workspace_id = ? AND converted_ms < ?",
                [ws, Value::Int(before_ms)],
            ),
            (None, false) => statement(
                &format!(
                    "DELETE FROM conversions WHERE workspace_id = ? AND converted_ms < ? \
                     AND (campaign IS NULL OR campaign NOT IN ({}))",
                    marks(except.len())
                ),
                [ws, Value::Int(before_ms)]
                    .into_iter()
                    .chain(except.iter().cloned().map(Value::Text)),
            ),
        };
        execute::<V>(&self.writer, query).await
    }

    async fn delete_webhook_failures(
        &self,
        workspace: WorkspaceId,
        before_ms: i64,
    ) -> StorageResult<u64> {
        let query = statement(
            "DELETE FROM webhook_failures WHERE failed_ms < ? AND subscription_id IN \
             (SELECT id FROM webhook_subscriptions WHERE workspace_id = ?)",
            [Value::Int(before_ms), Value::Int(workspace.get())],
        );
        execute::<V>(&self.writer, query).await
    }
}

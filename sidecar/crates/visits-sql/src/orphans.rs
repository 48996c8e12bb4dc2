//! Orphan visits in SQL, written once for every backend's visit store: [`OrphanStore`],
//! implemented for [`SqlVisitStore`]. Times are Unix ms. Rows and counts carry the workspace
//! the edge recorded (`''`: none), and every read names one.

use crate::sql::{db, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{Backend, StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::orphans::OrphanStore;
use shortlink_visits::orphans::{
    domain_of, orphan_of, workspace_of, OrphanCounts, OrphanQuery, OrphanScope, OrphanVisit,
};
use shortlink_wire::event::OrphanKind;
use std::collections::{BTreeMap, HashMap};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

const COLUMNS: &str = "id, kind, domain, path, at_ms, status, device, audience, country, \
                       referrer_host, language";

/// `workspace = ?` for a workspace's scope, or what admits every row (the operator's).
fn push_scope(query: &mut Statement, scope: &OrphanScope) {
    match scope {
        OrphanScope::Workspace(name) => {
            query.push("workspace = ").bind(Value::Text(name.clone()));
        }
        OrphanScope::Every => {
            query.push("1 = 1");
        }
        OrphanScope::Nothing => {
            query.push("1 = 0");
        }
    }
}

fn row_values(
    id: &str,
    kind: OrphanKind,
    domain: &str,
    path: String,
    visit: &Visit,
) -> [Value; 12] {
    [
        Value::Text(workspace_of(visit).to_owned()),
        Value::Text(id.to_owned()),
        Value::Text(kind.as_str().to_owned()),
        Value::Text(domain.to_owned()),
        Value::Text(path),
        Value::Int(visit.time_ms),
        Value::OptInt(visit.status.map(i64::from)),
        Value::Text(visit.agent.device.as_str().to_owned()),
        Value::Text(visit.agent.audience.as_str().to_owned()),
        Value::OptText(visit.country.clone()),
        Value::OptText(visit.referrer_host.clone()),
        Value::OptText(visit.language.clone()),
    ]
}

impl<V: VisitDialect> SqlVisitStore<V> {
    fn insert_ignore() -> String {
        let insert = match V::Sql::BACKEND {
            Backend::Mysql => "INSERT IGNORE INTO",
            Backend::Sqlite | Backend::Postgres => "INSERT INTO",
        };
        let tail = match V::Sql::BACKEND {
            Backend::Mysql => "",
            Backend::Sqlite | Backend::Postgres => " ON CONFLICT (id) DO NOTHING",
        };
        format!(
            "{insert} orphan_visits (workspace, {COLUMNS}) VALUES ({}){tail}",
            marks(12)
        )
    }

    fn add_counts() -> &'static str {
        match V::Sql::BACKEND {
            Backend::Mysql => {
                "INSERT INTO orphan_counts (workspace, domain, kind, visits) VALUES (?, ?, ?, ?) \
                 ON DUPLICATE KEY UPDATE visits = visits + VALUES(visits)"
            }
            Backend::Sqlite | Backend::Postgres => {
                "INSERT INTO orphan_counts (workspace, domain, kind, visits) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (workspace, domain, kind) \
                 DO UPDATE SET visits = orphan_counts.visits + excluded.visits"
            }
        }
    }
}

fn read_visit<V: VisitDialect>(row: &<Db<V> as sqlx::Database>::Row) -> StorageResult<OrphanVisit> {
    let text = |c| V::Sql::read_text(row, c);
    let opt = |c| V::Sql::read_opt_text(row, c);
    let at_ms = Db::<V>::int(row, "at_ms").map_err(db)?;
    let status = Db::<V>::opt_int(row, "status").map_err(db)?;
    Ok(OrphanVisit {
        id: text("id")?,
        kind: text("kind")?,
        domain: text("domain")?,
        path: text("path")?,
        at: DateTime::from_timestamp_millis(at_ms)
            .ok_or_else(|| StorageError::Corrupt(format!("orphan visit time {at_ms}")))?,
        status: status.and_then(|s| u16::try_from(s).ok()),
        device: text("device")?,
        audience: text("audience")?,
        country: opt("country")?,
        referrer_host: opt("referrer_host")?,
        language: opt("language")?,
    })
}

#[async_trait]
impl<V: VisitDialect> OrphanStore for SqlVisitStore<V> {
    async fn store_orphans(&self, visits: &[Visit]) -> StorageResult<u64> {
        let orphans: Vec<_> = visits
            .iter()
            .filter_map(|v| Some((v, orphan_of(v)?, domain_of(v)?)))
            .collect();
        if orphans.is_empty() {
            return Ok(0);
        }
        let insert = Self::insert_ignore();
        let mut counts: HashMap<(String, String, OrphanKind), i64> = HashMap::new();
        let mut tx = V::Sql::begin(&self.writer).await?;
        for (visit, (kind, path), domain) in orphans {
            let values = row_values(&visit.event_id, kind, &domain, path, visit);
            let inserted = Db::<V>::execute(&mut *tx, statement(&insert, values))
                .await
                .map_err(db)?;
            if inserted > 0 {
                let workspace = workspace_of(visit).to_owned();
                *counts.entry((workspace, domain, kind)).or_default() += 1;
            }
        }
        let mut new = 0;
        for ((workspace, domain, kind), n) in counts {
            let values = [
                Value::Text(workspace),
                Value::Text(domain),
                Value::Text(kind.as_str().into()),
                Value::Int(n),
            ];
            Db::<V>::execute(&mut *tx, statement(Self::add_counts(), values))
                .await
                .map_err(db)?;
            new += n as u64;
        }
        tx.commit().await.map_err(db)?;
        Ok(new)
    }

    async fn orphan_visits(&self, q: &OrphanQuery) -> StorageResult<Vec<OrphanVisit>> {
        let mut query = Statement::new(format!("SELECT {COLUMNS} FROM orphan_visits WHERE "));
        push_scope(&mut query, &q.scope);
        if let Some(kind) = q.kind {
            query
                .push(" AND kind = ")
                .bind(Value::Text(kind.as_str().into()));
        }
        if let Some(domain) = &q.domain {
            query
                .push(" AND domain = ")
                .bind(Value::Text(domain.clone()));
        }
        if let Some(from) = q.from {
            query
                .push(" AND at_ms >= ")
                .bind(Value::Int(from.timestamp_millis()));
        }
        if let Some(to) = q.to {
            query
                .push(" AND at_ms < ")
                .bind(Value::Int(to.timestamp_millis()));
        }
        if let Some((at_ms, id)) = &q.after {
            query
                .push(" AND (at_ms > ")
                .bind(Value::Int(*at_ms))
                .push(" OR (at_ms = ")
                .bind(Value::Int(*at_ms))
                .push(" AND id > ")
                .bind(Value::Text(id.clone()))
                .push("))");
        }
        query.push(&format!(" ORDER BY at_ms, id LIMIT {}", q.limit));
        let mut connection = self.reader.acquire().await.map_err(db)?;
        let rows = Db::<V>::fetch_all(&mut connection, query)
            .await
            .map_err(db)?;
        rows.iter().map(read_visit::<V>).collect()
    }

    async fn orphan_counts(
        &self,
        scope: &OrphanScope,
    ) -> StorageResult<BTreeMap<String, OrphanCounts>> {
        let mut query = Statement::new("SELECT domain, kind, visits FROM orphan_counts WHERE ");
        push_scope(&mut query, scope);
        let mut connection = self.reader.acquire().await.map_err(db)?;
        let rows = Db::<V>::fetch_all(&mut connection, query)
            .await
            .map_err(db)?;
        let mut out: BTreeMap<String, OrphanCounts> = BTreeMap::new();
        for row in &rows {
            let kind = V::Sql::read_text(row, "kind")?;
            let Some(kind) = OrphanKind::parse(kind.as_bytes()) else {
                continue;
            };
            let visits = Db::<V>::int(row, "visits").map_err(db)?;
            out.entry(V::Sql::read_text(row, "domain")?)
                .or_default()
                .add(kind, visits.max(0) as u64);
        }
        Ok(out)
    }

    async fn delete_orphans_before(&self, before: DateTime<Utc>, limit: u64) -> StorageResult<u64> {
        // A bounded delete: the oldest rows' ids first (MariaDB cannot LIMIT a subquery of
        // the table it deletes from: a derived table in between).
        let sql = format!(
            "DELETE FROM orphan_visits WHERE id IN (SELECT id FROM (SELECT id FROM orphan_visits \
             WHERE at_ms < ? ORDER BY at_ms LIMIT {limit}) AS oldest)"
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        Db::<V>::execute(
            &mut connection,
            statement(&sql, [Value::Int(before.timestamp_millis())]),
        )
        .await
        .map_err(db)
    }

    async fn delete_orphans_of(&self, name: &str) -> StorageResult<u64> {
        let scope = OrphanScope::Workspace(name.to_owned());
        let mut tx = V::Sql::begin(&self.writer).await?;
        let mut deleted = 0;
        for table in ["orphan_visits", "orphan_counts"] {
            let mut query = Statement::new(format!("DELETE FROM {table} WHERE "));
            push_scope(&mut query, &scope);
            deleted += Db::<V>::execute(&mut *tx, query).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(deleted)
    }
}

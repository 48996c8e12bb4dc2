//! What a subject request reads and deletes, written once for every backend's visit store (the
//! links, visits, rollups and conversions live in one database): [`SubjectStore`], implemented
//! for [`SqlVisitStore`]. Every read starts from the workspace's links (the `ref` and code
//! indexes of `links`), then reaches visits and conversions by code (`visits_code_time`,
//! `conversions_code`): no scan of the visits, whatever their number.

use crate::sql::{db, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::subjects::SubjectStore;
use shortlink_visits::subjects::{Selector, SubjectRequest, SubjectVisit};
use sqlx::Database;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

/// The per-link tables whose rows an erase deletes, beside the raw visits: the visitor set
/// (a hash of address and agent) and the link's own rollups (hours, places, devices, sources).
/// The all-links rows (`*`) are sums over everyone and stay. The A/B rollups (`ab_*`, with
/// their converting-visitor set) are the link's own too.
const PER_LINK_TABLES: [&str; 9] = [
    "link_visitors",
    "visit_buckets",
    "visit_agents",
    "visit_places",
    "visit_sources",
    "ab_arms",
    "ab_conversions",
    "ab_values",
    "ab_converters",
];

const REQUEST_COLUMNS: &str = "id, workspace_id, request_key, selector, state, codes, tombstone, \
     links, visits, conversions, created_ms, finished_ms";

fn request_row<V: VisitDialect>(row: &Row<V>) -> StorageResult<SubjectRequest> {
    let text = |c| V::Sql::read_text(row, c);
    let int = |c| Db::<V>::int(row, c).map_err(db);
    Ok(SubjectRequest {
        id: text("id")?,
        workspace: WorkspaceId::from_db(int("workspace_id")?),
        key: text("request_key")?,
        selector: text("selector")?,
        done: text("state")? == "done",
        codes: (text("codes")?.split('\n'))
            .filter(|code| !code.is_empty())
            .map(str::to_owned)
            .collect(),
        tombstone: text("tombstone")?,
        links: int("links")?,
        visits: int("visits")?,
        conversions: int("conversions")?,
        created_ms: int("created_ms")?,
        finished_ms: Db::<V>::opt_int(row, "finished_ms").map_err(db)?,
    })
}

#[async_trait]
impl<V: VisitDialect> SubjectStore for SqlVisitStore<V> {
    async fn subject_codes(
        &self,
        workspace: WorkspaceId,
        selector: &Selector,
    ) -> StorageResult<Vec<String>> {
        let ws = Value::Int(workspace.get());
        let query = match selector {
            Selector::Ref(reference) => statement(
                "SELECT code FROM links WHERE workspace_id = ? AND recipient_ref = ? ORDER BY code",
                [ws, Value::Text(reference.clone())],
            ),
            Selector::CampaignRef {
                campaign,
                reference,
            } => statement(
                "SELECT code FROM links WHERE workspace_id = ? AND recipient_ref = ? \
                 AND campaign = ? ORDER BY code",
                [
                    ws,
                    Value::Text(reference.clone()),
                    Value::Text(campaign.clone()),
                ],
            ),
            Selector::Code(code) => statement(
                "SELECT code FROM links WHERE workspace_id = ? AND code = ?",
                [ws, Value::Text(code.clone())],
            ),
        };
        (fetch_all::<V>(&self.reader, query).await?.iter())
            .map(|row| V::Sql::read_text(row, "code"))
            .collect()
    }

    async fn subject_visits(&self, codes: &[String]) -> StorageResult<Vec<SubjectVisit>> {
        let mut out = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT event_id, code, visited_at, CAST(status AS {}) AS status, ip, \
                       browser, browser_version, os, os_version, device, audience, agent, \
                       country, region, city, isp, referrer_host, short_domain, language, rule \
                     FROM visits WHERE code IN ({}) ORDER BY visited_at, event_id",
                    V::Sql::BIGINT,
                    marks(chunk.len())
                ),
                chunk.iter().cloned().map(Value::Text),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                let opt = |c| V::Sql::read_opt_text(&row, c);
                out.push(SubjectVisit {
                    event_id: V::Sql::read_text(&row, "event_id")?,
                    code: V::Sql::read_text(&row, "code")?,
                    visited_at: V::read_visit_time(&row, "visited_at")?,
                    status: Db::<V>::opt_int(&row, "status").map_err(db)?,
                    ip: opt("ip")?,
                    browser: opt("browser")?,
                    browser_version: opt("browser_version")?,
                    os: opt("os")?,
                    os_version: opt("os_version")?,
                    device: V::Sql::read_text(&row, "device")?,
                    audience: V::Sql::read_text(&row, "audience")?,
                    agent: opt("agent")?,
                    country: opt("country")?,
                    region: opt("region")?,
                    city: opt("city")?,
                    isp: opt("isp")?,
                    referrer_host: opt("referrer_host")?,
                    short_domain: opt("short_domain")?,
                    language: opt("language")?,
                    rule: opt("rule")?,
                });
            }
        }
        Ok(out)
    }

    async fn subject_conversion_ids(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<String>> {
        let mut ids = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT id FROM conversions WHERE workspace_id = ? AND code IN ({}) \
                     ORDER BY converted_ms, id",
                    marks(chunk.len())
                ),
                std::iter::once(Value::Int(workspace.get()))
                    .chain(chunk.iter().cloned().map(Value::Text)),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                ids.push(V::Sql::read_text(&row, "id")?);
            }
        }
        Ok(ids)
    }

    async fn erase_code(
        &self,
        workspace: WorkspaceId,
        code: &str,
        request: &str,
    ) -> StorageResult<(u64, u64)> {
        let by_code = || {
            statement(
                "DELETE FROM visits WHERE code = ?",
                [Value::Text(code.into())],
            )
        };
        let mut tx = V::Sql::begin(&self.writer).await?;
        let visits = Db::<V>::execute(&mut *tx, by_code()).await.map_err(db)?;
        for table in PER_LINK_TABLES {
            let query = statement(
                &format!("DELETE FROM {table} WHERE code = ?"),
                [Value::Text(code.into())],
            );
            Db::<V>::execute(&mut *tx, query).await.map_err(db)?;
        }
        let query = statement(
            "DELETE FROM conversions WHERE workspace_id = ? AND code = ?",
            [Value::Int(workspace.get()), Value::Text(code.into())],
        );
        let conversions = Db::<V>::execute(&mut *tx, query).await.map_err(db)?;
        // What gateways reported of the messages that carried the link, and what the gateway
        // answered compose's hand-off of them, and those still queued (issue 68).
        for table in [
            "delivery_receipts",
            "delivery_messages",
            "gateway_sends",
            "gateway_pending",
        ] {
            let query = statement(
                &format!("DELETE FROM {table} WHERE workspace_id = ? AND code = ?"),
                [Value::Int(workspace.get()), Value::Text(code.into())],
            );
            Db::<V>::execute(&mut *tx, query).await.map_err(db)?;
        }
        let query = statement(
            "UPDATE subject_requests SET visits = visits + ?, conversions = conversions + ? \
             WHERE id = ?",
            [
                Value::Int(i64::try_from(visits).unwrap_or(i64::MAX)),
                Value::Int(i64::try_from(conversions).unwrap_or(i64::MAX)),
                Value::Text(request.into()),
            ],
        );
        Db::<V>::execute(&mut *tx, query).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok((visits, conversions))
    }

    async fn insert_request(&self, r: &SubjectRequest) -> StorageResult<bool> {
        let query = statement(
            &format!(
                "INSERT INTO subject_requests ({REQUEST_COLUMNS}) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            [
                Value::Text(r.id.clone()),
                Value::Int(r.workspace.get()),
                Value::Text(r.key.clone()),
                Value::Text(r.selector.clone()),
                Value::Text(if r.done { "done" } else { "running" }.into()),
                Value::Text(r.codes.join("\n")),
                Value::Text(r.tombstone.clone()),
                Value::Int(r.links),
                Value::Int(r.visits),
                Value::Int(r.conversions),
                Value::Int(r.created_ms),
                Value::OptInt(r.finished_ms),
            ],
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        match Db::<V>::execute(&mut connection, query).await.map_err(db) {
            Ok(_) => Ok(true),
            Err(StorageError::Conflict) => Ok(false),
            Err(error) => Err(error),
        }
    }

    async fn request(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> StorageResult<Option<SubjectRequest>> {
        let query = statement(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM subject_requests \
                 WHERE workspace_id = ? AND request_key = ?"
            ),
            [Value::Int(workspace.get()), Value::Text(key.into())],
        );
        // From the writer: a repeat right after a request must find it.
        match fetch_all::<V>(&self.writer, query).await?.first() {
            Some(row) => request_row::<V>(row).map(Some),
            None => Ok(None),
        }
    }

    async fn requests(
        &self,
        workspace: WorkspaceId,
        limit: u32,
    ) -> StorageResult<Vec<SubjectRequest>> {
        let query = statement(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM subject_requests WHERE workspace_id = ? \
                 ORDER BY created_ms DESC, id DESC LIMIT ?"
            ),
            [Value::Int(workspace.get()), Value::Int(i64::from(limit))],
        );
        (fetch_all::<V>(&self.reader, query).await?.iter())
            .map(request_row::<V>)
            .collect()
    }

    async fn finish_request(&self, id: &str, links: i64, finished_ms: i64) -> StorageResult<()> {
        let query = statement(
            "UPDATE subject_requests SET state = 'done', links = ?, finished_ms = ? WHERE id = ?",
            [
                Value::Int(links),
                Value::Int(finished_ms),
                Value::Text(id.into()),
            ],
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        Db::<V>::execute(&mut connection, query).await.map_err(db)?;
        Ok(())
    }
}

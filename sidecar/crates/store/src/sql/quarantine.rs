//! Quarantines in SQL (`link_quarantines`, `links.target_host`): what [`SqlStorage`]'s and
//! [`SqlTx`]'s trait methods of the same names call.

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows;
use super::statement::{statement, Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::{StorageError, StorageResult};
use crate::quarantine::{host_key, host_range, AbuseReport, Quarantine};
use shortlink_model::{Link, WorkspaceId};

const COLUMNS: &str = "code, workspace_id, feed, entry, quarantined_at, released_at, released_by";

impl<D: Dialect> SqlStorage<D> {
    /// The unrevoked links on `host` or a subdomain of it, by code after `after`, at most
    /// `limit`: one range of `links_target_host`, whoever owns them.
    pub(super) async fn links_on_host_page(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        self.links_in_host_range("target_host >= ? AND target_host < ?", host, after, limit)
            .await
    }

    /// The unrevoked links that can send to `host` (or a subdomain of it) besides their target
    /// (`link_destination_hosts`), by code after `after`, at most `limit`.
    pub(super) async fn links_sending_to_host_page(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let destinations = "code IN (SELECT code FROM link_destination_hosts \
                            WHERE host_key >= ? AND host_key < ?)";
        self.links_in_host_range(destinations, host, after, limit)
            .await
    }

    /// The unrevoked links `range` (a condition on two `?`: the host's range of keys) selects, by
    /// code after `after`, at most `limit`.
    async fn links_in_host_range(
        &self,
        range: &str,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let Some((start, end)) = host_range(host) else {
            return Ok(Vec::new());
        };
        let columns = rows::select_columns::<D>();
        let mut query = statement(
            &format!("SELECT {columns} FROM links WHERE {range} AND revoked_at IS NULL"),
            [Value::Text(start), Value::Text(end)],
        );
        if let Some(after) = after {
            query.push(" AND code > ");
            query.bind(Value::Text(after.to_owned()));
        }
        query.push(" ORDER BY code LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        self.links(query).await
    }

    /// The distinct keys of `link_destination_hosts` after `after`, at most `limit`.
    pub(super) async fn destination_keys_page(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<String>> {
        let mut query = Statement::new(
            "SELECT DISTINCT host_key FROM link_destination_hosts WHERE host_key > ",
        );
        query.bind(Value::Text(after.unwrap_or_default().to_owned()));
        query.push(" ORDER BY host_key LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        (self.rows(query).await?.iter())
            .map(|row| D::read_text(row, "host_key"))
            .collect()
    }

    /// The distinct host keys of links after `after`, at most `limit`: the index alone.
    pub(super) async fn host_keys_page(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<String>> {
        let mut query =
            Statement::new("SELECT DISTINCT target_host FROM links WHERE target_host > ");
        query.bind(Value::Text(after.unwrap_or_default().to_owned()));
        query.push(" ORDER BY target_host LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        (self.rows(query).await?.iter())
            .map(|row| D::read_text(row, "target_host"))
            .collect()
    }

    /// Writes the host key of up to `limit` links stored before it existed; returns how many.
    /// A target without a host gets an empty key, so every row is done once.
    pub(super) async fn fill_host_keys(&self, limit: u32) -> StorageResult<u64> {
        let query = statement(
            "SELECT code, target FROM links WHERE target_host IS NULL LIMIT ?",
            [Value::Int(i64::from(limit))],
        );
        let rows = self.rows(query).await?;
        let mut tx = D::begin(&self.writer).await?;
        for row in &rows {
            let target = D::read_text(row, "target")?;
            let update = statement(
                "UPDATE links SET target_host = ? WHERE code = ? AND target_host IS NULL",
                [
                    Value::Text(host_key(&target).unwrap_or_default()),
                    Value::Text(D::read_text(row, "code")?),
                ],
            );
            D::DB::execute(&mut tx, update)
                .await
                .map_err(StorageError::classify)?;
        }
        tx.commit().await.map_err(StorageError::classify)?;
        Ok(rows.len() as u64)
    }

    /// The quarantines under `feed` (held and released), or `workspace`'s, newest first.
    pub(super) async fn quarantine_rows(
        &self,
        feed: Option<&str>,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<Quarantine>> {
        let mut query = Statement::new(format!(
            "SELECT {COLUMNS} FROM link_quarantines WHERE 1 = 1"
        ));
        if let Some(feed) = feed {
            query.push(" AND feed = ");
            query.bind(Value::Text(feed.to_owned()));
        }
        if let Some(workspace) = workspace {
            query.push(" AND workspace_id = ");
            query.bind(Value::Int(workspace.get()));
        }
        query.push(" ORDER BY quarantined_at DESC, code");
        self.rows(query).await?.iter().map(row::<D>).collect()
    }
}

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn insert_abuse_report(&self, report: &AbuseReport) -> StorageResult<()> {
        let insert = statement(
            "INSERT INTO abuse_reports (code, host, reported_at) VALUES (?, ?, ?)",
            [
                Value::Text(report.code.clone()),
                Value::Text(report.host.clone()),
                D::time(report.reported_at),
            ],
        );
        self.execute(insert).await?;
        Ok(())
    }

    pub(super) async fn abuse_report_rows(&self, limit: u32) -> StorageResult<Vec<AbuseReport>> {
        let query = statement(
            "SELECT code, host, reported_at FROM abuse_reports \
             ORDER BY reported_at DESC, id DESC LIMIT ?",
            [Value::Int(i64::from(limit))],
        );
        (self.rows(query).await?.iter())
            .map(|row| {
                Ok(AbuseReport {
                    code: D::read_text(row, "code")?,
                    host: D::read_text(row, "host")?,
                    reported_at: D::read_time(row, "reported_at")?,
                })
            })
            .collect()
    }
}

/// The statements that make `code`'s rows of `link_destination_hosts` the keys of `hosts`
/// (targets' URLs, [`host_key`]'d; each once).
pub(super) fn destination_hosts(code: &str, hosts: &[String]) -> Vec<Statement> {
    let mut keys: Vec<String> = hosts.iter().filter_map(|url| host_key(url)).collect();
    keys.sort();
    keys.dedup();
    let mut statements = vec![statement(
        "DELETE FROM link_destination_hosts WHERE code = ?",
        [Value::Text(code.to_owned())],
    )];
    statements.extend(keys.into_iter().map(|key| {
        statement(
            "INSERT INTO link_destination_hosts (host_key, code) VALUES (?, ?)",
            [Value::Text(key), Value::Text(code.to_owned())],
        )
    }));
    statements
}

/// `SELECT` of the quarantine of `code`.
pub(super) fn select_one(code: &str) -> Statement {
    statement(
        &format!("SELECT {COLUMNS} FROM link_quarantines WHERE code = ?"),
        [Value::Text(code.to_owned())],
    )
}

/// `DELETE` of the quarantine of `code`.
pub(super) fn delete(code: &str) -> Statement {
    statement(
        "DELETE FROM link_quarantines WHERE code = ?",
        [Value::Text(code.to_owned())],
    )
}

/// `INSERT` of `q` (after [`delete`]: one portable upsert).
pub(super) fn insert<D: Dialect>(q: &Quarantine) -> Statement {
    statement(
        &format!("INSERT INTO link_quarantines ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
        [
            Value::Text(q.code.clone()),
            Value::Int(q.workspace.get()),
            Value::Text(q.feed.clone()),
            Value::Text(q.entry.clone()),
            D::time(q.quarantined_at),
            D::opt_time(q.released_at),
            Value::OptText(q.released_by.clone()),
        ],
    )
}

pub(super) fn row<D: Dialect>(row: &Row<D>) -> StorageResult<Quarantine> {
    Ok(Quarantine {
        code: D::read_text(row, "code")?,
        workspace: WorkspaceId::from_db(D::DB::int(row, "workspace_id")?),
        feed: D::read_text(row, "feed")?,
        entry: D::read_text(row, "entry")?,
        quarantined_at: D::read_time(row, "quarantined_at")?,
        released_at: D::read_opt_time(row, "released_at")?,
        released_by: D::read_opt_text(row, "released_by")?,
    })
}

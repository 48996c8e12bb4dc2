//! `imported_links` (issue 40), the same statements on every backend: times are integers there.

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows;
use super::statement::{Statement, Value, IN_LIST};
use super::store::SqlStorage;
use crate::api::{Backend, StorageResult};
use crate::imported::ImportedLink;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

const COLUMNS: &str = "code, source, domain, source_target, title, source_visits, imported_at_ms";

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn imported_rows(&self, codes: &[String]) -> StorageResult<Vec<ImportedLink>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(IN_LIST) {
            let query = rows::in_list(
                &format!("SELECT {COLUMNS} FROM imported_links WHERE code IN"),
                part.iter().map(|code| Value::Text(code.clone())),
            );
            for row in self.rows(query).await? {
                found.push(read::<D>(&row)?);
            }
        }
        Ok(found)
    }

    /// Inserts the rows whose code has none yet (a concurrent or earlier run's record is the one
    /// kept), many per statement: a page of 1,000 links is ten statements, not 1,000 commits.
    pub(super) async fn insert_imported(&self, links: &[ImportedLink]) -> StorageResult<()> {
        // Each backend's "skip a row whose key is taken", without failing the statement.
        let (head, tail) = match D::BACKEND {
            Backend::Sqlite => ("INSERT OR IGNORE INTO", ""),
            Backend::Postgres => ("INSERT INTO", " ON CONFLICT (code) DO NOTHING"),
            Backend::Mysql => ("INSERT IGNORE INTO", ""),
        };
        for part in links.chunks(100) {
            let mut query = Statement::new(format!("{head} imported_links ({COLUMNS}) VALUES "));
            for (i, link) in part.iter().enumerate() {
                query.push(if i == 0 { "(" } else { ", (" });
                let values = [
                    Value::Text(link.code.clone()),
                    Value::Text(link.source.clone()),
                    Value::Text(link.domain.clone()),
                    Value::Text(link.source_target.clone()),
                    Value::OptText(link.title.clone()),
                    Value::Int(link.source_visits),
                    Value::Int(link.imported_at_ms),
                ];
                for (v, value) in values.into_iter().enumerate() {
                    if v > 0 {
                        query.push(", ");
                    }
                    query.bind(value);
                }
                query.push(")");
            }
            query.push(tail);
            self.execute(query).await?;
        }
        Ok(())
    }

    /// Raises `workspace`'s link's `visit_count` to at least `total` (never lowers it: visits counted since,
    /// or individual visits imported first, stay counted), so running it twice changes nothing.
    /// A link without a last visit gets `at`: its old visits happened before it (the source
    /// does not say when), so an idle-link expiry counts from the import, not from a creation
    /// years ago.
    pub(super) async fn raise_visit_count(
        &self,
        workspace: WorkspaceId,
        code: &str,
        total: i64,
        at: DateTime<Utc>,
    ) -> StorageResult<()> {
        let mut query = Statement::new("UPDATE links SET visit_count = ");
        query
            .bind(Value::Int(total))
            .push(", last_visit_at = COALESCE(last_visit_at, ")
            .bind(D::time(at))
            .push(") WHERE code = ")
            .bind(Value::Text(code.to_owned()))
            .push(" AND workspace_id = ")
            .bind(Value::Int(workspace.get()))
            .push(" AND visit_count < ")
            .bind(Value::Int(total));
        self.execute(query).await?;
        Ok(())
    }
}

fn read<D: Dialect>(row: &super::store::Row<D>) -> StorageResult<ImportedLink> {
    Ok(ImportedLink {
        code: D::read_text(row, "code")?,
        source: D::read_text(row, "source")?,
        domain: D::read_text(row, "domain")?,
        source_target: D::read_text(row, "source_target")?,
        title: D::read_opt_text(row, "title")?,
        source_visits: D::DB::int(row, "source_visits")?,
        imported_at_ms: D::DB::int(row, "imported_at_ms")?,
    })
}

//! `imported_links` (issue 40), the same statements on every backend: times are integers there.

use super::store::SqlStorage;
use super::{rows, statement, Dialect, Driver, Statement, Value, IN_LIST};
use crate::storage::api::StorageResult;
use crate::storage::imported::ImportedLink;

const COLUMNS: &str = "code, source, domain, source_target, title, source_visits, imported_at_ms";

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn imported_rows(&self, codes: &[String]) -> StorageResult<Vec<ImportedLink>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(IN_LIST) {
            let query = rows::in_list::<D>(
                &format!("SELECT {COLUMNS} FROM imported_links WHERE code IN"),
                part.iter().map(|code| Value::Text(code.clone())),
            );
            for row in self.rows(query).await? {
                found.push(read::<D>(&row)?);
            }
        }
        Ok(found)
    }

    pub(super) async fn imported_page(
        &self,
        source: &str,
        after: &str,
        limit: u32,
    ) -> StorageResult<Vec<ImportedLink>> {
        let query = statement(
            &format!(
                "SELECT {COLUMNS} FROM imported_links WHERE source = ? AND code > ? \
                 ORDER BY code LIMIT ?"
            ),
            [
                Value::Text(source.to_owned()),
                Value::Text(after.to_owned()),
                Value::Int(i64::from(limit)),
            ],
        );
        self.rows(query).await?.iter().map(read::<D>).collect()
    }

    /// Inserts each row unless its code has one already (a concurrent or earlier run's): the
    /// first record of a code is the one kept.
    pub(super) async fn insert_imported(&self, links: &[ImportedLink]) -> StorageResult<()> {
        for link in links {
            let query = statement(
                &format!("INSERT INTO imported_links ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                [
                    Value::Text(link.code.clone()),
                    Value::Text(link.source.clone()),
                    Value::Text(link.domain.clone()),
                    Value::Text(link.source_target.clone()),
                    Value::OptText(link.title.clone()),
                    Value::Int(link.source_visits),
                    Value::Int(link.imported_at_ms),
                ],
            );
            self.insert_unless_taken(query).await?;
        }
        Ok(())
    }

    /// Raises a link's `visit_count` to at least `total` (never lowers it: visits counted since,
    /// or individual visits imported first, stay counted), so running it twice changes nothing.
    pub(super) async fn raise_visit_count(&self, code: &str, total: i64) -> StorageResult<()> {
        let mut query = Statement::new("UPDATE links SET visit_count = ");
        query
            .bind(Value::Int(total))
            .push(" WHERE code = ")
            .bind(Value::Text(code.to_owned()))
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

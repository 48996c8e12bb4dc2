//! The A/B rollups of conversions (migration 20261126000053): what stored conversions add to
//! `ab_conversions` (count and distinct converting visitors per link, arm and name),
//! `ab_values` (minor units per currency) and `ab_converters` (the visitor set that keeps the
//! distinct count exact), written in the transaction that stores them. The name `""` holds every
//! name together (a name is never empty: `input.rs`), the rule `""` the link's own target.
//!
//! Results read these few rows per link instead of the raw conversions: counting a campaign's
//! million conversions and their distinct visitors from the rows took most of a second
//! (bench/results/conversions-2026-11-26.md).

use super::store::{db, Conversion};
use crate::store::{SqlVisitStore, VisitDialect};
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{Backend, StorageResult};
use sqlx::Database;
use std::collections::BTreeMap;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;
type Connection<V> = <Db<V> as Database>::Connection;

/// Rows per upsert statement (5 values each).
const ROWS: usize = 500;

/// The key of a rollup row of a conversion: (code, rule or "", name or "" for all).
type ArmKey = (String, String, String);

/// The two rows a conversion adds to: its name's and every name's.
fn keys(c: &Conversion) -> [ArmKey; 2] {
    let rule = c.rule.clone().unwrap_or_default();
    [
        (c.code.clone(), rule.clone(), c.name.clone()),
        (c.code.clone(), rule, String::new()),
    ]
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// Adds `stored` (inserted in this transaction, with their visitor) to the rollups.
    pub(super) async fn add_to_rollups(
        connection: &mut Connection<V>,
        stored: &[&Conversion],
    ) -> StorageResult<()> {
        if stored.is_empty() {
            return Ok(());
        }
        let mut counts: BTreeMap<ArmKey, (i64, i64)> = BTreeMap::new();
        let mut values: BTreeMap<(ArmKey, String, i64), i64> = BTreeMap::new();
        for c in stored {
            for key in keys(c) {
                if let Some((minor, currency, exponent)) = &c.value {
                    let at = (key.clone(), currency.clone(), i64::from(*exponent));
                    *values.entry(at).or_default() += minor;
                }
                counts.entry(key).or_default().0 += 1;
            }
        }
        for key in Self::new_converters(connection, stored).await? {
            if let Some(entry) = counts.get_mut(&key) {
                entry.1 += 1;
            }
        }
        let counts: Vec<Vec<Value>> = (counts.into_iter())
            .map(|((code, rule, name), (n, converting))| {
                let key = [code, rule, name].map(Value::Text);
                [key.to_vec(), vec![Value::Int(n), Value::Int(converting)]].concat()
            })
            .collect();
        Self::upsert(
            connection,
            "ab_conversions",
            &["code", "rule", "name"],
            &["conversions", "converting"],
            &counts,
        )
        .await?;
        let values: Vec<Vec<Value>> = (values.into_iter())
            .map(|(((code, rule, name), currency, exponent), total)| {
                let key = [code, rule, name, currency].map(Value::Text);
                [key.to_vec(), vec![Value::Int(exponent), Value::Int(total)]].concat()
            })
            .collect();
        Self::upsert(
            connection,
            "ab_values",
            &["code", "rule", "name", "currency", "exponent"],
            &["total"],
            &values,
        )
        .await
    }

    /// Adds the visitors of `stored` to `ab_converters` (under their name and under every
    /// name), answering the keys where a visitor was new. Concurrent writers of the same row:
    /// the second waits for the first and finds it there, so a visitor is counted once.
    async fn new_converters(
        connection: &mut Connection<V>,
        stored: &[&Conversion],
    ) -> StorageResult<Vec<ArmKey>> {
        let ids = vec!["?"; stored.len()].join(", ");
        let id = |c: &&Conversion| Value::Text(c.id.clone());
        if <V::Sql as Dialect>::BACKEND == Backend::Mysql {
            return Self::new_converters_counted(connection, stored, &ids).await;
        }
        let sql = format!(
            "INSERT INTO ab_converters (code, rule, name, visitor) \
             SELECT code, COALESCE(rule, '') AS rule, name, visitor FROM conversions \
             WHERE id IN ({ids}) \
             UNION SELECT code, COALESCE(rule, '') AS rule, '' AS name, visitor FROM conversions \
             WHERE id IN ({ids}) ORDER BY 1, 2, 3, 4 \
             ON CONFLICT DO NOTHING RETURNING code, rule, name"
        );
        let query = statement(&sql, stored.iter().map(id).chain(stored.iter().map(id)));
        let rows = Db::<V>::fetch_all(connection, query).await.map_err(db)?;
        (rows.iter())
            .map(|row| {
                let text = |column| V::Sql::read_text(row, column);
                Ok((text("code")?, text("rule")?, text("name")?))
            })
            .collect()
    }

    /// [`Self::new_converters`] on MariaDB/MySQL, which do not all have `RETURNING` (and
    /// MariaDB's answers no column names to a prepared statement): the rows inserted at once
    /// and counted; when the count is short (another writer or an earlier batch had some), undone
    /// and inserted one by one, each telling by its count whether it was new.
    async fn new_converters_counted(
        connection: &mut Connection<V>,
        stored: &[&Conversion],
        ids: &str,
    ) -> StorageResult<Vec<ArmKey>> {
        let read = statement(
            &format!(
                "SELECT code, COALESCE(rule, '') AS rule, name, HEX(visitor) AS visitor \
                 FROM conversions WHERE id IN ({ids})"
            ),
            stored.iter().map(|c| Value::Text(c.id.clone())),
        );
        let mut rows = std::collections::BTreeSet::new();
        for row in Db::<V>::fetch_all(connection, read).await.map_err(db)? {
            let text = |column| V::Sql::read_text(&row, column);
            let (code, rule, visitor) = (text("code")?, text("rule")?, text("visitor")?);
            for name in [text("name")?, String::new()] {
                rows.insert((code.clone(), rule.clone(), name, visitor.clone()));
            }
        }
        let rows: Vec<_> = rows.into_iter().collect();
        let insert = |rows: &[(String, String, String, String)]| {
            statement(
                &format!(
                    "INSERT IGNORE INTO ab_converters (code, rule, name, visitor) VALUES {}",
                    vec!["(?, ?, ?, UNHEX(?))"; rows.len()].join(", ")
                ),
                (rows.iter().cloned())
                    .flat_map(|(code, rule, name, visitor)| [code, rule, name, visitor])
                    .map(Value::Text),
            )
        };
        let run = |sql: &str| Statement::new(sql);
        Db::<V>::execute(connection, run("SAVEPOINT ab_converters"))
            .await
            .map_err(db)?;
        let mut new = Vec::with_capacity(rows.len());
        if Db::<V>::execute(connection, insert(&rows))
            .await
            .map_err(db)?
            == rows.len() as u64
        {
            new.extend(
                rows.into_iter()
                    .map(|(code, rule, name, _)| (code, rule, name)),
            );
        } else {
            Db::<V>::execute(connection, run("ROLLBACK TO SAVEPOINT ab_converters"))
                .await
                .map_err(db)?;
            for row in rows {
                if Db::<V>::execute(connection, insert(std::slice::from_ref(&row)))
                    .await
                    .map_err(db)?
                    == 1
                {
                    new.push((row.0, row.1, row.2));
                }
            }
        }
        Db::<V>::execute(connection, run("RELEASE SAVEPOINT ab_converters"))
            .await
            .map_err(db)?;
        Ok(new)
    }

    /// Adds `rows` (keys, then counters) to `table`'s counters, in the order given.
    async fn upsert(
        connection: &mut Connection<V>,
        table: &str,
        keys: &[&str],
        counters: &[&str],
        rows: &[Vec<Value>],
    ) -> StorageResult<()> {
        let columns = [keys, counters].concat();
        let group = format!("({})", vec!["?"; columns.len()].join(", "));
        let conflict = match <V::Sql as Dialect>::BACKEND {
            Backend::Postgres | Backend::Sqlite => {
                // PostgreSQL wants the table's column named as such; SQLite takes it bare.
                let old = |c: &str| match <V::Sql as Dialect>::BACKEND {
                    Backend::Postgres => format!("{table}.{c}"),
                    _ => c.to_owned(),
                };
                let add: Vec<String> = (counters.iter())
                    .map(|c| format!("{c} = {} + excluded.{c}", old(c)))
                    .collect();
                format!(
                    "ON CONFLICT ({}) DO UPDATE SET {}",
                    keys.join(", "),
                    add.join(", ")
                )
            }
            Backend::Mysql => {
                let add: Vec<String> = (counters.iter())
                    .map(|c| format!("{c} = {c} + VALUES({c})"))
                    .collect();
                format!("ON DUPLICATE KEY UPDATE {}", add.join(", "))
            }
        };
        for chunk in rows.chunks(ROWS) {
            let sql = format!(
                "INSERT INTO {table} ({}) VALUES {} {conflict}",
                columns.join(", "),
                vec![group.as_str(); chunk.len()].join(", ")
            );
            let query: Statement = statement(&sql, chunk.iter().flatten().cloned());
            Db::<V>::execute(connection, query).await.map_err(db)?;
        }
        Ok(())
    }
}

//! The A/B rollups of conversions (migration 20261126000053): what stored conversions add to
//! `ab_conversions` (count and distinct converting visitors per link, arm and name),
//! `ab_values` (minor units per currency) and `ab_converters` (the visitor set that keeps the
//! distinct counts exact), written in the transaction that stores them. The name `""` holds every
//! name together (a name is never empty: `input.rs`), the rule `""` the link's own target.
//!
//! `ab_converters` on PostgreSQL (migration 20261126000059) is one row per converting visitor of
//! an arm, with the names they converted under: a conversion writes one row (or adds its name to
//! the row), where SQLite and MariaDB write two (its name's and every name's).
//!
//! Results read these few rows per link instead of the raw conversions: counting a campaign's
//! million conversions and their distinct visitors from the rows took most of a second
//! (bench/results/conversions-2026-11-26.md).

use super::arrays::text_array;
use crate::sql::db;
use crate::{SqlVisitStore, VisitDialect};
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{Backend, StorageResult};
use shortlink_visits::conversions::Conversion;
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

/// A row of `ab_converters` as written: (code, rule, name, visitor as hex) on SQLite and
/// MariaDB, (code, rule, visitor as hex, name) on PostgreSQL.
type Row4 = (String, String, String, String);

/// `INSERT {ignore}INTO ab_converters ... VALUES ...{tail}` of `rows`, the visitor from hex.
fn insert_converters<V: VisitDialect>(rows: &[Row4], ignore: &str, tail: &str) -> Statement {
    let unhex = match <V::Sql as Dialect>::BACKEND {
        Backend::Postgres => "decode(?, 'hex')",
        Backend::Sqlite => "unhex(?)",
        Backend::Mysql => "UNHEX(?)",
    };
    let group = format!("(?, ?, ?, {unhex})");
    statement(
        &format!(
            "INSERT {ignore}INTO ab_converters (code, rule, name, visitor) VALUES {}{tail}",
            vec![group.as_str(); rows.len()].join(", ")
        ),
        (rows.iter().cloned())
            .flat_map(|(code, rule, name, visitor)| [code, rule, name, visitor])
            .map(Value::Text),
    )
}

/// The converter rows of PostgreSQL, one per (code, rule, visitor) with the names converted
/// under: `rows` (code, rule, visitor as hex, name) inserted, or their name added to the row
/// already there. What comes back is each row that changed, with the name it gained last and how
/// many it has now (1: the visitor is new to the arm). A visitor's row is locked by the insert or
/// the update until commit, so a concurrent writer of the same visitor (another name, or the
/// same) waits and then sees it: counted once, as by the unique key of two rows before.
/// Each column one array literal: one statement of a fixed shape, whatever the rows.
fn converters_by_visitor(rows: &[Row4]) -> Statement {
    let column = |at: fn(&Row4) -> &str| Value::Text(text_array(rows.iter().map(|r| Some(at(r)))));
    statement(
        "INSERT INTO ab_converters AS c (code, rule, visitor, names) \
         SELECT u.code, u.rule, decode(u.visitor, 'hex'), ARRAY[u.name] \
         FROM UNNEST(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), \
           CAST(? AS text[])) AS u (code, rule, visitor, name) \
         ON CONFLICT (code, rule, visitor) DO UPDATE SET names = c.names || excluded.names \
           WHERE NOT (excluded.names[1] = ANY (c.names)) \
         RETURNING c.code, c.rule, c.names[cardinality(c.names)] AS name, \
           CAST(cardinality(c.names) AS BIGINT) AS held",
        [
            column(|r| r.0.as_str()),
            column(|r| r.1.as_str()),
            column(|r| r.2.as_str()),
            column(|r| r.3.as_str()),
        ],
    )
}

/// The visitor column as hex text, as [`SqlVisitStore::add_to_rollups`] takes it.
pub(super) fn visitor_hex<V: VisitDialect>() -> &'static str {
    match <V::Sql as Dialect>::BACKEND {
        Backend::Postgres => "encode(visitor, 'hex')",
        Backend::Sqlite => "hex(visitor)",
        Backend::Mysql => "HEX(visitor)",
    }
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// Adds `stored` (inserted in this transaction), each with its visitor as hex, to the
    /// rollups.
    pub(super) async fn add_to_rollups(
        connection: &mut Connection<V>,
        stored: &[(&Conversion, &str)],
    ) -> StorageResult<()> {
        if stored.is_empty() {
            return Ok(());
        }
        let mut counts: BTreeMap<ArmKey, (i64, i64)> = BTreeMap::new();
        let mut values: BTreeMap<(ArmKey, String, i64), i64> = BTreeMap::new();
        for (c, _) in stored {
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

    /// Adds the visitors of `stored` to `ab_converters` (on SQLite and MariaDB a row under
    /// their name and one under every name; on PostgreSQL one row per visitor,
    /// [`Self::new_converters_by_visitor`]), answering the keys where a visitor was new.
    /// Concurrent writers of the same row: the second waits for the first and finds it there, so
    /// a visitor is counted once.
    ///
    /// The rows are given as values, not read back from `conversions` by id: PostgreSQL planned
    /// that read as a scan of the table (118 ms per 1,000 at 100,000 conversions).
    async fn new_converters(
        connection: &mut Connection<V>,
        stored: &[(&Conversion, &str)],
    ) -> StorageResult<Vec<ArmKey>> {
        if <V::Sql as Dialect>::BACKEND == Backend::Postgres {
            return Self::new_converters_by_visitor(connection, stored).await;
        }
        let mut rows = std::collections::BTreeSet::new();
        for (c, visitor) in stored {
            for (code, rule, name) in keys(c) {
                rows.insert((code, rule, name, visitor.to_string()));
            }
        }
        let rows: Vec<Row4> = rows.into_iter().collect();
        if <V::Sql as Dialect>::BACKEND == Backend::Mysql {
            return Self::new_converters_counted(connection, rows).await;
        }
        let mut new = Vec::with_capacity(rows.len());
        let queries = (rows.chunks(ROWS)).map(|chunk| {
            insert_converters::<V>(
                chunk,
                "",
                " ON CONFLICT DO NOTHING RETURNING code, rule, name",
            )
        });
        for query in queries {
            for row in Db::<V>::fetch_all(connection, query).await.map_err(db)? {
                let text = |column| V::Sql::read_text(&row, column);
                new.push((text("code")?, text("rule")?, text("name")?));
            }
        }
        Ok(new)
    }

    /// [`Self::new_converters`] on PostgreSQL, one row per visitor of an arm
    /// ([`converters_by_visitor`]): a visitor new to the arm is new to every name and to the
    /// name converted under; one already there is new to a name the row did not have. A statement
    /// may change a row once, so a visitor with several new names in `stored` gets them over as
    /// many statements (rare: two conversions of one person with different names in one batch).
    ///
    /// Measured on 1,000-conversion batches (bench/results/conversions-2026-11-26.md, run 5):
    /// 7.6-8.5 µs of PostgreSQL CPU per conversion against 15.6-16.0 µs for two rows.
    async fn new_converters_by_visitor(
        connection: &mut Connection<V>,
        stored: &[(&Conversion, &str)],
    ) -> StorageResult<Vec<ArmKey>> {
        let mut names: BTreeMap<(String, String, String), std::collections::BTreeSet<String>> =
            BTreeMap::new();
        for (c, visitor) in stored {
            let rule = c.rule.clone().unwrap_or_default();
            (names
                .entry((c.code.clone(), rule, visitor.to_string()))
                .or_default())
            .insert(c.name.clone());
        }
        let mut new = Vec::with_capacity(stored.len() * 2);
        for round in 0.. {
            // In key order, so that two writers lock shared visitors' rows in the same order.
            let rows: Vec<Row4> = (names.iter())
                .filter_map(|((code, rule, visitor), of)| {
                    let name = of.iter().nth(round)?;
                    Some((code.clone(), rule.clone(), visitor.clone(), name.clone()))
                })
                .collect();
            if rows.is_empty() {
                break;
            }
            let query = converters_by_visitor(&rows);
            for row in Db::<V>::fetch_all(connection, query).await.map_err(db)? {
                let text = |column| V::Sql::read_text(&row, column);
                let (code, rule) = (text("code")?, text("rule")?);
                if Db::<V>::int(&row, "held").map_err(db)? == 1 {
                    new.push((code.clone(), rule.clone(), String::new()));
                }
                new.push((code, rule, text("name")?));
            }
        }
        Ok(new)
    }

    /// [`Self::new_converters`] on MariaDB/MySQL, which do not all have `RETURNING` (and
    /// MariaDB's answers no column names to a prepared statement): the rows inserted at once
    /// and counted; when the count is short (another writer or an earlier batch had some), undone
    /// and inserted one by one, each telling by its count whether it was new.
    async fn new_converters_counted(
        connection: &mut Connection<V>,
        rows: Vec<Row4>,
    ) -> StorageResult<Vec<ArmKey>> {
        let run = |sql: &str| Statement::new(sql);
        let mut new = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(ROWS) {
            Db::<V>::execute(connection, run("SAVEPOINT ab_converters"))
                .await
                .map_err(db)?;
            let all = insert_converters::<V>(chunk, "IGNORE ", "");
            if Db::<V>::execute(connection, all).await.map_err(db)? == chunk.len() as u64 {
                new.extend(
                    chunk
                        .iter()
                        .map(|(code, rule, name, _)| (code.clone(), rule.clone(), name.clone())),
                );
            } else {
                Db::<V>::execute(connection, run("ROLLBACK TO SAVEPOINT ab_converters"))
                    .await
                    .map_err(db)?;
                for row in chunk {
                    let one = insert_converters::<V>(std::slice::from_ref(row), "IGNORE ", "");
                    if Db::<V>::execute(connection, one).await.map_err(db)? == 1 {
                        new.push((row.0.clone(), row.1.clone(), row.2.clone()));
                    }
                }
            }
            Db::<V>::execute(connection, run("RELEASE SAVEPOINT ab_converters"))
                .await
                .map_err(db)?;
        }
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

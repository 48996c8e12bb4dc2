//! Many conversions at once (an NDJSON batch): the repeats and the clicks read with one query
//! per thousand, the new ones inserted with one multi-row insert and one feed row per thousand,
//! in one transaction (the visitor read as hex with the click and written back as bytes, so the
//! insert reads nothing). On PostgreSQL the insert is one `INSERT ... SELECT ... FROM UNNEST` of
//! array literals (a fixed statement whatever the rows), and the clicks are read within the
//! attribution window's days. What a batch answers is what recording each alone would answer;
//! when the fast way cannot say so (a concurrent request took one of the event ids) that chunk
//! is recorded one by one instead.
//!
//! Measured (bench/conversions): an `INSERT ... SELECT ... UNION ALL` of 400 parts copying the
//! visitor from `visits` stored 2,500 conversions/s on PostgreSQL; planning 400 subqueries per
//! statement was most of it.

use super::arrays::{int_array, text_array};
use super::store::{at_ms, ms, new_id, COLUMNS};
use crate::sql::db;
use crate::{SqlVisitStore, VisitDialect};
use chrono::{DateTime, Duration, Utc};
use futures_util::future::try_join_all;
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{Backend, StorageError, StorageResult};
use shortlink_visits::conversions::input::{Click, NewConversion, Refusal};
use shortlink_visits::conversions::{Conversion, ConversionStore, Recorded};
use std::collections::{HashMap, HashSet};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// Rows per statement: 19 values each, within every backend's bound on parameters (SQLite's
/// 32,766).
const CHUNK: usize = 1000;

/// Chunks of a batch stored at once (when no event id repeats in it): two keep PostgreSQL
/// busy while the sidecar builds and reads the other's statements.
const PARALLEL: usize = 2;

/// A click as a batch reads it: what a conversion copies from the visit and its link (the
/// visitor is copied by the insert itself).
#[derive(Debug, Clone)]
struct BatchClick {
    visited_at: DateTime<Utc>,
    /// The visit's visitor hash, as hex.
    visitor: String,
    code: String,
    rule: Option<String>,
    short_domain: Option<String>,
    device: Option<String>,
    country: Option<String>,
    campaign: Option<String>,
    recipient_ref: Option<String>,
}

fn in_list(n: usize) -> String {
    vec!["?"; n].join(", ")
}

impl<V: VisitDialect> SqlVisitStore<V> {
    pub(super) async fn record_many(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
        window: Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        let mut seen = HashSet::with_capacity(news.len());
        if <V::Sql as Dialect>::BACKEND == Backend::Postgres
            && news.iter().all(|n| seen.insert(n.event_id.as_str()))
        {
            // No event id twice: the chunks are independent, so `PARALLEL` of them are stored
            // at once, each in its own transaction on its own connection, and the database
            // works on one while the sidecar prepares or answers another. Answered in order;
            // the feed has them in commit order, as concurrent requests' conversions. Their
            // rollup rows are written in key order, so two never wait on each other in a
            // circle. (SQLite writes one transaction at a time; MariaDB keeps the order.)
            let chunks: Vec<&[NewConversion]> = news.chunks(CHUNK).collect();
            let mut answers = Vec::with_capacity(news.len());
            for group in chunks.chunks(PARALLEL) {
                let mut maps: Vec<HashMap<String, Conversion>> =
                    group.iter().map(|_| HashMap::new()).collect();
                let mut pending = Vec::with_capacity(group.len());
                for (chunk, stored) in group.iter().zip(maps.iter_mut()) {
                    pending.push(self.record_chunk(workspace, chunk, window, now, stored));
                }
                answers.extend(try_join_all(pending).await?.into_iter().flatten());
            }
            return Ok(answers);
        }
        // A repeat answers the line before it with the same id: the chunks in order, each
        // knowing what the ones before stored.
        let mut answers = Vec::with_capacity(news.len());
        let mut stored: HashMap<String, Conversion> = HashMap::new();
        for chunk in news.chunks(CHUNK) {
            answers.extend(
                self.record_chunk(workspace, chunk, window, now, &mut stored)
                    .await?,
            );
        }
        Ok(answers)
    }

    async fn record_chunk(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
        window: Duration,
        now: DateTime<Utc>,
        stored: &mut HashMap<String, Conversion>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        let existing = self.existing(workspace, news).await?;
        let clicks = self.batch_clicks(workspace, news, window).await?;
        let mut answers: Vec<Option<Result<Recorded, Refusal>>> = vec![None; news.len()];
        let mut fresh: Vec<(usize, Conversion, String)> = Vec::new();
        // Event ids of `fresh`, to their place in it.
        let mut fresh_ids: HashMap<&str, usize> = HashMap::new();
        for (i, new) in news.iter().enumerate() {
            let repeat = (existing.get(&new.event_id))
                .or_else(|| stored.get(&new.event_id))
                .or_else(|| (fresh_ids.get(new.event_id.as_str())).map(|&k| &fresh[k].1));
            if let Some(first) = repeat {
                answers[i] = Some(Ok(Recorded {
                    conversion: first.clone(),
                    duplicate: true,
                }));
                continue;
            }
            let click = match &new.click {
                Click::Id(id) => clicks.get(id).cloned(),
                // A per-recipient link's latest visit: rare in bulk, recorded alone.
                Click::Recipient { .. } => None,
            };
            let Some((click_id, click)) = click.map(|c| (new_click_id(new), c)) else {
                if matches!(new.click, Click::Recipient { .. }) {
                    answers[i] = Some(self.record(workspace, new, window, now).await?);
                } else {
                    answers[i] = Some(Err(Refusal::UnknownClick));
                }
                continue;
            };
            if new.converted_at < click.visited_at {
                answers[i] = Some(Err(Refusal::BeforeClick));
                continue;
            }
            if new.converted_at > click.visited_at + window {
                answers[i] = Some(Err(Refusal::OutsideWindow));
                continue;
            }
            let visitor = click.visitor.clone();
            fresh_ids.insert(new.event_id.as_str(), fresh.len());
            fresh.push((i, conversion(workspace, new, click_id, click)?, visitor));
        }
        if !fresh.is_empty() && !self.insert_fresh(news, &fresh, now).await? {
            // Not all of them went in as read: each alone, which says why.
            for (i, _, _) in &fresh {
                answers[*i] = Some(self.record(workspace, &news[*i], window, now).await?);
            }
        } else {
            for (i, conversion, _) in fresh {
                stored.insert(conversion.event_id.clone(), conversion.clone());
                answers[i] = Some(Ok(Recorded {
                    conversion,
                    duplicate: false,
                }));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.expect("every line answered"))
            .collect())
    }

    /// The conversions already stored under the chunk's event ids.
    async fn existing(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
    ) -> StorageResult<HashMap<String, Conversion>> {
        let event_ids = news.iter().map(|n| Value::Text(n.event_id.clone()));
        let query = match <V::Sql as Dialect>::BACKEND {
            // One probe of `conversions_event` per id, whatever PostgreSQL knows of the table.
            // `workspace_id = ? AND event_id IN (...)` was planned on `conversions_code` (also led
            // by `workspace_id`) while the table had no statistics, comparing every row of the
            // workspace with the list; with the list as parameters (a generic plan) that took
            // 2.1 s per 1,000 ids at 100,000 rows (bench/results/conversions-2026-11-26.md).
            // The LIMIT keeps PostgreSQL from flattening the lateral into a hash join.
            Backend::Postgres => statement(
                &format!(
                    "SELECT c.* FROM (VALUES {}) AS k (event_id) CROSS JOIN LATERAL \
                     (SELECT {COLUMNS} FROM conversions \
                      WHERE workspace_id = ? AND event_id = k.event_id LIMIT 1) AS c",
                    vec!["(?)"; news.len()].join(", ")
                ),
                event_ids.chain([Value::Int(workspace.get())]),
            ),
            // MariaDB has no LATERAL; it and SQLite probe the unique index for each id of the
            // list.
            Backend::Sqlite | Backend::Mysql => statement(
                &format!(
                    "SELECT {COLUMNS} FROM conversions WHERE workspace_id = ? AND event_id IN ({})",
                    in_list(news.len())
                ),
                std::iter::once(Value::Int(workspace.get())).chain(event_ids),
            ),
        };
        let rows = self.all(&self.writer, query).await?;
        (rows.iter())
            .map(|row| Self::conversion(row).map(|c| (c.event_id.clone(), c)))
            .collect()
    }

    /// The chunk's clicks named by id, in the workspace.
    async fn batch_clicks(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
        window: Duration,
    ) -> StorageResult<HashMap<String, BatchClick>> {
        let ids: Vec<&str> = (news.iter())
            .filter_map(|n| match &n.click {
                Click::Id(id) => Some(id.as_str()),
                Click::Recipient { .. } => None,
            })
            .collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut visits = Vec::with_capacity(ids.len());
        if <V::Sql as Dialect>::BACKEND == Backend::Postgres {
            // Visits are partitioned by day there and the id is not the partition key: by id
            // alone, every day's index is probed for each id (9 partitions in the bench: 22 µs
            // of PostgreSQL CPU per conversion, bench/results/conversions-2026-11-26.md). A
            // click that can be attributed lies within the window before its conversion, so
            // the read names those days; the rest (refusals: before the click, outside the
            // window, unknown) are read by id alone below, so each is refused as before.
            let times = || {
                (news.iter())
                    .filter(|n| matches!(n.click, Click::Id(_)))
                    .map(|n| n.converted_at)
            };
            if let (Some(first), Some(last)) = (times().min(), times().max()) {
                let mut query = Self::visits_by_id(&ids);
                query
                    .push(" AND v.visited_at >= ")
                    .bind(V::visit_time(first - window))
                    .push(" AND v.visited_at <= ")
                    .bind(V::visit_time(last));
                visits = self.all(&self.reader, query).await?;
            }
        }
        if visits.len() < ids.len() {
            let found: std::collections::HashSet<String> = (visits.iter())
                .map(|row| V::Sql::read_text(row, "event_id"))
                .collect::<StorageResult<_>>()?;
            let missing: Vec<&str> = (ids.iter().copied())
                .filter(|id| !found.contains(*id))
                .collect();
            if !missing.is_empty() {
                visits.extend(self.all(&self.reader, Self::visits_by_id(&missing)).await?);
            }
        }
        let codes: std::collections::BTreeSet<String> = (visits.iter())
            .map(|row| V::Sql::read_text(row, "code"))
            .collect::<StorageResult<_>>()?;
        let mut links: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
        if !codes.is_empty() {
            let query = statement(
                &format!(
                    "SELECT code, campaign, recipient_ref FROM links \
                     WHERE workspace_id = ? AND code IN ({})",
                    in_list(codes.len())
                ),
                std::iter::once(Value::Int(workspace.get()))
                    .chain(codes.iter().cloned().map(Value::Text)),
            );
            for row in self.all(&self.reader, query).await? {
                links.insert(
                    V::Sql::read_text(&row, "code")?,
                    (
                        V::Sql::read_opt_text(&row, "campaign")?,
                        V::Sql::read_opt_text(&row, "recipient_ref")?,
                    ),
                );
            }
        }
        let mut clicks = HashMap::new();
        for row in &visits {
            let code = V::Sql::read_text(row, "code")?;
            // Another workspace's click (or one of a link no longer stored) is no click here.
            let Some((campaign, recipient_ref)) = links.get(&code).cloned() else {
                continue;
            };
            let opt = |c| V::Sql::read_opt_text(row, c);
            clicks.insert(
                V::Sql::read_text(row, "event_id")?,
                BatchClick {
                    visited_at: V::read_visit_time(row, "visited_at")?,
                    visitor: V::Sql::read_text(row, "visitor_hex")?,
                    code,
                    rule: opt("rule")?,
                    short_domain: opt("short_domain")?,
                    device: opt("device")?,
                    country: opt("country")?,
                    campaign,
                    recipient_ref,
                },
            );
        }
        Ok(clicks)
    }

    /// The visits of `ids` by primary key (their links are read apart, by code: two plans that
    /// cannot go wrong. Joined in SQL, PostgreSQL may start from the workspace's links and read
    /// every visit of them by `visits (code, visited_at)`: 2,650 conversions/s at a million
    /// visits.)
    fn visits_by_id(ids: &[&str]) -> Statement {
        statement(
            &format!(
                "SELECT v.event_id, v.visited_at, v.code, v.rule, v.short_domain, v.device, \
                 v.country, {} AS visitor_hex FROM visits v WHERE v.event_id IN ({})",
                hex::<V>(),
                in_list(ids.len())
            ),
            ids.iter().map(|id| Value::Text((*id).to_owned())),
        )
    }

    /// Inserts `fresh` and their feed row in one transaction. `false`, with nothing written,
    /// when a concurrent request stored one of the event ids first.
    async fn insert_fresh(
        &self,
        news: &[NewConversion],
        fresh: &[(usize, Conversion, String)],
        now: DateTime<Utc>,
    ) -> StorageResult<bool> {
        let insert = match <V::Sql as Dialect>::BACKEND {
            Backend::Postgres => insert_unnest(news, fresh, now),
            Backend::Sqlite | Backend::Mysql => insert_values::<V>(news, fresh, now),
        };
        let mut tx = self.writer.begin().await.map_err(db)?;
        match Db::<V>::execute(&mut *tx, insert).await.map_err(db) {
            Ok(_) => {}
            Err(StorageError::Conflict) => return Ok(false),
            Err(error) => return Err(error),
        }
        let stored: Vec<(&Conversion, &str)> =
            fresh.iter().map(|(_, c, v)| (c, v.as_str())).collect();
        Self::add_to_rollups(&mut *tx, &stored).await?;
        let ids: Vec<&str> = fresh.iter().map(|(_, c, _)| c.id.as_str()).collect();
        crate::feed::append_ids::<V::Sql>(&mut *tx, &ids, None).await?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }
}

/// The multi-row `INSERT ... VALUES` of `fresh` (19 values a row).
fn insert_values<V: VisitDialect>(
    news: &[NewConversion],
    fresh: &[(usize, Conversion, String)],
    now: DateTime<Utc>,
) -> Statement {
    let mut insert = Statement::new(
        "INSERT INTO conversions (id, workspace_id, event_id, visit_id, code, campaign, \
               recipient_ref, rule, short_domain, device, country, visitor, clicked_ms, name, \
               value_minor, currency, exponent, converted_ms, received_ms) VALUES ",
    );
    for (n, (i, c, visitor)) in fresh.iter().enumerate() {
        let money = news[*i].money;
        insert.push(if n == 0 { "(" } else { ", (" });
        let values = [
            Value::Text(c.id.clone()),
            Value::Int(c.workspace.get()),
            Value::Text(c.event_id.clone()),
            Value::Text(c.click_id.clone()),
            Value::Text(c.code.clone()),
            Value::OptText(c.campaign.clone()),
            Value::OptText(c.recipient_ref.clone()),
            Value::OptText(c.rule.clone()),
            Value::OptText(c.short_domain.clone()),
            Value::OptText(c.device.clone()),
            Value::OptText(c.country.clone()),
        ];
        for value in values {
            insert.bind(value).push(", ");
        }
        insert.push(unhex::<V>().0);
        insert
            .bind(Value::Text(visitor.clone()))
            .push(unhex::<V>().1);
        let values = [
            ms(c.clicked_at),
            Value::Text(c.name.clone()),
            Value::OptInt(money.map(|m| m.minor)),
            Value::OptText(money.map(|m| m.currency.to_owned())),
            Value::OptInt(money.map(|m| i64::from(m.exponent))),
            ms(c.converted_at),
        ];
        for value in values {
            insert.push(", ").bind(value);
        }
        insert.push(", ").bind(ms(now)).push(")");
    }
    insert
}

/// [`insert_values`] on PostgreSQL: one statement of a fixed shape, each column one array
/// literal ([`super::arrays`]). Measured on the bench's 1,000-row statements, the `VALUES` form
/// spent 30 µs of PostgreSQL CPU per conversion, a quarter of it binding and parsing 19,000
/// values.
fn insert_unnest(
    news: &[NewConversion],
    fresh: &[(usize, Conversion, String)],
    now: DateTime<Utc>,
) -> Statement {
    let conversions = || fresh.iter().map(|(_, c, _)| c);
    let money = || fresh.iter().map(|(i, _, _)| news[*i].money);
    let text = |column: fn(&Conversion) -> Option<&str>| {
        Value::Text(text_array(conversions().map(column)))
    };
    let workspace = fresh.first().map_or(0, |(_, c, _)| c.workspace.get());
    let columns = [
        text(|c| Some(c.id.as_str())),
        text(|c| Some(c.event_id.as_str())),
        text(|c| Some(c.click_id.as_str())),
        text(|c| Some(c.code.as_str())),
        text(|c| c.campaign.as_deref()),
        text(|c| c.recipient_ref.as_deref()),
        text(|c| c.rule.as_deref()),
        text(|c| c.short_domain.as_deref()),
        text(|c| c.device.as_deref()),
        text(|c| c.country.as_deref()),
        Value::Text(text_array(fresh.iter().map(|(_, _, v)| Some(v.as_str())))),
        Value::Text(int_array(
            conversions().map(|c| Some(c.clicked_at.timestamp_millis())),
        )),
        text(|c| Some(c.name.as_str())),
        Value::Text(int_array(money().map(|m| m.map(|m| m.minor)))),
        Value::Text(text_array(money().map(|m| m.map(|m| m.currency)))),
        Value::Text(int_array(money().map(|m| m.map(|m| i64::from(m.exponent))))),
        Value::Text(int_array(
            conversions().map(|c| Some(c.converted_at.timestamp_millis())),
        )),
    ];
    statement(
        "INSERT INTO conversions (id, workspace_id, event_id, visit_id, code, campaign, \
           recipient_ref, rule, short_domain, device, country, visitor, clicked_ms, name, \
           value_minor, currency, exponent, converted_ms, received_ms) \
         SELECT u.id, ?, u.event_id, u.visit_id, u.code, u.campaign, u.recipient_ref, u.rule, \
           u.short_domain, u.device, u.country, decode(u.visitor, 'hex'), u.clicked_ms, u.name, \
           u.value_minor, u.currency, u.exponent, u.converted_ms, ? \
         FROM UNNEST(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), \
           CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), \
           CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), \
           CAST(? AS bigint[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS text[]), \
           CAST(? AS bigint[]), CAST(? AS bigint[])) \
         AS u (id, event_id, visit_id, code, campaign, recipient_ref, rule, short_domain, \
           device, country, visitor, clicked_ms, name, value_minor, currency, exponent, \
           converted_ms)",
        [Value::Int(workspace), ms(now)].into_iter().chain(columns),
    )
}

/// The visitor hash as hex text, and back: each backend's functions.
fn hex<V: VisitDialect>() -> &'static str {
    match <V::Sql as Dialect>::BACKEND {
        Backend::Postgres => "encode(v.visitor, 'hex')",
        Backend::Sqlite => "hex(v.visitor)",
        Backend::Mysql => "HEX(v.visitor)",
    }
}

fn unhex<V: VisitDialect>() -> (&'static str, &'static str) {
    match <V::Sql as Dialect>::BACKEND {
        Backend::Postgres => ("decode(", ", 'hex')"),
        Backend::Sqlite => ("unhex(", ")"),
        Backend::Mysql => ("UNHEX(", ")"),
    }
}

fn new_click_id(new: &NewConversion) -> String {
    match &new.click {
        Click::Id(id) => id.clone(),
        Click::Recipient { .. } => String::new(),
    }
}

/// The conversion as the insert will store it (times to the millisecond, as stored).
fn conversion(
    workspace: WorkspaceId,
    new: &NewConversion,
    click_id: String,
    click: BatchClick,
) -> StorageResult<Conversion> {
    Ok(Conversion {
        id: new_id()?,
        workspace,
        event_id: new.event_id.clone(),
        click_id,
        code: click.code,
        campaign: click.campaign,
        recipient_ref: click.recipient_ref,
        rule: click.rule,
        short_domain: click.short_domain,
        device: click.device,
        country: click.country,
        clicked_at: at_ms(click.visited_at.timestamp_millis()),
        name: new.name.clone(),
        value: new
            .money
            .map(|m| (m.minor, m.currency.to_owned(), m.exponent)),
        converted_at: at_ms(new.converted_at.timestamp_millis()),
    })
}

//! What the backends' batch writes share: which visits of a batch are distinct, whose first visit
//! each new (link, visitor) pair is, the rollup rows as values, and, for the backends that write
//! multi-row `VALUES` statements (SQLite, MariaDB/MySQL), chunking, placeholders, the binds of one
//! visit and the rollup upserts. PostgreSQL writes arrays instead ([`super::postgres`]).

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_visits::rollup::{Audiences, Deltas};
use shortlink_visits::store::BatchOutcome;
use sqlx::{Database, Encode, Type};

/// The visits of a batch with each event id once: an id twice in one batch is stored and counted
/// once.
pub(crate) fn distinct(visits: &[Visit]) -> Vec<&Visit> {
    let mut seen = HashSet::with_capacity(visits.len());
    visits
        .iter()
        .filter(|v| seen.insert(v.event_id.as_str()))
        .collect()
}

/// Each human visitor's first visit among `inserted`, as (code, visitor bytes, Unix ms), in key
/// order (so concurrent writers take the rows' locks in the same order).
pub(crate) fn first_seen<'v>(inserted: &[&'v Visit]) -> Vec<(&'v str, &'v [u8; 16], i64)> {
    let mut pairs: Vec<_> = first_of(inserted, |v| v.time_ms)
        .into_iter()
        .map(|((code, visitor), at)| (code, visitor, at))
        .collect();
    pairs.sort();
    pairs
}

/// The rule ("" for the own target) of each human visitor's first visit among `inserted`, the
/// visit [`first_seen`] names: the A/B arm a new visitor counts in.
pub(crate) fn first_rules<'v>(inserted: &[&'v Visit]) -> HashMap<(&'v str, &'v [u8; 16]), &'v str> {
    first_of(inserted, |v| v.rule.as_deref().unwrap_or_default())
}

/// `what` of each human visitor's first visit among `inserted`, by (code, visitor).
fn first_of<'v, T>(
    inserted: &[&'v Visit],
    what: impl Fn(&'v Visit) -> T,
) -> HashMap<(&'v str, &'v [u8; 16]), T> {
    let mut first = HashMap::new();
    let humans = inserted
        .iter()
        .filter(|v| v.agent.audience == Audience::Human);
    for &v in humans {
        first
            .entry((v.code.as_str(), &v.visitor))
            .or_insert_with(|| what(v));
    }
    first
}

/// The user agents of `inserted`, each once as (id, string), in id order (so concurrent writers
/// take the rows' locks in the same order): the `user_agents` rows the batch's visits refer to.
/// Inserted with every batch, not remembered as stored: a batch repeats a few hundred agents at
/// most, each a lookup of one small-table key, and a rolled-back transaction cannot leave a
/// remembered row that is not there.
pub(crate) fn user_agents<'v>(inserted: &[&'v Visit]) -> Vec<(i64, &'v str)> {
    let mut agents: HashMap<i64, &str> = HashMap::new();
    for v in inserted {
        if let (Some(id), Some(agent)) = (v.user_agent_id, v.user_agent.as_deref()) {
            agents.entry(id).or_insert(agent);
        }
    }
    let mut agents: Vec<_> = agents.into_iter().collect();
    agents.sort_unstable();
    agents
}

pub(crate) fn outcome(batch: usize, inserted: usize) -> BatchOutcome {
    BatchOutcome {
        inserted: inserted as u64,
        duplicates: (batch - inserted) as u64,
        unowned: 0,
        reclassified: 0,
    }
}

/// `rows` cut into statements of at most `max` rows (a power of two), the rest into powers of
/// two, each halved until its `size` fits `budget` bytes: every statement then has one of a few
/// shapes, which the connection's statement cache keeps prepared. A rest of any size as one
/// statement would be new SQL almost every batch (SQLite parsing thousands of placeholders cost
/// an eighth of the writer's time).
pub(crate) fn chunks<'r, T>(
    rows: &'r [T],
    max: usize,
    budget: usize,
    size: impl Fn(&T) -> usize + 'r,
) -> impl Iterator<Item = &'r [T]> + 'r {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = if rest.len() >= max {
            max
        } else {
            1 << rest.len().ilog2()
        };
        while n > 1 && rest[..n].iter().map(&size).sum::<usize>() > budget {
            n /= 2;
        }
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

/// `(?, ?, ?), (?, ?, ?)`: `rows` groups of `columns` placeholders.
pub(crate) fn placeholders(rows: usize, columns: usize) -> String {
    let group = format!("({})", vec!["?"; columns].join(", "));
    vec![group; rows].join(", ")
}

pub(crate) const VISIT_COLUMNS: &str =
    "event_id, code, visited_at, status, ip, visitor, agent_id, browser, \
     browser_version, os, os_version, device, audience, agent, country, region, city, isp, \
     referrer_host, short_domain, language, rule, reasons";

/// How many [`VISIT_COLUMNS`] there are: the parameters of one visit.
pub(crate) const VISIT_COLUMN_COUNT: usize = 23;

/// Bytes a visit takes in a multi-row insert, about (its text plus the fixed fields).
pub(crate) fn visit_bytes(v: &&Visit) -> usize {
    let text = |value: &Option<String>| value.as_deref().map_or(0, str::len);
    96 + v.event_id.len()
        + v.code.len()
        + text(&v.ip)
        + text(&v.agent.browser)
        + text(&v.agent.browser_version)
        + text(&v.agent.os)
        + text(&v.agent.os_version)
        + v.agent.agent_label.map_or(0, str::len)
        + text(&v.country)
        + text(&v.region)
        + text(&v.city)
        + text(&v.isp)
        + text(&v.referrer_host)
        + text(&v.short_domain)
        + text(&v.language)
        + text(&v.rule)
}

type Query<'q, DB> = sqlx::query::Query<'q, DB, <DB as Database>::Arguments<'q>>;

/// Binds the [`VISIT_COLUMNS`] of each of `chunk`, the time as `time` makes it from Unix ms.
pub(crate) fn bind_visits<'q, DB, T>(
    mut query: Query<'q, DB>,
    chunk: &[&'q Visit],
    time: impl Fn(i64) -> T,
) -> Query<'q, DB>
where
    DB: Database,
    T: Encode<'q, DB> + Type<DB> + Send + 'q,
    &'q str: Encode<'q, DB> + Type<DB>,
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    &'q [u8]: Encode<'q, DB> + Type<DB>,
{
    for v in chunk {
        // `&str`, not `&String`: sqlx copies owned strings into its arguments, borrows these.
        let text = |value: &'q Option<String>| value.as_deref();
        query = query
            .bind(v.event_id.as_str())
            .bind(v.code.as_str())
            .bind(time(v.time_ms))
            .bind(v.status.map(i64::from))
            .bind(text(&v.ip))
            .bind(v.visitor.as_slice())
            .bind(v.user_agent_id)
            .bind(text(&v.agent.browser))
            .bind(text(&v.agent.browser_version))
            .bind(text(&v.agent.os))
            .bind(text(&v.agent.os_version))
            .bind(v.agent.device.as_str())
            .bind(v.agent.audience.as_str())
            .bind(v.agent.agent_label)
            .bind(text(&v.country))
            .bind(text(&v.region))
            .bind(text(&v.city))
            .bind(text(&v.isp))
            .bind(text(&v.referrer_host))
            .bind(text(&v.short_domain))
            .bind(text(&v.language))
            .bind(text(&v.rule))
            .bind(Some(i64::from(v.reasons.0)));
    }
    query
}

/// The rows of one rollup table to add to: key columns, then counters.
pub(crate) struct Rollup {
    pub table: &'static str,
    pub keys: &'static [&'static str],
    pub counters: &'static [&'static str],
    pub rows: Vec<Vec<Value>>,
}

const AUDIENCES: &[&str] = &["humans", "bots", "previews", "scanners"];

fn text(value: &str) -> Value {
    Value::Text(value.to_owned())
}

fn audiences(mut row: Vec<Value>, a: &Audiences) -> Vec<Value> {
    row.extend([a.humans, a.bots, a.previews, a.scanners].map(Value::Int));
    row
}

/// The six rollup tables' rows of `d`, each in key order.
pub(crate) fn rollups(d: &Deltas) -> [Rollup; 6] {
    [
        Rollup {
            table: "visit_buckets",
            keys: &["code", "span", "bucket"],
            counters: &["humans", "bots", "previews", "scanners", "new_visitors"],
            rows: (d.buckets.iter())
                .map(|((code, span, bucket), c)| {
                    let counts = [c.humans, c.bots, c.previews, c.scanners, c.new_visitors];
                    let mut row = vec![text(code), Value::Int(*span), Value::Int(*bucket)];
                    row.extend(counts.map(Value::Int));
                    row
                })
                .collect(),
        },
        Rollup {
            table: "visit_agents",
            keys: &["code", "day", "browser", "os", "device", "agent"],
            counters: AUDIENCES,
            rows: (d.agents.iter())
                .map(|((code, day, browser, os, device, agent), a)| {
                    let key = vec![text(code), Value::Int(*day), text(browser), text(os)];
                    audiences([key, vec![text(device), text(agent)]].concat(), a)
                })
                .collect(),
        },
        Rollup {
            table: "visit_places",
            keys: &["code", "day", "country", "region", "city"],
            counters: AUDIENCES,
            rows: (d.places.iter())
                .map(|((code, day, country, region, city), a)| {
                    let key = vec![text(code), Value::Int(*day), text(country)];
                    audiences([key, vec![text(region), text(city)]].concat(), a)
                })
                .collect(),
        },
        Rollup {
            table: "visit_sources",
            keys: &["code", "day", "referrer_host", "short_domain"],
            counters: AUDIENCES,
            rows: (d.sources.iter())
                .map(|((code, day, referrer, domain), a)| {
                    let key = vec![text(code), Value::Int(*day), text(referrer), text(domain)];
                    audiences(key, a)
                })
                .collect(),
        },
        Rollup {
            table: "domain_clicks",
            keys: &["minute", "short_domain"],
            counters: AUDIENCES,
            rows: (d.domain_minutes.iter())
                .map(|((minute, domain), a)| audiences(vec![Value::Int(*minute), text(domain)], a))
                .collect(),
        },
        Rollup {
            table: "ab_arms",
            keys: &["code", "rule"],
            counters: &["humans", "visitors"],
            rows: (d.arms.iter())
                .map(|((code, rule), a)| {
                    vec![
                        text(code),
                        text(rule),
                        Value::Int(a.humans),
                        Value::Int(a.visitors),
                    ]
                })
                .collect(),
        },
    ]
}

/// Adds every rollup's rows in multi-row upserts of at most `max_rows` rows, `conflict` saying
/// what the backend does with a key already there (given the counters).
pub(crate) async fn upsert_rollups<D: Dialect>(
    connection: &mut <D::DB as Database>::Connection,
    d: &Deltas<'_>,
    max_rows: usize,
    conflict: impl Fn(&Rollup) -> String,
) -> StorageResult<()> {
    for rollup in rollups(d) {
        let columns = [rollup.keys, rollup.counters].concat().join(", ");
        let width = rollup.keys.len() + rollup.counters.len();
        for chunk in chunks(&rollup.rows, max_rows, usize::MAX, |_| 0) {
            let sql = format!(
                "INSERT INTO {} ({columns}) VALUES {} {}",
                rollup.table,
                placeholders(chunk.len(), width),
                conflict(&rollup),
            );
            D::DB::execute(connection, statement(&sql, chunk.iter().flatten().cloned()))
                .await
                .map_err(StorageError::classify)?;
        }
    }
    Ok(())
}

/// `c = c + <new>` for each counter, `new` naming the value proposed for a column.
pub(crate) fn add_counters(counters: &[&str], new: impl Fn(&str) -> String) -> String {
    let updates: Vec<String> = counters
        .iter()
        .map(|c| format!("{c} = {c} + {}", new(c)))
        .collect();
    updates.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_have_few_shapes() {
        let rows: Vec<u32> = (0..1300).collect();
        let sizes = |budget| -> Vec<usize> {
            chunks(&rows, 512, budget, |_| 1)
                .map(<[u32]>::len)
                .collect()
        };
        assert_eq!(sizes(usize::MAX), [512, 512, 256, 16, 4]);
        // A byte budget halves each chunk until it fits.
        assert_eq!(sizes(300)[..3], [256, 256, 256]);
        let again: Vec<u32> = chunks(&rows, 512, 300, |_| 1).flatten().copied().collect();
        assert_eq!(again, rows);
        assert_eq!(chunks::<u32>(&[], 512, 1, |_| 1).count(), 0);
    }
}

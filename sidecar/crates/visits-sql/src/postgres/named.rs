//! Reads of raw visits over a day or two by the names of their days' partitions (issue 56): a
//! `UNION ALL` of `visits_pYYYYMMDD` for each day the read covers, in place of `visits`.
//! PostgreSQL then plans a statement over two small tables instead of pruning ~70 partitions
//! (planned per execution on an ordinary session, or a generic plan that locks every partition
//! when it starts), and no other partition is locked. The per-rule clicks over 24 h and the
//! feed's rows of one stored batch read this way (bench/results/partitions-2026-11-26.md, run 7).
//!
//! Why the default partition is not in the union: a day that has its own partition has all its
//! visits there (`ATTACH` refuses a range the default partition holds rows of, and the default
//! partition takes no row of an attached day afterwards). A read whose days are not all known to
//! have a partition reads `visits` as before, which is always right.
//!
//! Which days have a partition is read from the catalog and kept for [`REFRESH`] (one query a
//! minute, not one per read), and forgotten when this store creates or drops a day. Every way the
//! list can be stale is safe:
//! - a day created since (by another sidecar's cleanup job) is not in the list: `visits` is read;
//! - a day dropped since (retention, another sidecar): the statement fails with "undefined
//!   table", the list is forgotten and the read made again on `visits`
//!   ([`crate::store::SqlVisitStore::rows_between`]).
//!
//! Not covered: a partition detached by hand (`ALTER TABLE visits DETACH PARTITION`) is still a
//! table of that name, and is read as a day of `visits` until the list is read again.

use super::days::{days, partition_name};
use chrono::{DateTime, NaiveDate, Utc};
use shortlink_core::sync::LockOrRecover;
use shortlink_store::StorageResult;
use sqlx::PgPool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most days a read names: a 24 h window, or a feed row's visits across midnight. A longer
/// read reads `visits` (its rows then cost more than planning over the days), and the few
/// shapes keep the statements few (each set of names is a statement of its own, prepared once
/// per session).
const NAMED_DAYS: usize = 2;

/// How long the list of days is used before it is read again.
const REFRESH: Duration = Duration::from_secs(60);

/// The days that have their own partition, as last read ([`days`]), and when.
#[derive(Default)]
pub struct DayList {
    read: Mutex<Option<(Instant, Arc<Vec<NaiveDate>>)>>,
}

impl DayList {
    fn lock(&self) -> MutexGuard<'_, Option<(Instant, Arc<Vec<NaiveDate>>)>> {
        self.read.lock_or_recover()
    }

    /// Reads the list again before its next use: a day was created or dropped.
    pub fn forget(&self) {
        *self.lock() = None;
    }

    async fn current(&self, pool: &PgPool) -> StorageResult<Arc<Vec<NaiveDate>>> {
        if let Some((read_at, days)) = &*self.lock() {
            if read_at.elapsed() < REFRESH {
                return Ok(days.clone());
            }
        }
        let read_at = Instant::now();
        let days = Arc::new(days(pool).await?);
        *self.lock() = Some((read_at, days.clone()));
        Ok(days)
    }

    /// What to read `columns` of the visits made from `first` to `last` (both included) from: a
    /// `UNION ALL` of their days' partitions, or `None` for `visits` (more than [`NAMED_DAYS`]
    /// days, or a day without a partition known).
    pub async fn source(
        &self,
        pool: &PgPool,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        columns: &str,
    ) -> StorageResult<Option<String>> {
        let wanted = covered(first, last);
        if wanted.is_empty() {
            return Ok(None);
        }
        let have = self.current(pool).await?;
        if !wanted.iter().all(|day| have.binary_search(day).is_ok()) {
            return Ok(None);
        }
        Ok(Some(union(&wanted, columns)))
    }
}

/// The days from `first`'s to `last`'s, if there are at most [`NAMED_DAYS`]; none otherwise.
fn covered(first: DateTime<Utc>, last: DateTime<Utc>) -> Vec<NaiveDate> {
    let (from, to) = (first.date_naive(), last.date_naive());
    let days: Vec<NaiveDate> = (from.iter_days())
        .take_while(|day| *day <= to)
        .take(NAMED_DAYS + 1)
        .collect();
    if days.len() > NAMED_DAYS {
        return Vec::new();
    }
    days
}

/// `(SELECT <columns> FROM visits_p<day> UNION ALL ...)`: PostgreSQL flattens it and applies
/// the conditions written on it to each day.
fn union(days: &[NaiveDate], columns: &str) -> String {
    let selects: Vec<String> = (days.iter())
        .map(|day| format!("SELECT {columns} FROM {}", partition_name(*day)))
        .collect();
    format!("({})", selects.join(" UNION ALL "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_day_or_two_are_named_a_longer_read_is_not() {
        let one = covered(
            at("2026-03-29T00:00:00Z"),
            at("2026-03-29T23:59:59.999999Z"),
        );
        assert_eq!(union(&one, "rule"), "(SELECT rule FROM visits_p20260329)");
        let two = covered(at("2026-03-28T23:00:00Z"), at("2026-03-29T22:59:59Z"));
        assert_eq!(
            union(&two, "code, rule"),
            "(SELECT code, rule FROM visits_p20260328 UNION ALL \
             SELECT code, rule FROM visits_p20260329)"
        );
        assert!(covered(at("2026-03-27T23:00:00Z"), at("2026-03-29T00:00:00Z")).is_empty());
        assert!(covered(at("2026-03-29T00:00:00Z"), at("2026-03-28T23:59:59Z")).is_empty());
    }
}

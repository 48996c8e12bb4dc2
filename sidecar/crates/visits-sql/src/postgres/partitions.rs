//! Raw visits partitioned by UTC day (issue 56, migration `20261126000054_visits_by_day.sql`):
//! the cleanup job creates the days ahead ([`DayPartitions::prepare_days`]) and lets whole days go
//! ([`DayPartitions::drop_days_before`]), so retention of a day is a `DROP TABLE` of its
//! partition, not a `DELETE` of its rows (bloat, index churn, a long fight with the consumer's
//! inserts). What is left of a day still partly inside retention, and the default partition,
//! keep their row deletes.
//!
//! A day that has ended is vacuumed once ([`DayPartitions::settle_days`]): its pages are then all
//! visible, so a read of its visits by code and time answers from the covering index alone
//! (migration `20261127000060_visits_code_time_covering.sql`). Autovacuum would get there too,
//! but only after a fifth of a day's rows again, which a finished day never gets.
//!
//! Not `DETACH PARTITION ... CONCURRENTLY`: PostgreSQL refuses it on a table with a default
//! partition. The drop takes the parent's lock for the time of a catalog change; it waits at
//! most [`LOCK_WAIT`] behind the consumer's transactions (each one batch), then tries again at
//! the next run.

use super::days::{days, partition_name};
use super::PgVisitStore;
use crate::sql::{db, UNDEFINED_TABLE};
use async_trait::async_trait;
use chrono::{DateTime, Days, NaiveDate, Utc};
use shortlink_store::StorageResult;
use shortlink_visits::store::DayPartitions;
use sqlx::{PgPool, Postgres, Transaction};

/// Days created ahead of today: the consumer writes into its day's partition even if the
/// cleanup job has not run for a week.
pub(super) const AHEAD_DAYS: u64 = 7;

/// How long a partition change waits for the parent's lock (`lock_timeout`).
const LOCK_WAIT: &str = "5s";

/// How many of the last finished days [`DayPartitions::settle_days`] looks at: a job that did not
/// run for a few days still settles them.
const SETTLE_DAYS: u64 = 7;

/// Serialises partition changes of sidecars sharing the database (an advisory lock's key).
const ADVISORY_KEY: i64 = 0x5356_6973_6974_5044; // "SVisitPD"

/// The first instant of `day` and of the next one.
fn bounds(day: NaiveDate) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = day.and_time(chrono::NaiveTime::MIN).and_utc();
    (start, start + chrono::Duration::days(1))
}

/// A transaction holding the partition changes' advisory lock, with a bounded lock wait.
async fn change(pool: &PgPool) -> StorageResult<Transaction<'static, Postgres>> {
    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query(&format!("SET LOCAL lock_timeout = '{LOCK_WAIT}'"))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(ADVISORY_KEY)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    Ok(tx)
}

/// Whether `name` is (still) a table, asked under the advisory lock.
async fn exists(tx: &mut Transaction<'static, Postgres>, name: &str) -> StorageResult<bool> {
    let oid: Option<i64> = sqlx::query_scalar("SELECT to_regclass($1)::oid::int8")
        .bind(name)
        .fetch_one(&mut **tx)
        .await
        .map_err(db)?;
    Ok(oid.is_some())
}

/// Creates `day`'s partition, moving in the day's visits the default partition took meanwhile
/// (`ATTACH` refuses a range the default partition holds rows of). Built beside the table and
/// attached, which takes a lighter lock on `visits` than `CREATE TABLE ... PARTITION OF`.
async fn create(pool: &PgPool, day: NaiveDate) -> StorageResult<bool> {
    let name = partition_name(day);
    let (from, to) = bounds(day);
    let mut tx = change(pool).await?;
    if exists(&mut tx, &name).await? {
        return Ok(false);
    }
    let attach = format!(
        "ALTER TABLE visits ATTACH PARTITION {name} FOR VALUES FROM ('{}') TO ('{}')",
        from.to_rfc3339(),
        to.to_rfc3339()
    );
    sqlx::query(&format!(
        "CREATE TABLE {name} (LIKE visits INCLUDING DEFAULTS)"
    ))
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    sqlx::query(&format!(
        "WITH moved AS (DELETE FROM visits_default WHERE visited_at >= $1 \
           AND visited_at < $2 RETURNING *) INSERT INTO {name} SELECT * FROM moved"
    ))
    .bind(from)
    .bind(to)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    sqlx::query(&attach).execute(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(true)
}

/// `VACUUM (ANALYZE)` of the table `name`; `false` if it is gone (dropped by another sidecar's
/// retention since the days were listed). Outside a transaction (VACUUM refuses one), on a
/// connection closed afterwards: a big day takes longer than the pool's sessions allow a
/// statement, so this one's bound is lifted. It takes no lock the consumer's inserts wait on
/// (SHARE UPDATE EXCLUSIVE on the day alone).
async fn vacuum(pool: &PgPool, name: &str) -> StorageResult<bool> {
    let mut connection = pool.acquire().await.map_err(db)?;
    connection.close_on_drop();
    sqlx::query("SET statement_timeout = 0")
        .execute(&mut *connection)
        .await
        .map_err(db)?;
    match sqlx::query(&format!("VACUUM (ANALYZE) {name}"))
        .execute(&mut *connection)
        .await
    {
        Ok(_) => Ok(true),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(UNDEFINED_TABLE) => Ok(false),
        Err(error) => Err(db(error)),
    }
}

#[async_trait]
impl DayPartitions for PgVisitStore {
    /// Creates the partitions of today and of the next [`AHEAD_DAYS`] days that are missing;
    /// returns how many it created.
    async fn prepare_days(&self, now: DateTime<Utc>) -> StorageResult<u32> {
        let have = days(&self.writer).await?;
        let today = now.date_naive();
        let mut created = 0;
        for ahead in 0..=AHEAD_DAYS {
            let Some(day) = today.checked_add_days(Days::new(ahead)) else {
                break;
            };
            if have.binary_search(&day).is_err() && create(&self.writer, day).await? {
                created += 1;
            }
        }
        if created > 0 {
            self.dialect.days.forget();
        }
        Ok(created)
    }

    /// Vacuums each of the last [`SETTLE_DAYS`] finished days whose partition has not been
    /// vacuumed (by this job or by autovacuum) since the day ended; returns how many it vacuumed.
    /// A visit stored late into a settled day (the consumer behind) leaves its page to be read
    /// from the heap: the read stays right, only that page is not skipped.
    async fn settle_days(&self, now: DateTime<Utc>) -> StorageResult<u32> {
        let today = now.date_naive();
        let mut settled = 0;
        for day in days(&self.writer).await? {
            let ended = bounds(day).1;
            if ended > now || day.checked_add_days(Days::new(SETTLE_DAYS)) < Some(today) {
                continue;
            }
            let name = partition_name(day);
            // NULL for a table dropped since the list was read: nothing to do.
            let vacuumed: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
                "SELECT GREATEST(last_vacuum, last_autovacuum) FROM pg_stat_user_tables \
                 WHERE relid = to_regclass($1)",
            )
            .bind(&name)
            .fetch_optional(&self.writer)
            .await
            .map_err(db)?;
            let Some(vacuumed) = vacuumed else { continue };
            if vacuumed.is_some_and(|at| at >= ended) {
                continue;
            }
            if vacuum(&self.writer, &name).await? {
                settled += 1;
            }
        }
        Ok(settled)
    }

    /// Drops the partitions of the days that ended at or before `before` (every visit in them
    /// is past retention); returns how many visits they held.
    async fn drop_days_before(&self, before: DateTime<Utc>) -> StorageResult<u64> {
        let mut dropped = 0;
        for day in days(&self.writer).await? {
            if bounds(day).1 > before {
                break;
            }
            let name = partition_name(day);
            let mut tx = change(&self.writer).await?;
            if !exists(&mut tx, &name).await? {
                continue;
            }
            let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {name}"))
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
            sqlx::query(&format!("DROP TABLE {name}"))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            tx.commit().await.map_err(db)?;
            self.dialect.days.forget();
            dropped += u64::try_from(rows).unwrap_or(0);
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::super::days::day_of;
    use super::*;

    #[test]
    fn names_and_bounds_are_utc_days() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 29).unwrap();
        assert_eq!(partition_name(day), "visits_p20260329");
        assert_eq!(day_of("visits_p20260329"), Some(day));
        assert_eq!(day_of("visits_default"), None);
        let (from, to) = bounds(day);
        assert_eq!(from.to_rfc3339(), "2026-03-29T00:00:00+00:00");
        assert_eq!((to - from).num_hours(), 24);
    }
}

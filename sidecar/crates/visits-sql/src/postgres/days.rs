//! The names of the day partitions of `visits` (`visits_pYYYYMMDD`, migration 54) and which days
//! have one: what the cleanup job's changes (`partitions.rs`) and the reads by name
//! (`named.rs`) both go by.

use chrono::NaiveDate;
use shortlink_store::{StorageError, StorageResult};
use sqlx::PgPool;

const PREFIX: &str = "visits_p";

pub(super) fn partition_name(day: NaiveDate) -> String {
    format!("{PREFIX}{}", day.format("%Y%m%d"))
}

pub(super) fn day_of(name: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(name.strip_prefix(PREFIX)?, "%Y%m%d").ok()
}

/// The days that have their own partition, oldest first.
pub(super) async fn days(pool: &PgPool) -> StorageResult<Vec<NaiveDate>> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'visits'::regclass",
    )
    .fetch_all(pool)
    .await
    .map_err(StorageError::classify)?;
    let mut days: Vec<NaiveDate> = names.iter().filter_map(|name| day_of(name)).collect();
    days.sort_unstable();
    Ok(days)
}

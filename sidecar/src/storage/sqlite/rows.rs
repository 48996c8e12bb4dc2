//! Rows and query shapes of the SQLite backend: columns, filters, timestamps as text.

use crate::storage::{
    checked_flags, checked_redirect, parse_tags, ApiKey, Link, LinkFilter, LinkState, StorageError,
    StorageResult,
};
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

pub(super) const LINK_COLUMNS: &str =
    "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags";

/// Columns written by an insert: the link's, its slot, and the URL-hash prefix the live-link
/// lookup is indexed on (a column, not an expression index: see migration 7).
pub(super) const INSERT_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index, url_prefix";

/// Rows per multi-row INSERT: 17 binds each, well under SQLite's 32,766 variables.
pub(super) const INSERT_ROWS: usize = 1000;

/// Appends `WHERE` conditions for `filter`; callers may add more with `AND`.
pub(super) fn push_filter(query: &mut QueryBuilder<'_, Sqlite>, filter: &LinkFilter) {
    query.push(" WHERE 1 = 1");
    if let Some(campaign) = &filter.campaign {
        query.push(" AND campaign = ").push_bind(campaign.clone());
    }
    if let Some(recipient_ref) = &filter.recipient_ref {
        query
            .push(" AND recipient_ref = ")
            .push_bind(recipient_ref.clone());
    }
    if let Some(tag) = &filter.tag {
        query
            .push(" AND EXISTS (SELECT 1 FROM json_each(links.tags) WHERE json_each.value = ")
            .push_bind(tag.clone())
            .push(")");
    }
    if let Some((state, now)) = filter.state {
        match state {
            LinkState::Revoked => query.push(" AND revoked_at IS NOT NULL"),
            LinkState::Live => query
                .push(" AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ")
                .push_bind(ts(now))
                .push(")"),
            LinkState::Expired => query
                .push(" AND revoked_at IS NULL AND expires_at <= ")
                .push_bind(ts(now)),
        };
    }
}

/// `SELECT code FROM links WHERE code IN (<codes>)`.
pub(super) fn codes_in(codes: &[String]) -> QueryBuilder<'static, Sqlite> {
    let mut query = QueryBuilder::new("SELECT code FROM links WHERE code IN (");
    let mut list = query.separated(", ");
    for code in codes {
        list.push_bind(code.clone());
    }
    query.push(")");
    query
}

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend.
pub(super) fn select_links(filter: &LinkFilter) -> QueryBuilder<'static, Sqlite> {
    let mut query = QueryBuilder::new(format!("SELECT {LINK_COLUMNS} FROM links"));
    push_filter(&mut query, filter);
    query
}

/// Fixed-width UTC text, so that text order is time order.
pub(super) fn ts(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(super) fn opt_ts(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(ts)
}

pub(super) fn parse_ts(text: &str) -> StorageResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| StorageError::Corrupt(format!("timestamp {text:?} in the database")))
}

pub(super) fn parse_opt_ts(text: Option<String>) -> StorageResult<Option<DateTime<Utc>>> {
    text.as_deref().map(parse_ts).transpose()
}

pub(super) fn link_from_row(row: &SqliteRow) -> StorageResult<Link> {
    Ok(Link {
        code: row.try_get("code")?,
        target: row.try_get("target")?,
        url_hash: row.try_get("url_hash")?,
        redirect: checked_redirect(row.try_get("redirect_status")?)?,
        flags: checked_flags(row.try_get("flags")?)?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts(&row.try_get::<String, _>("updated_at")?)?,
        expires_at: parse_opt_ts(row.try_get("expires_at")?)?,
        revoked_at: parse_opt_ts(row.try_get("revoked_at")?)?,
        visit_count: row.try_get("visit_count")?,
        last_visit_at: parse_opt_ts(row.try_get("last_visit_at")?)?,
        campaign: row.try_get("campaign")?,
        recipient_ref: row.try_get("recipient_ref")?,
        tags: parse_tags(row.try_get("tags")?)?,
    })
}

pub(super) fn api_key_from_row(row: &SqliteRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get::<String, _>("role")?.parse()?,
        key_hash: row.try_get("key_hash")?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        revoked_at: parse_opt_ts(row.try_get("revoked_at")?)?,
    })
}

pub(super) fn sequence_value(value: u64) -> StorageResult<i64> {
    i64::try_from(value).map_err(|_| StorageError::Corrupt(format!("sequence value {value}")))
}

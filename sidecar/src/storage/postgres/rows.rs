//! Rows and query shapes of the PostgreSQL backend: columns, filters, column types.

use crate::storage::{
    checked_flags, checked_redirect, parse_tags, ApiKey, Link, LinkFilter, LinkState, StorageResult,
};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, QueryBuilder, Row};

pub(super) const LINK_COLUMNS: &str =
    "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, \
     tags::text AS tags";

/// Columns written by an insert: the link's and its slot.
pub(super) const INSERT_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index";

/// Appends `WHERE`/`AND` conditions for `filter`.
pub(super) fn push_filter(query: &mut QueryBuilder<'_, Postgres>, filter: &LinkFilter) {
    query.push(" WHERE TRUE");
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
            .push(" AND tags @> jsonb_build_array(")
            .push_bind(tag.clone())
            .push("::text)");
    }
    if let Some((state, now)) = filter.state {
        match state {
            LinkState::Revoked => query.push(" AND revoked_at IS NOT NULL"),
            LinkState::Live => query
                .push(" AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ")
                .push_bind(now)
                .push(")"),
            LinkState::Expired => query
                .push(" AND revoked_at IS NULL AND expires_at <= ")
                .push_bind(now),
        };
    }
}

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend.
pub(super) fn select_links(filter: &LinkFilter) -> QueryBuilder<'static, Postgres> {
    let mut query = QueryBuilder::new(format!("SELECT {LINK_COLUMNS} FROM links"));
    push_filter(&mut query, filter);
    query
}

pub(super) fn link_from_row(row: &PgRow) -> StorageResult<Link> {
    Ok(Link {
        code: row.try_get("code")?,
        target: row.try_get("target")?,
        url_hash: row.try_get("url_hash")?,
        redirect: checked_redirect(row.try_get::<i16, _>("redirect_status")?.into())?,
        flags: checked_flags(row.try_get::<i32, _>("flags")?.into())?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
        visit_count: row.try_get("visit_count")?,
        last_visit_at: row.try_get("last_visit_at")?,
        campaign: row.try_get("campaign")?,
        recipient_ref: row.try_get("recipient_ref")?,
        tags: parse_tags(row.try_get("tags")?)?,
    })
}

pub(super) fn api_key_from_row(row: &PgRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get::<String, _>("role")?.parse()?,
        key_hash: row.try_get("key_hash")?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

pub(super) fn redirect_column(status: u16) -> i16 {
    // Only 301..=308 ever get here (validated at the API, checked by the table).
    i16::try_from(status).unwrap_or(i16::MAX)
}

pub(super) fn flags_column(flags: u32) -> i32 {
    i32::try_from(flags).unwrap_or(i32::MAX)
}

//! Rows and query shapes every backend shares: the filter, link and API-key rows.

use super::Statement;
use super::{Dialect, Driver, Value};
use crate::api::{checked_flags, checked_redirect, StorageResult};
use crate::model::{parse_tags, ApiKey, Link, LinkExtras, LinkFilter, LinkState};
use sqlx::Database;

type Row<D> = <<D as Dialect>::DB as Database>::Row;

/// Columns written by an insert: the link's and its slot (and `url_prefix` where the backend
/// writes it, [`Dialect::WRITES_URL_PREFIX`]).
pub const INSERT_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     valid_since, not_yet_url, expired_url, rules, max_visits, password_digest, preview, \
     batch_id, batch_index";

pub const API_KEY_COLUMNS: &str = "id, name, role, key_hash, created_at, revoked_at";

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend with `AND ...`.
pub fn select_links<D: Dialect>(filter: &LinkFilter) -> Statement {
    let mut query = Statement::new(format!("SELECT {} FROM links", D::LINK_COLUMNS));
    push_filter::<D>(&mut query, filter);
    query
}

/// Appends `WHERE` conditions for `filter`; callers may add more with `AND`.
pub fn push_filter<D: Dialect>(query: &mut Statement, filter: &LinkFilter) {
    query.push(" WHERE 1 = 1");
    if let Some(campaign) = &filter.campaign {
        query.push(" AND campaign = ");
        query.bind(Value::Text(campaign.clone()));
    }
    if let Some(recipient_ref) = &filter.recipient_ref {
        query.push(" AND recipient_ref = ");
        query.bind(Value::Text(recipient_ref.clone()));
    }
    if let Some(tag) = &filter.tag {
        D::push_tag(query, tag.clone());
    }
    if let Some((state, now)) = filter.state {
        match state {
            LinkState::Revoked => {
                query.push(" AND revoked_at IS NOT NULL");
            }
            LinkState::Live => {
                query.push(" AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ");
                query.bind(D::time(now));
                query.push(")");
            }
            LinkState::Expired => {
                query.push(" AND revoked_at IS NULL AND expires_at <= ");
                query.bind(D::time(now));
            }
        }
    }
}

/// `<head> (<values>)`: a comma-separated list of bound values closing the statement.
pub fn in_list<D: Dialect>(head: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    let mut query = Statement::new(head);
    push_list(&mut query, values);
    query
}

/// Appends ` (<values>)`.
pub fn push_list(query: &mut Statement, values: impl IntoIterator<Item = Value>) {
    query.push(" (");
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            query.push(", ");
        }
        query.bind(value);
    }
    query.push(")");
}

/// The values of one link as [`INSERT_COLUMNS`] lists them (then `url_prefix` where written).
pub fn link_values<D: Dialect>(link: &Link, slot: Option<crate::model::Slot>) -> Vec<Value> {
    link_values_at::<D>(
        link,
        slot,
        D::time(link.created_at),
        D::time(link.updated_at),
    )
}

/// [`link_values`] with the creation and update times already in their stored form.
pub fn link_values_at<D: Dialect>(
    link: &Link,
    slot: Option<crate::model::Slot>,
    created_at: Value,
    updated_at: Value,
) -> Vec<Value> {
    let mut values = vec![
        Value::Text(link.code.clone()),
        Value::Text(link.target.clone()),
        Value::Text(link.url_hash.clone()),
        Value::Int(i64::from(link.redirect)),
        Value::Int(i64::from(link.flags.0)),
        created_at,
        updated_at,
        D::opt_time(link.expires_at),
        D::opt_time(link.revoked_at),
        Value::Int(link.visit_count),
        D::opt_time(link.last_visit_at),
        Value::OptText(link.campaign.clone()),
        Value::OptText(link.recipient_ref.clone()),
        Value::OptText(crate::model::tags_column(&link.tags)),
        D::opt_time(link.extras.valid_since),
        Value::OptText(link.extras.not_yet_url.clone()),
        Value::OptText(link.extras.expired_url.clone()),
        Value::OptText(link.extras.rules.clone()),
        Value::OptInt(link.extras.max_visits),
        Value::OptText(link.extras.password_digest.clone()),
        Value::OptText(link.extras.preview.clone()),
        Value::OptInt(slot.map(|s| s.batch_id)),
        Value::OptInt(slot.map(|s| s.index)),
    ];
    if D::WRITES_URL_PREFIX {
        values.push(Value::Text(
            crate::model::url_hash_prefix(&link.url_hash).to_owned(),
        ));
    }
    values
}

/// `(?, ?, ...)` for one row of [`link_values`].
pub fn link_placeholders<D: Dialect>() -> String {
    format!("({})", link_marks::<D>().join(", "))
}

/// The placeholder of each of [`link_values`], column by column of [`insert_columns`].
pub fn link_marks<D: Dialect>() -> Vec<&'static str> {
    (insert_columns::<D>().split(", "))
        .map(|column| if column == "tags" { D::TAGS_PARAM } else { "?" })
        .collect()
}

/// The insert's column list for this backend.
pub fn insert_columns<D: Dialect>() -> String {
    if D::WRITES_URL_PREFIX {
        format!("{INSERT_COLUMNS}, url_prefix")
    } else {
        INSERT_COLUMNS.to_owned()
    }
}

pub fn link<D: Dialect>(row: &Row<D>) -> StorageResult<Link> {
    Ok(Link {
        code: D::read_text(row, "code")?,
        target: D::read_text(row, "target")?,
        url_hash: D::read_text(row, "url_hash")?,
        redirect: checked_redirect(D::DB::int(row, "redirect_status")?)?,
        flags: checked_flags(D::DB::int(row, "flags")?)?,
        created_at: D::read_time(row, "created_at")?,
        updated_at: D::read_time(row, "updated_at")?,
        expires_at: D::read_opt_time(row, "expires_at")?,
        revoked_at: D::read_opt_time(row, "revoked_at")?,
        visit_count: D::DB::int(row, "visit_count")?,
        last_visit_at: D::read_opt_time(row, "last_visit_at")?,
        campaign: D::read_opt_text(row, "campaign")?,
        recipient_ref: D::read_opt_text(row, "recipient_ref")?,
        tags: parse_tags(D::read_opt_text(row, "tags")?)?,
        extras: LinkExtras {
            valid_since: D::read_opt_time(row, "valid_since")?,
            not_yet_url: D::read_opt_text(row, "not_yet_url")?,
            expired_url: D::read_opt_text(row, "expired_url")?,
            rules: D::read_opt_text(row, "rules")?,
            max_visits: D::DB::opt_int(row, "max_visits")?,
            password_digest: D::read_opt_text(row, "password_digest")?,
            preview: D::read_opt_text(row, "preview")?,
        },
    })
}

/// A row of `SELECT batch_index, <link columns>`.
pub fn slot_link<D: Dialect>(row: &Row<D>) -> StorageResult<(i64, Link)> {
    Ok((D::DB::int(row, "batch_index")?, link::<D>(row)?))
}

pub fn api_key<D: Dialect>(row: &Row<D>) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: D::DB::int(row, "id")?,
        name: D::read_text(row, "name")?,
        role: D::read_text(row, "role")?.parse()?,
        key_hash: D::read_text(row, "key_hash")?,
        created_at: D::read_time(row, "created_at")?,
        revoked_at: D::read_opt_time(row, "revoked_at")?,
    })
}

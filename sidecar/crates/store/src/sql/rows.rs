//! Rows and query shapes every backend shares: the filter, link and API-key rows.

use super::columns::{Column, Stored, LINK};
use super::dialect::Dialect;
use super::driver::Driver;
use super::statement::{statement, Statement, Value};
use crate::api::{checked_flags, checked_redirect, Backend, StorageResult};
use crate::model::{parse_tags, ApiKey, KeyRate, KeyWorkspace, LinkFilter};
use crate::workspace::quota_read;
use shortlink_model::WorkspaceId;
use shortlink_model::{Link, LinkExtras, LinkState};
use sqlx::Database;
use std::sync::OnceLock;

type Row<D> = <<D as Dialect>::DB as Database>::Row;

/// The values of a link, column by column of [`LINK`], with the creation and update times in
/// their stored form.
fn link_columns<D: Dialect>(
    link: &Link,
    created_at: Value,
    updated_at: Value,
) -> [Value; LINK.len()] {
    [
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
        Value::OptText(link.extras.click_id_param.clone()),
        D::opt_time(link.quarantined_at),
        Value::OptText(crate::host_key(&link.target)),
        Value::Int(link.workspace.get()),
    ]
}

/// A column's placeholder in an insert or update.
fn mark<D: Dialect>(column: &Column) -> &'static str {
    match column.stored {
        Stored::Json => D::TAGS_PARAM,
        Stored::Plain | Stored::SmallInt => "?",
    }
}

/// The columns an insert writes beyond the link's: its slot.
const SLOT_COLUMNS: [&str; 2] = ["batch_id", "batch_index"];

/// The column written beside the link's where the backend keeps it itself
/// ([`Dialect::WRITES_URL_PREFIX`]).
const URL_PREFIX_COLUMN: &str = "url_prefix";

fn url_prefix(link: &Link) -> Value {
    Value::Text(crate::model::url_hash_prefix(&link.url_hash).to_owned())
}

/// One string per backend, made once: the statements derived from [`LINK`] are the same for
/// every query of a backend.
type PerBackend = [OnceLock<String>; 3];

fn per_backend<D: Dialect>(cache: &'static PerBackend, make: fn() -> String) -> &'static str {
    let at = match D::BACKEND {
        Backend::Sqlite => 0,
        Backend::Postgres => 1,
        Backend::Mysql => 2,
    };
    cache[at].get_or_init(make)
}

/// The link columns as selected, in the names [`link`] reads.
pub(crate) fn select_columns<D: Dialect>() -> &'static str {
    static CACHE: PerBackend = [const { OnceLock::new() }; 3];
    per_backend::<D>(&CACHE, || {
        (LINK.iter())
            .map(|column| D::select_column(column))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The insert's column list for this backend: the link's, its slot, and `url_prefix` where
/// written.
pub(crate) fn insert_columns<D: Dialect>() -> &'static str {
    static CACHE: PerBackend = [const { OnceLock::new() }; 3];
    per_backend::<D>(&CACHE, || {
        (LINK.iter().map(|column| column.name))
            .chain(SLOT_COLUMNS)
            .chain(D::WRITES_URL_PREFIX.then_some(URL_PREFIX_COLUMN))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The placeholder of each of [`link_values`], column by column of [`insert_columns`].
pub(crate) fn link_marks<D: Dialect>() -> Vec<&'static str> {
    (LINK.iter().map(mark::<D>))
        .chain(SLOT_COLUMNS.map(|_| "?"))
        .chain(D::WRITES_URL_PREFIX.then_some("?"))
        .collect()
}

/// `(?, ?, ...)` for one row of [`link_values`].
pub(crate) fn link_placeholders<D: Dialect>() -> String {
    format!("({})", link_marks::<D>().join(", "))
}

/// The values of one link as [`insert_columns`] lists them.
pub(crate) fn link_values<D: Dialect>(link: &Link, slot: Option<crate::model::Slot>) -> Vec<Value> {
    link_values_at::<D>(
        link,
        slot,
        D::time(link.created_at),
        D::time(link.updated_at),
    )
}

/// [`link_values`] with the creation and update times already in their stored form.
pub(crate) fn link_values_at<D: Dialect>(
    link: &Link,
    slot: Option<crate::model::Slot>,
    created_at: Value,
    updated_at: Value,
) -> Vec<Value> {
    let mut values = Vec::with_capacity(LINK.len() + SLOT_COLUMNS.len() + 1);
    values.extend(link_columns::<D>(link, created_at, updated_at));
    values.push(Value::OptInt(slot.map(|s| s.batch_id)));
    values.push(Value::OptInt(slot.map(|s| s.index)));
    if D::WRITES_URL_PREFIX {
        values.push(url_prefix(link));
    }
    values
}

/// `UPDATE links SET ... WHERE code = ?` rewriting every column an update changes (see
/// [`Column::updated`]) to `link`'s values.
pub(crate) fn update_link<D: Dialect>(link: &Link) -> Statement {
    static CACHE: PerBackend = [const { OnceLock::new() }; 3];
    let sql = per_backend::<D>(&CACHE, || {
        let set: Vec<String> = (LINK.iter().filter(|column| column.updated))
            .map(|column| format!("{} = {}", column.name, mark::<D>(column)))
            .chain(D::WRITES_URL_PREFIX.then(|| format!("{URL_PREFIX_COLUMN} = ?")))
            .collect();
        format!("UPDATE links SET {} WHERE code = ?", set.join(", "))
    });
    let columns = link_columns::<D>(link, D::time(link.created_at), D::time(link.updated_at));
    let values = (LINK.iter().zip(columns))
        .filter(|(column, _)| column.updated)
        .map(|(_, value)| value)
        .chain(D::WRITES_URL_PREFIX.then(|| url_prefix(link)))
        .chain([Value::Text(link.code.clone())]);
    statement(sql, values)
}

/// Keys with their workspace; conditions name the key's columns as `k.<column>`.
pub(crate) const API_KEY_SELECT: &str =
    "SELECT k.id, k.name, k.role, k.workspace_id, k.rate_per_second, k.rate_burst, k.key_hash, \
       k.created_at, k.revoked_at, w.slug AS workspace_slug, w.name AS workspace_name, w.suspended_at AS workspace_suspended, \
       w.links_per_day, w.compose_recipients, w.webhooks, w.key_rate_per_second, \
       w.key_rate_burst \
     FROM api_keys k LEFT JOIN workspaces w ON w.id = k.workspace_id";

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend with `AND ...`.
pub(crate) fn select_links<D: Dialect>(filter: &LinkFilter) -> Statement {
    let mut query = Statement::new(format!("SELECT {} FROM links", select_columns::<D>()));
    push_filter::<D>(&mut query, filter);
    query
}

/// Appends `WHERE` conditions for `filter`; callers may add more with `AND`.
pub(crate) fn push_filter<D: Dialect>(query: &mut Statement, filter: &LinkFilter) {
    match filter.workspace() {
        Some(workspace) => {
            query.push(" WHERE workspace_id = ");
            query.bind(Value::Int(workspace.get()));
        }
        None => {
            query.push(" WHERE 1 = 1");
        }
    }
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
    if let Some(text) = &filter.search {
        push_search::<D>(query, text);
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

/// Shortest text the search indexes answer (trigrams): a shorter one matches a whole code,
/// reference or campaign only, which their own indexes find.
pub(crate) const SEARCH_MIN_CHARS: usize = 3;

fn push_search<D: Dialect>(query: &mut Statement, text: &str) {
    let text = text.trim().to_lowercase();
    if text.chars().count() < SEARCH_MIN_CHARS {
        let text = Value::Text(text);
        query.push(" AND (LOWER(code) = ").bind(text.clone());
        query.push(" OR LOWER(recipient_ref) = ").bind(text.clone());
        query.push(" OR LOWER(campaign) = ").bind(text).push(")");
    } else {
        D::push_search(query, &text);
    }
}

/// `%<text>%` for `LIKE ... ESCAPE '!'` (a character no backend's string syntax treats apart,
/// unlike the backslash in MariaDB's): the text's own `%`, `_` and `!` match themselves.
pub(crate) fn like_anywhere(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '!') {
            pattern.push('!');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// `<head> (<values>)`: a comma-separated list of bound values closing the statement.
pub(crate) fn in_list(head: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    let mut query = Statement::new(head);
    push_list(&mut query, values);
    query
}

/// Appends ` (<values>)`.
pub(crate) fn push_list(query: &mut Statement, values: impl IntoIterator<Item = Value>) {
    query.push(" (");
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            query.push(", ");
        }
        query.bind(value);
    }
    query.push(")");
}

pub(crate) fn link<D: Dialect>(row: &Row<D>) -> StorageResult<Link> {
    Ok(Link {
        code: D::read_text(row, "code")?,
        workspace: WorkspaceId::from_db(D::DB::int(row, "workspace_id")?),
        target: D::read_text(row, "target")?,
        url_hash: D::read_text(row, "url_hash")?,
        redirect: checked_redirect(D::DB::int(row, "redirect_status")?)?,
        flags: checked_flags(D::DB::int(row, "flags")?)?,
        created_at: D::read_time(row, "created_at")?,
        updated_at: D::read_time(row, "updated_at")?,
        expires_at: D::read_opt_time(row, "expires_at")?,
        revoked_at: D::read_opt_time(row, "revoked_at")?,
        quarantined_at: D::read_opt_time(row, "quarantined_at")?,
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
            click_id_param: D::read_opt_text(row, "click_id_param")?,
        },
    })
}

/// A row of `SELECT batch_index, <link columns>`.
pub(crate) fn slot_link<D: Dialect>(row: &Row<D>) -> StorageResult<(i64, Link)> {
    Ok((D::DB::int(row, "batch_index")?, link::<D>(row)?))
}

pub(crate) fn api_key<D: Dialect>(row: &Row<D>) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: D::DB::int(row, "id")?,
        name: D::read_text(row, "name")?,
        role: D::read_text(row, "role")?.parse()?,
        workspace: match D::DB::opt_int(row, "workspace_id")? {
            None => None,
            Some(id) => Some(KeyWorkspace {
                id: WorkspaceId::from_db(id),
                slug: D::read_text(row, "workspace_slug")?,
                name: D::read_text(row, "workspace_name")?,
                suspended: D::read_opt_time(row, "workspace_suspended")?.is_some(),
                quotas: crate::workspace::Quotas {
                    links_per_day: quota_read(D::DB::opt_int(row, "links_per_day")?)?,
                    compose_recipients: quota_read(D::DB::opt_int(row, "compose_recipients")?)?,
                    webhooks: quota_read(D::DB::opt_int(row, "webhooks")?)?,
                    key_rate_per_second: quota_read(D::DB::opt_int(row, "key_rate_per_second")?)?,
                    key_rate_burst: quota_read(D::DB::opt_int(row, "key_rate_burst")?)?,
                },
            }),
        },
        rate: match (
            D::DB::opt_int(row, "rate_per_second")?,
            D::DB::opt_int(row, "rate_burst")?,
        ) {
            (Some(per_second), Some(burst)) => Some(KeyRate {
                per_second: u64::try_from(per_second).unwrap_or(0),
                burst: u64::try_from(burst).unwrap_or(1),
            }),
            _ => None,
        },
        key_hash: D::read_text(row, "key_hash")?,
        created_at: D::read_time(row, "created_at")?,
        revoked_at: D::read_opt_time(row, "revoked_at")?,
    })
}

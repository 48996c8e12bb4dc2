//! The columns of `links`: the one list the insert, the update and the select are derived from
//! ([`super::rows`]), and what a [`Dialect`](super::dialect::Dialect) may need to know of one.

/// How a column of `links` is stored, where the backends differ on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    Plain,
    /// Narrower than 64 bits on PostgreSQL (`int2`, `int4`): selected widened.
    SmallInt,
    /// JSON (`jsonb` on PostgreSQL): written with [`Dialect::TAGS_PARAM`](super::Dialect::TAGS_PARAM), selected as text.
    Json,
}

/// A column of `links` that holds part of a [`Link`](shortlink_model::Link).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub(crate) name: &'static str,
    pub(crate) stored: Stored,
    /// Whether an update rewrites it: the code, owner and creation time never change, and the visit
    /// counters are the click path's, not the link's writers'.
    pub(crate) updated: bool,
}

const fn column(name: &'static str, stored: Stored, updated: bool) -> Column {
    Column {
        name,
        stored,
        updated,
    }
}

/// The link's columns, in the order of [`link_values`](super::rows::link_values): the one list the insert, the update and
/// the select are derived from.
pub(crate) const LINK: [Column; 25] = [
    column("code", Stored::Plain, false),
    column("target", Stored::Plain, true),
    column("url_hash", Stored::Plain, true),
    column("redirect_status", Stored::SmallInt, true),
    column("flags", Stored::SmallInt, true),
    column("created_at", Stored::Plain, false),
    column("updated_at", Stored::Plain, true),
    column("expires_at", Stored::Plain, true),
    column("revoked_at", Stored::Plain, true),
    column("visit_count", Stored::Plain, false),
    column("last_visit_at", Stored::Plain, false),
    column("campaign", Stored::Plain, true),
    column("recipient_ref", Stored::Plain, true),
    column("tags", Stored::Json, true),
    column("valid_since", Stored::Plain, true),
    column("not_yet_url", Stored::Plain, true),
    column("expired_url", Stored::Plain, true),
    column("rules", Stored::Plain, true),
    column("max_visits", Stored::Plain, true),
    column("password_digest", Stored::Plain, true),
    column("preview", Stored::Plain, true),
    column("click_id_param", Stored::Plain, true),
    column("quarantined_at", Stored::Plain, true),
    // Derived from the target (`crate::host_key`), never read back: the index quarantines use.
    column("target_host", Stored::Plain, true),
    // Last: the COPY and UNNEST of PostgreSQL's batch name the columns in this order.
    column("workspace_id", Stored::Plain, false),
];

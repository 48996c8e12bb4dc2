//! The rule types as a caller writes them and a read returns them, in a file of their own:
//! [`super::convert`] checks and converts them, and `mod.rs` hands both to the crate.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One rule: when every condition of `if` holds (an empty `if` always does), `then` or `split`
/// answers; exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    #[serde(rename = "if", default)]
    #[schema(rename = "if")]
    pub when: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<TargetSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitSpec>,
}

/// The conditions of a rule; all given ones must hold. Each field is one condition, except
/// `query`, where each entry is one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// Device classes of the `User-Agent`: `ios`, `android`, `desktop`, `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Vec<String>>,
    /// Preferred languages (`Accept-Language`), lower-cased: `pt` holds for `pt-BR` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Vec<String>>,
    /// ISO 3166-1 alpha-2 countries, upper-cased, from the client address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<Vec<String>>,
    /// Query parameters the short URL must carry (each entry is one condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Vec<QuerySpec>>,
    /// Client address ranges: `10.0.0.0/8`, `2001:db8::/32`, or one address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<Vec<String>>,
    /// RFC 3339: clicks at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<DateTime<Utc>>,
    /// RFC 3339: clicks before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weekly: Option<WeeklySpec>,
}

/// A query parameter, with a value or just present; compared percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuerySpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Weekdays and whole hours on the clock of a time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WeeklySpec {
    /// `mon` … `sun`.
    pub days: Vec<String>,
    /// 0 to 23: hour `h` covers h:00 to h:59.
    pub hours: Vec<u8>,
    /// An IANA zone, `Europe/Lisbon`.
    pub zone: String,
}

/// Where a rule sends a click: the same fields as the link's own target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    #[schema(schema_with = crate::schema::url)]
    pub url: String,
    /// 301, 302 (default), 307 or 308.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::schema::redirect)]
    pub redirect: Option<u16>,
    /// Append the short URL's query string (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_query: Option<bool>,
}

/// A weighted split (A/B): `sticky` keeps one person on one variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitSpec {
    #[serde(default)]
    pub sticky: StickySpec,
    pub variants: Vec<VariantSpec>,
}

/// How a split recognises a person (docs/RULES.md, "Sticky splits"): `false` (default) draws per
/// click; `true` follows the link's `ref` if it has one, else a first-party cookie, else the
/// client address and `User-Agent`; `"ref"`, `"cookie"` and `"visitor"` (address and agent)
/// choose one of them (the first two falling back to address and agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StickySpec {
    Flag(bool),
    Mode(StickyMode),
}

impl Default for StickySpec {
    fn default() -> Self {
        StickySpec::Flag(false)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StickyMode {
    Ref,
    Cookie,
    Visitor,
}

/// One arm of a split: a weight and a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// 0 to 65535; the weights of a split must not all be 0.
    pub weight: u16,
    #[schema(schema_with = crate::schema::url)]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::schema::redirect)]
    pub redirect: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_query: Option<bool>,
}

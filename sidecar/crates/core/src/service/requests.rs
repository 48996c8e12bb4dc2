//! A link's fields as a sender writes them, defined once: [`CreateLinkRequest`] is the API's
//! create and batch item, the console's form, a compose recipient's link and an import's row,
//! all checked by [`accept::new_link`]; [`UpdateLinkRequest`] is the API's `PATCH` and the
//! console's edit form, checked by [`UpdateLinkRequest::into_patch`]. So a value one way refuses,
//! every way refuses with the same code and message, and the OpenAPI schema is derived from these
//! same types.

use super::accept::{self, Invalid, PlainPassword};
use super::LinkPatch;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use shortlink_model::link::card::{self, CardSpec};
use shortlink_model::link::rules::RuleSpec;
use shortlink_model::schema::WholeNumber;
use shortlink_model::validate::UrlPolicy;
use utoipa::ToSchema;

/// A new link: only `url` is required.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateLinkRequest {
    /// Absolute http(s) URL; IDN hosts are stored as punycode.
    #[schema(schema_with = shortlink_model::schema::url)]
    pub url: String,
    /// Custom alias (`shortcode::ALIAS_PATTERN`), not of the generated-code shape; generated if
    /// absent.
    #[schema(schema_with = shortlink_model::schema::alias)]
    pub code: Option<String>,
    /// RFC 3339, in the future; fractions of a second are dropped.
    pub expires_at: Option<DateTime<Utc>>,
    /// 301, 302 (default), 307 or 308.
    #[schema(schema_with = shortlink_model::schema::redirect)]
    pub redirect: Option<u16>,
    /// Append the short URL's query string to the target (default false).
    pub forward_query: Option<bool>,
    /// Return the newest live link with the same URL and the same `ref` (or none) (200) instead
    /// of creating one: one recipient's link is never handed to another. Only a link with the
    /// same options (lifecycle, rules, cap, card) is returned, and never one with a password,
    /// nor for a request with one (a password cannot be compared with a stored digest).
    pub idempotent: Option<bool>,
    /// The campaign the link belongs to (1 to 200 characters).
    #[schema(schema_with = shortlink_model::schema::meta)]
    pub campaign: Option<String>,
    /// An opaque recipient reference (1 to 200 characters).
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = shortlink_model::schema::meta)]
    pub recipient_ref: Option<String>,
    /// Free tags (at most 32, each 1 to 64 characters).
    #[schema(schema_with = shortlink_model::schema::tags)]
    pub tags: Option<Vec<String>>,
    /// RFC 3339: before it, clicks go to `not_yet_url` (302) or get a "not yet" page (403).
    pub valid_since: Option<DateTime<Utc>>,
    /// Where clicks before `valid_since` go; validated like `url`.
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub not_yet_url: Option<String>,
    /// Where clicks after `expires_at` go (302) instead of a 410; validated like `url`.
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub expired_url: Option<String>,
    /// Click-time rules, tried in order; the first whose `if` holds answers, else `url` does.
    #[schema(value_type = Option<Vec<RuleSpec>>)]
    pub rules: Option<serde_json::Value>,
    /// At most this many clicks are redirected (1 to 2^53 - 1); the next ones answer like an
    /// expired link (`expired_url` or 410).
    #[schema(schema_with = shortlink_model::schema::max_visits)]
    pub max_visits: Option<WholeNumber>,
    /// A password page first; the right password opens the link. Write-only: stored as a
    /// salted digest, never returned (reads say `password_protected`).
    #[schema(schema_with = shortlink_model::schema::password)]
    pub password: Option<PlainPassword>,
    /// The card messaging apps draw before anyone taps (served by nginx to their fetchers).
    pub preview: Option<CardSpec>,
    /// A query parameter (`[A-Za-z0-9_.-]{1,32}`, e.g. `sl_click`) that nginx appends to the
    /// target with the click's id, which is also the visit's `id` in the feed and on the
    /// webhooks (a landing page sends it back with a conversion).
    #[schema(schema_with = shortlink_model::schema::click_id_param)]
    pub click_id_param: Option<String>,
}

/// Every field is optional; `null` removes an optional one, absence leaves it as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct UpdateLinkRequest {
    #[schema(schema_with = shortlink_model::schema::new_url)]
    pub url: Option<String>,
    /// RFC 3339 in the future, or `null` to remove the expiry.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>, nullable)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    #[schema(schema_with = shortlink_model::schema::redirect)]
    pub redirect: Option<u16>,
    pub forward_query: Option<bool>,
    /// The campaign, or `null` to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::meta)]
    pub campaign: Option<Option<String>>,
    /// The recipient reference, or `null` to remove it.
    #[serde(default, rename = "ref", deserialize_with = "present")]
    #[schema(rename = "ref", schema_with = shortlink_model::schema::meta)]
    pub recipient_ref: Option<Option<String>>,
    /// Replaces the tags (`[]` removes them).
    #[schema(schema_with = shortlink_model::schema::tags)]
    pub tags: Option<Vec<String>>,
    /// RFC 3339, or `null` to open the link now.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>, nullable)]
    pub valid_since: Option<Option<DateTime<Utc>>>,
    /// Validated like `url`, or `null` to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub not_yet_url: Option<Option<String>>,
    /// Validated like `url`, or `null` to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub expired_url: Option<Option<String>>,
    /// Replaces the rules (`[]` or `null` removes them).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<RuleSpec>>, nullable)]
    pub rules: Option<Option<serde_json::Value>>,
    /// A new cap, or `null` to remove it. The clicks counted so far stay counted: the cap is on
    /// clicks ever redirected, so lowering it below them closes the link at once.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::max_visits)]
    pub max_visits: Option<Option<WholeNumber>>,
    /// A new password (replacing any), or `null` to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::password)]
    pub password: Option<Option<PlainPassword>>,
    /// A new card (replacing the old one whole), or `null` to remove it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<CardSpec>, nullable)]
    pub preview: Option<Option<CardSpec>>,
    /// A new click id parameter, or `null` to stop sending the id.
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = shortlink_model::schema::click_id_param)]
    pub click_id_param: Option<Option<String>>,
}

/// `Some(value)` for a present field, `null` included; `#[serde(default)]` gives `None` for absent.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

impl UpdateLinkRequest {
    /// The checked change, each field as a create checks it; `empty_patch` when nothing would
    /// change. A target on one of `own_domains` would loop.
    pub fn into_patch(self, policy: &UrlPolicy, own: &[String]) -> Result<LinkPatch, Invalid> {
        let patch = LinkPatch {
            target: self.url.map(|raw| policy.check(&raw, own)).transpose()?,
            expires_at: self
                .expires_at
                .map(|at| at.map(accept::expiry).transpose())
                .transpose()?,
            redirect: self
                .redirect
                .map(|status| accept::redirect_status(Some(status)))
                .transpose()?,
            forward_query: self.forward_query,
            campaign: self
                .campaign
                .map(|value| accept::meta(value, "invalid_campaign", "campaign"))
                .transpose()?,
            recipient_ref: self
                .recipient_ref
                .map(|value| accept::meta(value, "invalid_ref", "ref"))
                .transpose()?,
            tags: self
                .tags
                .map(|value| accept::tags(Some(value)))
                .transpose()?,
            valid_since: self
                .valid_since
                .map(|at| at.map(accept::valid_since).transpose())
                .transpose()?,
            not_yet_url: self
                .not_yet_url
                .map(|url| accept::lifecycle_url(policy, own, url, "not_yet_url"))
                .transpose()?,
            expired_url: self
                .expired_url
                .map(|url| accept::lifecycle_url(policy, own, url, "expired_url"))
                .transpose()?,
            rules: self
                .rules
                .map(|rules| accept::rules_column(policy, own, rules))
                .transpose()?,
            max_visits: self
                .max_visits
                .map(|cap| cap.map(|n| accept::max_visits(n.0)).transpose())
                .transpose()?,
            password_digest: self
                .password
                .map(|plain| plain.map(accept::password).transpose())
                .transpose()?,
            preview: self
                .preview
                .map(|preview| card::column(policy, own, preview))
                .transpose()?,
            click_id_param: self
                .click_id_param
                .map(|param| param.map(accept::click_id_param).transpose())
                .transpose()?,
        };
        if patch.is_empty() {
            return Err(Invalid::new(
                "empty_patch",
                "give at least one of url, expires_at, redirect, forward_query, campaign, ref, \
                 tags, valid_since, not_yet_url, expired_url, rules, max_visits, password, \
                 preview, click_id_param",
            ));
        }
        Ok(patch)
    }
}

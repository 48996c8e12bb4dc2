//! A stored conversion: what the store writes and reads, and what the rollups count.

use super::input::Money;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

/// A stored conversion, with the click's attributes copied at insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// `cv_` and 28 hex digits (its time, then random): its place in the visit feed.
    pub id: String,
    pub workspace: WorkspaceId,
    pub event_id: String,
    /// The visit's id.
    pub click_id: String,
    pub code: String,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    pub rule: Option<String>,
    pub short_domain: Option<String>,
    pub device: Option<String>,
    pub country: Option<String>,
    pub clicked_at: DateTime<Utc>,
    pub name: String,
    /// (minor units, currency, exponent).
    pub value: Option<(i64, String, u8)>,
    pub converted_at: DateTime<Utc>,
}

impl Conversion {
    /// The value as exact decimal text, and its currency.
    pub fn value_text(&self) -> Option<(String, &str)> {
        (self.value.as_ref())
            .map(|(minor, currency, exponent)| (Money::text(*minor, *exponent), currency.as_str()))
    }
}

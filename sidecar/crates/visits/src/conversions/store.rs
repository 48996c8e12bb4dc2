//! What the conversions keep: the [`ConversionStore`] trait and its records (a conversion, its
//! arm counts). `shortlink-visits-sql` implements it for every backend.

pub use super::conversion::Conversion;
use super::input::{NewConversion, Refusal};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

/// What a `record` did: the conversion stored now, or the one an earlier request with the same
/// `event_id` stored (`duplicate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub conversion: Conversion,
    pub duplicate: bool,
}

/// Whose clicks and conversions a result counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Link(String),
    Campaign(String),
}

/// One answering rule (or variant, or the own target: `None`) of a link or campaign, all time:
/// human clicks and their distinct visitors, conversions and their distinct visitors, and the
/// summed value per currency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArmCounts {
    pub rule: Option<String>,
    pub clicks: i64,
    pub visitors: i64,
    pub conversions: i64,
    pub converting_visitors: i64,
    /// (currency, exponent, minor units summed), by currency.
    pub values: Vec<(String, u8, i64)>,
}

#[async_trait]
pub trait ConversionStore: Send + Sync {
    /// Stores `new` against its click in `workspace`, or answers the conversion an earlier
    /// request with its `event_id` stored. Refused (nothing written) for a click not in the
    /// workspace, before the click, or later than `window` after it.
    async fn record(
        &self,
        workspace: WorkspaceId,
        new: &NewConversion,
        window: Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<Result<Recorded, Refusal>>;

    /// [`ConversionStore::record`] of many at once (an NDJSON batch), answered in order: the
    /// stored ones in one transaction with one feed row. Each answer is what `record` of it
    /// alone would have given, in the order given (a repeat of an `event_id` earlier in the
    /// batch answers that one).
    async fn record_batch(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
        window: Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>>;

    /// The conversions of `ids` (feed ids `cv_…`) still stored, in no order.
    async fn conversions(&self, ids: &[String]) -> StorageResult<Vec<Conversion>>;

    /// Counts per rule of a link or campaign (`name`: only conversions of that name), ordered
    /// by rule with the own target first.
    async fn arm_counts(
        &self,
        workspace: WorkspaceId,
        scope: &Scope,
        name: Option<&str>,
    ) -> StorageResult<Vec<ArmCounts>>;
}

/// Whether a feed id is a conversion's.
pub fn is_conversion_id(id: &str) -> bool {
    id.starts_with("cv_")
}

//! A click webhook subscription: what the API takes, what it shows, and the checks between.

use super::cursor::Cursor;
use super::filter::FeedFilter;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::outbound::address;
use shortlink_model::link::Invalid;
use shortlink_model::schema::WholeNumber;
use shortlink_model::validate::UrlPolicy;
use shortlink_model::WorkspaceId;
use utoipa::ToSchema;

/// Events per POST at most, and the default.
pub const MAX_BATCH_SIZE: u32 = 1000;
const DEFAULT_BATCH_SIZE: u32 = 100;
/// How long a POST waits for more events at most (ms), and the default.
pub const MAX_BATCH_MS: u32 = 60_000;
const DEFAULT_BATCH_MS: u32 = 1000;
/// Campaigns or tags in a filter at most.
const MAX_FILTER: usize = 100;

/// A subscription as created (`POST`) or replaced (`PUT`, every field again).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionRequest {
    /// For people (default: the URL's host).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// Where events are POSTed: `http://` or `https://` (verified against the system's roots or
    /// `--webhook-ca`), on a public address unless the deployment allows private ones.
    #[schema(schema_with = shortlink_model::schema::url)]
    pub url: String,
    /// The HMAC-SHA256 key of `X-Shortlink-Signature`: 16 to 256 visible ASCII characters.
    /// Never shown again (reads show its last 4 characters).
    #[schema(pattern = "^[!-~]{16,256}$")]
    pub secret: String,
    /// Only visits of links in these campaigns, or carrying any of `tags` (both empty: all).
    #[serde(default)]
    #[schema(max_items = 100)]
    pub campaigns: Vec<String>,
    #[serde(default)]
    #[schema(max_items = 100)]
    pub tags: Vec<String>,
    /// Bots and link previews too (default: people only).
    #[serde(default)]
    pub include_bots: bool,
    /// The quarantines and releases of the workspace's links too (`link.quarantined`,
    /// `link.released`), whatever their campaign or tags (default: yes).
    #[serde(default)]
    pub link_events: Option<bool>,
    /// Events per POST at most (default 100).
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub batch_size: Option<WholeNumber>,
    /// How long a POST waits for more events before it goes with fewer, in ms (default 1000;
    /// 0 sends what there is at once).
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 0, maximum = 60000)]
    pub batch_ms: Option<WholeNumber>,
}

/// What a subscription is, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSpec {
    pub name: String,
    pub url: url::Url,
    pub campaigns: Vec<String>,
    pub tags: Vec<String>,
    pub include_bots: bool,
    pub batch_size: u32,
    pub batch_ms: u32,
    pub link_events: bool,
}

/// A stored subscription with its delivery state.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub id: String,
    /// Whose visits it receives; never changes.
    pub workspace: WorkspaceId,
    pub spec: SubscriptionSpec,
    pub secret: String,
    pub created_ms: i64,
    pub revision: i64,
    /// The next event to deliver.
    pub cursor: Cursor,
    pub lease_owner: Option<String>,
    pub lease_until_ms: i64,
    pub delivered: i64,
    pub failing_since_ms: Option<i64>,
    pub attempts: i64,
    pub last_error: Option<String>,
}

impl Subscription {
    /// The visits it delivers: its workspace's, narrowed by its choice.
    pub fn filter(&self) -> FeedFilter {
        let mut filter = FeedFilter::of(self.workspace);
        filter.campaigns = self.spec.campaigns.clone();
        filter.tags = self.spec.tags.clone();
        filter.include_bots = self.spec.include_bots;
        filter.link_events = self.spec.link_events;
        filter
    }
}

/// A subscription as the API shows it: the secret only by its last characters.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubscriptionView {
    /// `wh_` and 16 hex digits.
    pub id: String,
    pub name: String,
    pub url: String,
    /// The secret's last 4 characters, to tell secrets apart.
    pub secret_hint: String,
    pub campaigns: Vec<String>,
    pub tags: Vec<String>,
    pub include_bots: bool,
    pub batch_size: u32,
    pub batch_ms: u32,
    /// Whether it gets the quarantines and releases of the workspace's links.
    pub link_events: bool,
    pub created_at: DateTime<Utc>,
    /// The feed position of the next event to deliver (a `GET /api/v1/visits` cursor).
    pub cursor: String,
    /// Events delivered (acknowledged with a 2xx) so far.
    pub delivered: i64,
    /// Since when deliveries fail (null while they succeed), the attempts since and the last
    /// error.
    pub failing_since: Option<DateTime<Utc>>,
    pub attempts: i64,
    pub last_error: Option<String>,
}

fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

impl From<&Subscription> for SubscriptionView {
    fn from(s: &Subscription) -> Self {
        let hint: String = s
            .secret
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        SubscriptionView {
            id: s.id.clone(),
            name: s.spec.name.clone(),
            url: s.spec.url.to_string(),
            secret_hint: format!("…{hint}"),
            campaigns: s.spec.campaigns.clone(),
            tags: s.spec.tags.clone(),
            include_bots: s.spec.include_bots,
            batch_size: s.spec.batch_size,
            batch_ms: s.spec.batch_ms,
            link_events: s.spec.link_events,
            created_at: time(s.created_ms),
            cursor: s.cursor.to_string(),
            delivered: s.delivered,
            failing_since: s.failing_since_ms.map(time),
            attempts: s.attempts,
            last_error: s.last_error.clone(),
        }
    }
}

/// What the checks of a request need from the deployment.
pub struct Checks<'a> {
    pub policy: &'a UrlPolicy,
    pub own_domains: &'a [String],
    pub allow_private: bool,
}

fn batch_error() -> Invalid {
    Invalid::new(
        "invalid_batch",
        format!("batch_size: 1 to {MAX_BATCH_SIZE}; batch_ms: 0 to {MAX_BATCH_MS}"),
    )
}

impl SubscriptionRequest {
    /// The checked spec and the secret.
    pub fn check(self, checks: &Checks<'_>) -> Result<(SubscriptionSpec, String), Invalid> {
        let target = checks.policy.check(&self.url, checks.own_domains)?;
        let url = url::Url::parse(target.as_str())
            .map_err(|_| Invalid::new("invalid_url", "the url is not a URL"))?;
        if !checks.allow_private {
            if let Some(host) = address::refused_host(&url) {
                return Err(Invalid::new(
                    "private_address",
                    format!("{host} is not a public address; webhooks go to public hosts only"),
                ));
            }
        }
        let name = match self.name {
            Some(name) if !(1..=100).contains(&name.chars().count()) => {
                return Err(Invalid::new("invalid_name", "name: 1 to 100 characters"))
            }
            Some(name) => name,
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let visible = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if !(16..=256).contains(&self.secret.len()) || !visible(&self.secret) {
            return Err(Invalid::new(
                "invalid_secret",
                "secret: 16 to 256 visible ASCII characters",
            ));
        }
        if self.campaigns.len() > MAX_FILTER || self.tags.len() > MAX_FILTER {
            return Err(Invalid::new(
                "invalid_filter",
                format!("campaigns and tags: at most {MAX_FILTER} each"),
            ));
        }
        // Out of range, and beyond u32 too: refused below.
        let number =
            |n: Option<WholeNumber>, default| n.map_or(Ok(default), |n| u32::try_from(n.0));
        let (Ok(batch_size), Ok(batch_ms)) = (
            number(self.batch_size, DEFAULT_BATCH_SIZE),
            number(self.batch_ms, DEFAULT_BATCH_MS),
        ) else {
            return Err(batch_error());
        };
        if !(1..=MAX_BATCH_SIZE).contains(&batch_size) || batch_ms > MAX_BATCH_MS {
            return Err(batch_error());
        }
        let spec = SubscriptionSpec {
            name,
            url,
            campaigns: self.campaigns,
            tags: self.tags,
            include_bots: self.include_bots,
            batch_size,
            batch_ms,
            link_events: self.link_events.unwrap_or(true),
        };
        Ok((spec, self.secret))
    }
}

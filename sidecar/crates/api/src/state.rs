//! What every handler can reach, built once at start-up.

use shortlink_core::service::LinkService;
use shortlink_model::validate::UrlPolicy;
use std::sync::Arc;

/// Largest request body accepted (shortlink_wire::limits::REQUEST_BODY_BYTES).
pub const MAX_BODY_BYTES: usize = shortlink_wire::limits::REQUEST_BODY_BYTES;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub links: Arc<LinkService>,
    pub settings: Arc<HttpSettings>,
    /// Visit statistics (issue 4).
    pub analytics: shortlink_visits::Analytics,
    /// Per-domain health (issue 20): fed by requests, checked by the job.
    pub domains: Arc<shortlink_domains::health::DomainHealth>,
    /// Click webhook subscriptions and the visit feed (issue 36).
    pub webhooks: Arc<shortlink_webhooks::WebhookService>,
    /// Per-key rate limits and workspace quotas (issue 53), shared through Redis.
    pub limits: Arc<shortlink_core::limits::Limits>,
    /// SMS messaging (issue 68): the gateways' policy and secrets, the send jobs this sidecar
    /// holds, the keys receipts' callbacks are checked with.
    pub messaging: Arc<shortlink_messaging::Messaging>,
    /// The callbacks' receipts waiting for their workspace's group commit (issue 68).
    pub receipt_groups: Arc<shortlink_messaging::receipts::group::ReceiptGroups>,
    /// Unknown callback tokens presented per client address (issue 77).
    pub unknown_tokens: Arc<crate::deliveries::callbacks::strikes::UnknownTokens>,
    /// Abuse reports per client address (issue 79).
    pub abuse_reports: Arc<crate::abuse::ReportBudgets>,
}

/// Request-handling settings derived from the configuration once, at start-up.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub url_policy: UrlPolicy,
    /// Fallback base of `short_url`, without a trailing slash.
    pub public_base_url: Option<String>,
    /// Fallback short domains, normalised.
    pub short_domains: Vec<String>,
    /// The client's country, for rules the fallback and the preview evaluate.
    pub countries: Arc<shortlink_visits::countries::Countries>,
    /// What the fallback knows of a capped click's client beyond its request: its network, and
    /// the sweeps this process's consumer noticed.
    pub click_judge: Arc<shortlink_visits::click_judge::ClickJudge>,
    /// Requests carrying it came through nginx ([`super::proxy_secret`]).
    pub proxy_secret: Option<super::proxy_secret::ProxySecret>,
    /// Where the console's imports may fetch from.
    pub import_policy: shortlink_core::outbound::Policy,
    /// The window the domain health check judges clicks over: the console's Domains charts span it.
    pub domain_health_window: std::time::Duration,
    /// `--callback-rate`: callbacks per second per callback token (0: unlimited).
    pub callback_rate: u32,
}

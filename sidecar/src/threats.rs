//! The threat feeds' wiring (issue 79): checked settings, the client that fetches them, the
//! first load before any link is created, and the refresh job.

use shortlink_config::{Config, ConfigError};
use shortlink_core::background::{self, Shutdown};
use shortlink_core::outbound;
use shortlink_core::service::LinkService;
use shortlink_threats::feed::Spec;
use shortlink_threats::normalize;
use shortlink_threats::reputation::{TargetReputation, WebRisk};
use shortlink_threats::{FeedChange, Settings, Threats};
use std::sync::Arc;
use std::time::Duration;

/// The feeds as configured; an unreadable `--threat-feeds` is a configuration error.
pub fn from_config(config: &Config) -> Result<Threats, ConfigError> {
    let flags = &config.threats;
    for (flag, hosts) in [
        ("--threat-shorteners", &flags.threat_shorteners),
        ("--threat-brand-hosts", &flags.threat_brand_hosts),
    ] {
        if let Some(bad) = hosts.iter().find(|host| normalize::host(host).is_none()) {
            return Err(ConfigError::ThreatFeed(format!(
                "{flag}: {bad:?} is not a host name"
            )));
        }
    }
    let feeds = (flags.threat_feeds.iter())
        .map(|spec| spec.parse::<Spec>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ConfigError::ThreatFeed(error.to_string()))?;
    // The operator names the feeds' sources, private ones included (a mirror inside the
    // network): not a user's URL, so not held to the public-address rule.
    let policy = outbound::Policy {
        allow_private: true,
        proxy: config.outbound_proxy.clone(),
        reach: None,
    };
    // A source that hangs holds up the start (the first load) and one refresh, not more.
    let timeout = flags
        .threat_refresh
        .clamp(Duration::from_secs(10), Duration::from_secs(300));
    let client = policy
        .client(None, "--threat-feeds")
        .and_then(|builder| {
            (builder
                .connect_timeout(Duration::from_secs(10))
                .timeout(timeout)
                .build())
            .map_err(|error| error.to_string())
        })
        .map_err(ConfigError::ThreatFeed)?;
    let reputation = (flags.threat_webrisk_key.clone()).map(|key| {
        Arc::new(WebRisk::new(client.clone(), WebRisk::ENDPOINT, key)) as Arc<dyn TargetReputation>
    });
    let settings = Settings {
        feeds,
        refresh_every: flags.threat_refresh,
        max_bytes: flags.threat_max_bytes,
        shorteners: flags.threat_shorteners.clone(),
        brand_hosts: flags.threat_brand_hosts.clone(),
    };
    Ok(Threats::new(settings, client, reputation))
}

/// The feeds loaded once (before any link can be created: a feed that fails keeps failing in
/// the log and its metrics until a refresh succeeds, and does not stop the start).
pub async fn first_load(threats: Threats) -> Arc<Threats> {
    let threats = Arc::new(threats);
    shortlink_core::metrics::install();
    threats.publish_metrics();
    threats.refresh().await;
    threats
}

/// Refreshes the feeds every `--threat-refresh` until shutdown (the first load was done at
/// start-up, before any link could be created).
pub async fn refresh_every(threats: Arc<Threats>, mut shutdown: Shutdown) {
    tokio::select! {
        () = threats.run() => {}
        () = background::fired(&mut shutdown) => {}
    }
}

/// Quarantines the links each feed change lists, and ends the quarantines of entries a feed no
/// longer lists, as the refreshes report them (the first load's included), until shutdown. The
/// host keys of links stored before they existed are written first, so the sweeps find them.
pub async fn quarantine_as_feeds_change(
    links: Arc<LinkService>,
    threats: Arc<Threats>,
    mut shutdown: Shutdown,
) {
    let sweeps = async {
        match links.fill_host_keys().await {
            Ok(0) => {}
            Ok(filled) => tracing::info!(filled, "host keys written for links stored before them"),
            Err(error) => tracing::error!(%error, "host keys of older links not written"),
        }
        loop {
            for change in threats.changes().await {
                sweep(&links, &threats, &change).await;
            }
        }
    };
    tokio::select! {
        () = sweeps => {}
        () = background::fired(&mut shutdown) => {}
    }
}

/// One change's sweep, tried again after a pause while the database or Redis fails.
async fn sweep(links: &LinkService, threats: &Threats, change: &FeedChange) {
    let feed = change.feed.as_str();
    loop {
        let done = async {
            links.quarantine_added(change).await?;
            links
                .end_unlisted(feed, |entry| threats.lists(feed, entry))
                .await
        };
        match done.await {
            Ok(0) => return,
            Ok(ended) => {
                tracing::info!(
                    feed,
                    ended,
                    "quarantines ended: the feed no longer lists their entry"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(feed, %error, "quarantine sweep failed; trying again in 5 s");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// The domains' health state (which also learns each workspace's domains from the issuing list
/// nginx sends) and, over it, each workspace's domains for the look-alike check.
pub fn own_domains(
    config: &Config,
    short_domains: &[String],
    public_base_url: Option<&str>,
) -> (
    Arc<shortlink_domains::health::DomainHealth>,
    Arc<dyn shortlink_core::service::OwnDomains>,
) {
    use shortlink_domains::health::{ClickCurve, DomainHealth};
    let curve =
        ClickCurve::new(config.domain_health_click_half_life).horizon(config.domain_health_window);
    let health = Arc::new(DomainHealth::new(curve));
    let own = WorkspaceDomains::new(Arc::clone(&health), short_domains, public_base_url);
    (health, Arc::new(own))
}

/// Each workspace's short domains for the look-alike check: the issuing list nginx publishes,
/// and for the default workspace the configured ones (`--short-domains`, the public base URL's
/// host), as the receipts' `foreign_domain` check reads them.
struct WorkspaceDomains {
    health: Arc<shortlink_domains::health::DomainHealth>,
    configured: Vec<String>,
}

impl WorkspaceDomains {
    fn new(
        health: Arc<shortlink_domains::health::DomainHealth>,
        short_domains: &[String],
        public_base_url: Option<&str>,
    ) -> Self {
        let base = public_base_url.and_then(|base| url::Url::parse(base).ok());
        let base_host = base.and_then(|url| url.host_str().map(str::to_ascii_lowercase));
        let configured = short_domains.iter().cloned().chain(base_host).collect();
        Self { health, configured }
    }
}

impl shortlink_core::service::OwnDomains for WorkspaceDomains {
    fn of(&self, slug: &str) -> Vec<String> {
        let mut domains = self.health.domains_of(slug);
        if slug == shortlink_domains::issuing::DEFAULT_WORKSPACE {
            domains.extend(self.configured.iter().cloned());
        }
        domains
    }
}

//! The visit pipeline's second half: the consumer of the `sl:events` stream the nginx module
//! writes, the store and rollups behind the stats API, and the scheduled cleanup jobs. The first
//! half, enrichment (agent, audience, geo, referrer, privacy), is the pure `shortlink-visit-enrich`
//! crate; the stats API's handlers are `http::stats`.
//!
//! - [`consumer`]: consumer group reader → enrichment → one transaction per batch → XACK;
//! - [`rollup`]: what a batch adds to the hourly/daily aggregates (pure);
//! - [`store`]: the [`store::VisitStore`] trait the stats API reads and the consumer writes
//!   through, and every other store of the same database as a trait (`shortlink-visits-sql`
//!   implements them all);
//! - [`cleanup`]: idle-link expiry and raw-visit retention.
//!
//! Nothing here is on the redirect path: nginx only appends to a Redis stream.

#![deny(unsafe_code)]

pub mod cleanup;
pub mod click_judge;
pub mod consumer;
pub mod conversions;
pub mod countries;
pub mod deliveries;
pub mod domain_chart;
pub mod hindsight;
pub mod orphans;
pub mod retention;
pub mod rollup;
pub mod store;
pub mod subjects;

use cleanup::CleanupSettings;
use consumer::{Consumer, ConsumerError, ConsumerSettings, NoticedSweeps};
use shortlink_config::Config;
use shortlink_core::background::Tasks;
use shortlink_core::primary::Primary;
use shortlink_core::service::LinkService;
use shortlink_visit_enrich::{Enricher, GeoDb, GeoError};
use shortlink_wire::network::{AsnTable, HostingList, Networks};
use std::sync::Arc;
use std::time::Duration;
use store::VisitStore;

/// What the stats API needs.
#[derive(Clone)]
pub struct Analytics {
    pub store: Arc<dyn VisitStore>,
    /// `--count-bots`: bots and previews count as clicks unless a request says otherwise.
    pub count_bots: bool,
    /// `--attribution-window`: how long after its click a conversion is still the click's.
    pub attribution_window: chrono::Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyticsError {
    #[error(transparent)]
    Geo(#[from] GeoError),
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    #[error("--consumer-batch must be between 1 and 10000")]
    Batch,
    #[error("--hosting-networks {0}")]
    Networks(String),
}

/// The geo databases: a missing file leaves its part of geo empty (logged); one that exists but
/// cannot be read is an error.
pub fn open_geo(config: &Config) -> Result<GeoDb, GeoError> {
    let mut geo = match &config.geoip_db {
        None => GeoDb::disabled(),
        Some(path) => {
            let geo = GeoDb::open_or_disabled(path)?;
            if !geo.is_enabled() {
                tracing::warn!(path = %path.display(), "geo database not found; geo fields stay empty");
            }
            geo
        }
    };
    let optional = |attached: Result<(), GeoError>, what: &str| match attached {
        Err(error) if error.is_missing() => {
            tracing::warn!(path = %error.path.display(), "{what} not found; left out");
            Ok(())
        }
        other => other,
    };
    if let Some(path) = &config.geoip_db_ipv6 {
        optional(geo.attach_ipv6_db(path), "IPv6 geo database")?;
    }
    if let Some(path) = &config.geoip_isp_db {
        optional(geo.attach_isp_db(path), "ISP database")?;
    }
    Ok(geo)
}

pub fn enricher(config: &Config) -> Result<Enricher, AnalyticsError> {
    let enricher = Enricher::new(open_geo(config)?, config.anonymize_ip);
    Ok(enricher.with_networks(networks(config)?))
}

/// The hosting networks (the shipped list and `--hosting-networks`) and the ASN table
/// (`--geoip-asn-dir`; a directory without the files leaves it out, logged, as a missing geo
/// database does). A file that cannot be read or parsed refuses the start, naming the flag.
pub fn networks(config: &Config) -> Result<Networks, AnalyticsError> {
    let list = hosting_list(config)?;
    let asns = match &config.visit_signals.geoip_asn_dir {
        None => AsnTable::default(),
        Some(dir) => AsnTable::from_dir(dir).unwrap_or_else(|error| {
            tracing::warn!(%error, "ASN table not read; networks judged by their blocks only");
            AsnTable::default()
        }),
    };
    Ok(Networks::new(asns, list))
}

/// The fallback's judge of capped clicks' clients ([`click_judge::ClickJudge`]): the hosting
/// list as [`hosting_list`] reads it, the ASN table read on its first capped click.
pub fn click_judge(config: &Config) -> Result<click_judge::ClickJudge, AnalyticsError> {
    let asn_dir = config.visit_signals.geoip_asn_dir.clone();
    Ok(click_judge::ClickJudge::new(asn_dir, hosting_list(config)?))
}

/// The shipped hosting list with the operator's `--hosting-networks` file (`check-config` reads
/// it too): a file that cannot be read or parsed is an error naming the flag and the line.
pub fn hosting_list(config: &Config) -> Result<HostingList, AnalyticsError> {
    let mut list = HostingList::shipped();
    if let Some(path) = &config.visit_signals.hosting_networks {
        let text = std::fs::read_to_string(path)
            .map_err(|e| AnalyticsError::Networks(format!("{}: {e}", path.display())))?;
        (list.extend(&text))
            .map_err(|e| AnalyticsError::Networks(format!("{}: {e}", path.display())))?;
    }
    Ok(list)
}

pub fn consumer_settings(config: &Config) -> Result<ConsumerSettings, AnalyticsError> {
    if !(1..=10_000).contains(&config.consumer_batch) {
        return Err(AnalyticsError::Batch);
    }
    let mut settings = ConsumerSettings::new(
        config
            .consumer_name
            .clone()
            .unwrap_or_else(consumer::default_name),
    );
    settings.batch = config.consumer_batch;
    settings.claim_after = config.consumer_claim_after;
    settings.count_bots = config.count_bots;
    Ok(settings)
}

pub fn cleanup_settings(config: &Config) -> CleanupSettings {
    CleanupSettings {
        expire_idle_after: config.expire_idle_after,
        visit_retention: config.visit_retention,
    }
}

/// A consumer for the configured Redis and database.
pub fn consumer(config: &Config, store: Arc<dyn VisitStore>) -> Result<Consumer, AnalyticsError> {
    Ok(ConsumerParts::from_config(config)?.build(store))
}

/// What a consumer is made of besides its store, each checked against the configuration: the
/// Redis it reads (`--redis-url`, Sentinel or a cluster) parsed once, here.
struct ConsumerParts {
    primary: Primary,
    enricher: Arc<Enricher>,
    settings: ConsumerSettings,
}

impl ConsumerParts {
    fn from_config(config: &Config) -> Result<Self, AnalyticsError> {
        let settings = consumer_settings(config)?;
        let enricher = Arc::new(enricher(config)?);
        let primary = Primary::from_config(config).map_err(ConsumerError::from)?;
        Ok(ConsumerParts {
            primary,
            enricher,
            settings,
        })
    }

    fn build(self, store: Arc<dyn VisitStore>) -> Consumer {
        Consumer::from_primary(self.primary, store, self.enricher, self.settings)
    }

    /// [`Self::build`], publishing the sweeps it notices into `noticed` too (the fallback's).
    fn build_sharing(self, store: Arc<dyn VisitStore>, noticed: NoticedSweeps) -> Consumer {
        self.build(store).sharing_sweeps(noticed)
    }
}

/// The visit pipeline's background jobs as configured: the consumer (for `serve` unless
/// `--consumer false`; always for `consume`) and the cleanup jobs (always: retention policies may be set at any time). Made from the
/// configuration before anything is opened, so a wrong setting stops the start-up first.
pub struct VisitJobs {
    consumer: Option<ConsumerParts>,
    cleanup: Option<(CleanupSettings, Duration)>,
}

impl VisitJobs {
    pub fn from_config(config: &Config, with_consumer: bool) -> Result<Self, AnalyticsError> {
        let consumer = match with_consumer {
            true => Some(ConsumerParts::from_config(config)?),
            false => None,
        };
        let cleanup = cleanup_settings(config);
        Ok(VisitJobs {
            consumer,
            // Always: workspaces and campaigns may set retention policies at any time.
            cleanup: Some((cleanup, config.cleanup_every)),
        })
    }

    /// Starts the jobs among `tasks`. On shutdown the consumer finishes its batch in progress
    /// (or leaves it pending, never half-counted) and a cleanup run in progress finishes,
    /// within the drain bound of [`Tasks::shutdown`]. Cannot fail: the settings were checked by
    /// [`Self::from_config`] (the Redis to read parsed there, once). The sweeps the consumer
    /// notices go into `noticed` as well: the fallback of this process reads them
    /// ([`click_judge::ClickJudge::sweeps`]).
    pub fn spawn(
        self,
        tasks: &mut Tasks,
        links: Arc<LinkService>,
        store: Arc<dyn VisitStore>,
        noticed: NoticedSweeps,
    ) {
        if let Some(parts) = self.consumer {
            let consumer = parts.build_sharing(Arc::clone(&store), noticed);
            self::consumer::register(consumer.counters());
            tasks.spawn("visit consumer", |shutdown| consumer.run(shutdown));
        }
        if let Some((settings, every)) = self.cleanup {
            tasks.spawn("visit cleanup", move |shutdown| {
                cleanup::run(settings, every, links, store, shutdown)
            });
        }
    }
}

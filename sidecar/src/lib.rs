//! The shortlink sidecar: issues short codes, keeps links in SQL (the source of truth) and writes
//! them through to Redis in the form the nginx module reads (docs/ARCHITECTURE.md).
//!
//! This crate is the top of the sidecar's crates (sidecar/README.md "Crates"): the subcommands
//! ([`cli`]), the operator's pages under `/console/` ([`console`]), the `--config` file
//! ([`config_file`]), and the wiring below: settings checked first (`Checked`), then the state
//! built from them, then the server and the background jobs started on one `background::Tasks`.
//! Everything else lives in the crates below it, each under its own name.

// No module here calls C; the one that does (the SQLite visit batch write) is in
// `shortlink-visits`, which allows it for that module alone.
#![deny(unsafe_code)]

pub mod audit_retention;
pub mod cli;
pub mod config_file;
pub mod console;
mod threats;

use shortlink_api::{AppState, HttpSettings};
use shortlink_config::{Config, ConfigError};
use shortlink_core::code_scheme;
use shortlink_core::issuer::Issuer;
use shortlink_core::primary::{self, Primary};
use shortlink_core::projection::marker::ProjectionMarker;
use shortlink_core::projection::{self, Projection, ProjectionError};
use shortlink_core::service::LinkService;
use shortlink_model::validate::{self, UrlPolicy};
use shortlink_store::{Backend, ConnectOptions, Storage, StorageError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("redis: {0}")]
    Redis(#[from] ProjectionError),
    #[error(transparent)]
    CodeScheme(#[from] code_scheme::SchemeCheckError),
    #[error("analytics: {0}")]
    Analytics(#[from] shortlink_visits::AnalyticsError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Opens the database named in the configuration (applying migrations). On SQLite a pool wait
/// past `--db-timeout` is tried again for up to a minute (issue 82): the file is there, and on a
/// loaded machine opening the first connections can outlast a short timeout, which a starting
/// sidecar should wait out rather than exit. A server database's pool times out the same way when
/// the server refuses connections, so there it still fails at once.
pub async fn open_storage(config: &Config) -> Result<Arc<dyn Storage>, StorageError> {
    let options = ConnectOptions::from_config(config);
    let patient = Backend::from_url(&options.url) == Some(Backend::Sqlite);
    let deadline = tokio::time::Instant::now() + STARTUP_PATIENCE;
    loop {
        match shortlink_store::connect(&options).await {
            Err(StorageError::Unavailable(sqlx::Error::PoolTimedOut))
                if patient && tokio::time::Instant::now() < deadline =>
            {
                tracing::warn!("database: no connection within --db-timeout; trying again");
            }
            answer => return answer,
        }
    }
}

/// How long a start waits out a database too busy to hand it a connection.
const STARTUP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// The write-through to the primary (`--redis-url`, or the one Sentinel names), with `WAIT` for
/// `--redis-wait-replicas`.
pub fn open_projection(config: &Config) -> Result<Projection, ProjectionError> {
    Ok(projection_on(Primary::from_config(config)?, config))
}

fn projection_on(primary: Primary, config: &Config) -> Projection {
    Projection::with_primary(
        primary,
        config.redis_timeout,
        projection::Wait::new(config.redis_wait_replicas, config.redis_wait_timeout),
    )
}

/// The settings the API is wired with, each checked: a configuration error is found here,
/// before a database is opened, a migration applied or Redis touched.
struct Checked {
    scheme: shortcode::CodeScheme,
    public_base_url: Option<String>,
    short_domains: Vec<String>,
    url_policy: UrlPolicy,
    threats: shortlink_threats::Threats,
    webhooks: shortlink_webhooks::WebhookSettings,
    proxy_secret: Option<shortlink_api::proxy_secret::ProxySecret>,
    /// The write-through's and the marker's ways to the primary, each its own (a `Primary`
    /// counts the promotions its user has seen).
    projection_primary: Primary,
    marker_primary: Primary,
    /// The rate limits' and quotas' own way to the primary.
    limits_primary: Primary,
}

impl Checked {
    fn from_config(config: &Config) -> Result<Self, StartupError> {
        let scheme = config.code_scheme()?;
        if !(1..=1_000_000).contains(&config.sequence_block) {
            return Err(ConfigError::SequenceBlock.into());
        }
        let public_base_url = config
            .public_base_url
            .as_deref()
            .map(validate::public_base)
            .transpose()
            .map_err(ConfigError::PublicBase)?;
        let short_domains = validate::normalize_hosts(&config.short_domains).map_err(|value| {
            ConfigError::Host {
                flag: "--short-domains",
                value,
            }
        })?;
        let url_policy = UrlPolicy::new(
            config.max_url_length,
            &config.allow_hosts,
            &config.block_hosts,
        )
        .map_err(|value| ConfigError::Host {
            flag: "--allow-hosts/--block-hosts",
            value,
        })?;
        if config
            .bootstrap_api_key
            .as_ref()
            .is_some_and(|key| key.trim().len() < 32)
        {
            return Err(ConfigError::BootstrapKey.into());
        }
        primary::check_cluster_seeds(config)?;
        Ok(Checked {
            scheme,
            public_base_url,
            short_domains,
            url_policy,
            threats: threats::from_config(config)?,
            webhooks: shortlink_webhooks::WebhookSettings::from_config(config)?,
            proxy_secret: shortlink_api::proxy_secret::ProxySecret::from_config(config)?,
            projection_primary: Primary::from_config(config)?,
            marker_primary: Primary::from_config(config)?,
            limits_primary: Primary::from_config(config)?,
        })
    }
}

/// Everything the API needs, from the configuration: checks settings, opens the database
/// (migrations, bootstrap key) and prepares the Redis connection (made lazily: Redis may be down).
pub async fn build_state(config: &Config) -> Result<AppState, StartupError> {
    let listening: Vec<SocketAddr> = std::iter::once(config.listen)
        .chain(config.metrics_listen)
        .collect();
    wire_state(config, Checked::from_config(config)?, &listening).await
}

/// [`build_state`] once the settings are checked: what fails here is the database, Redis or
/// the data (the code scheme), not a setting.
/// `listening`: this process's listeners, which its gateways never reach.
async fn wire_state(
    config: &Config,
    checked: Checked,
    listening: &[SocketAddr],
) -> Result<AppState, StartupError> {
    let Checked {
        scheme,
        public_base_url,
        short_domains,
        url_policy,
        threats,
        webhooks: webhook_settings,
        proxy_secret,
        projection_primary,
        marker_primary,
        limits_primary,
    } = checked;
    let storage = open_storage(config).await?;
    // Before any data write: a wrong secret must not issue a single code or touch Redis.
    code_scheme::check_database(storage.as_ref(), &scheme, config).await?;
    let marker = ProjectionMarker::with_primary(marker_primary, config);
    cluster_seeds_answer(config, &marker).await?;
    code_scheme::check_redis(&marker, &scheme, config).await?;
    store_bootstrap_key(config, storage.as_ref()).await?;
    let projection = Arc::new(projection_on(projection_primary, config));
    if projection.primary().is_cluster() {
        // A cluster connection learns the slot map and connects to every primary: done now,
        // not within the first create's `--redis-timeout`.
        if let Err(error) = projection.ping().await {
            tracing::warn!(%error, "redis cluster: first connection failed; retried per request");
        }
    }
    let issuer = Issuer::new(
        scheme,
        Arc::clone(&storage),
        Arc::clone(&projection),
        config.sequence_block,
    );
    let links = LinkService::new(
        storage,
        projection,
        issuer,
        config.expired_grace,
        config.db_timeout,
    )
    .with_threats(threats::first_load(threats).await);
    let (domain_health, own_domains) =
        threats::own_domains(config, &short_domains, public_base_url.as_deref());
    let links = links.with_own_domains(own_domains);
    // The binary alone knows the stores are SQL (crates/visits-sql): every crate above calls
    // their traits.
    let stores = shortlink_visits_sql::open(config).await?;
    let analytics = shortlink_visits::Analytics {
        store: Arc::clone(&stores.visits),
        count_bots: config.count_bots,
        attribution_window: chrono::Duration::from_std(config.attribution_window)
            .unwrap_or(chrono::Duration::MAX),
    };
    let messaging = messaging(config, &analytics, links.storage(), listening).await?;
    let webhooks = shortlink_webhooks::WebhookService::new(
        stores,
        Arc::clone(links.storage()),
        url_policy.clone(),
        short_domains.clone(),
        &webhook_settings,
    );
    Ok(AppState {
        links: Arc::new(links),
        analytics,
        webhooks: Arc::new(webhooks),
        limits: Arc::new(shortlink_core::limits::Limits::new(
            limits_primary,
            config.redis_timeout,
            shortlink_core::limits::LimitSettings::from_config(config),
        )),
        domains: domain_health,
        settings: Arc::new(HttpSettings {
            url_policy,
            public_base_url,
            short_domains,
            countries: Arc::new(shortlink_visits::countries::Countries::new(
                config.geoip_db.clone(),
                config.geoip_db_ipv6.clone(),
            )),
            click_judge: Arc::new(shortlink_visits::click_judge(config)?),
            proxy_secret,
            import_policy: shortlink_core::outbound::Policy::imports(config),
            domain_health_window: config.domain_health_window,
            callback_rate: config.callback_rate,
        }),
        messaging: Arc::new(messaging),
        receipt_groups: Arc::default(),
        unknown_tokens: Arc::default(),
        abuse_reports: Arc::default(),
    })
}

/// With --redis-cluster, one seed answers: a cluster client needs a seed to learn the slot map
/// from, without one it cannot write a single link, and a wrong seed list is the likeliest reason.
async fn cluster_seeds_answer(
    config: &Config,
    marker: &ProjectionMarker,
) -> Result<(), StartupError> {
    if config.redis_cluster.is_empty() {
        return Ok(());
    }
    if let Err(error) = marker.value().await {
        let seeds = config.redis_cluster.join(",");
        let seeds = shortlink_config::redact::redact_url(&seeds);
        return Err(ConfigError::Cluster(format!("no seed answered ({seeds}): {error}")).into());
    }
    Ok(())
}

/// SMS messaging's part of the state. The gateways' secrets in SQL are sealed with a key from
/// the code secret: Twilio auth tokens written before they were sealed are sealed now, once per
/// row (a failure leaves them readable as they were: the next start seals them).
async fn messaging(
    config: &Config,
    analytics: &shortlink_visits::Analytics,
    storage: &Arc<dyn shortlink_store::Storage>,
    listening: &[SocketAddr],
) -> Result<shortlink_messaging::Messaging, StartupError> {
    use shortlink_messaging::sealed::{reseal, Sealer};
    let code_secret = config.code_secret()?;
    let sealer = Arc::new(Sealer::new(&code_secret));
    match reseal(analytics.store.callback_tokens(), &sealer).await {
        Ok(0) => {}
        Ok(sealed) => tracing::info!(sealed, "Twilio auth tokens sealed"),
        Err(error) => tracing::warn!(%error, "Twilio auth tokens could not be sealed"),
    }
    Ok(shortlink_messaging::Messaging {
        store: Arc::clone(&analytics.store),
        storage: Arc::clone(storage),
        sends: shortlink_messaging::gateway::sends::Sends::new(config.gateway_lease),
        policy: shortlink_core::outbound::Policy::gateways(config, listening),
        secrets_dir: config.gateway_secrets_dir.clone(),
        dlr_key: shortlink_messaging::DlrKey::derive(&code_secret),
        sealer,
    })
}

/// Stores `--bootstrap-api-key` (its hash), audited, unless it is stored already.
async fn store_bootstrap_key(
    config: &Config,
    storage: &dyn shortlink_store::Storage,
) -> Result<(), StartupError> {
    if let Some(key) = &config.bootstrap_api_key {
        let hash = shortlink_api::hash_api_key(key.trim());
        if storage
            .ensure_api_key("bootstrap", &hash, shortlink_store::now())
            .await?
        {
            tracing::info!("bootstrap API key stored");
            // Its name only: the key is the operator's secret.
            let changes = shortlink_store::audit::Changes::new().set("name", "bootstrap");
            let actor = shortlink_store::audit::Actor::system("startup (--bootstrap-api-key)");
            let entry =
                shortlink_store::audit::AuditEntry::new(actor, "key.create", "bootstrap", changes);
            storage.append_audit(&entry).await?;
        }
    }
    Ok(())
}

/// The background work of a server, as configured and checked before anything is opened.
struct Jobs {
    /// `None` with `--domain-health-every 0` (the click counts are still forgotten hourly).
    health: Option<shortlink_domains::health::HealthSettings>,
    /// The deliverer's client; `None` with `--webhooks false`.
    delivery: Option<(
        shortlink_webhooks::client::Sender,
        shortlink_webhooks::WebhookSettings,
    )>,
    /// A serving sidecar's own jobs; `None` for [`Application::build`].
    serving: Option<ServingJobs>,
    /// The drain on receipts' own way to the primary (the counts every sidecar shares).
    receipts_primary: Primary,
}

/// What `serve` runs beside the API and the jobs every server has.
struct ServingJobs {
    /// The visit consumer (unless `--consumer false`) and the cleanup jobs (when configured).
    visits: shortlink_visits::VisitJobs,
    /// The projection marker's keeper, on its own way to the primary.
    keeper_primary: Primary,
}

impl Jobs {
    fn from_config(
        config: &Config,
        checked: &Checked,
        serving: bool,
    ) -> Result<Self, StartupError> {
        let health = shortlink_domains::health::HealthSettings::from_config(
            config,
            checked.short_domains.clone(),
        )?;
        let delivery = match checked.webhooks.deliver {
            true => Some((
                shortlink_webhooks::client::Sender::new(&checked.webhooks)
                    .map_err(ConfigError::ClickWebhooks)?,
                checked.webhooks.clone(),
            )),
            false => None,
        };
        let serving = match serving {
            true => Some(ServingJobs {
                visits: shortlink_visits::VisitJobs::from_config(config, config.consumer)?,
                keeper_primary: Primary::from_config(config)?,
            }),
            false => None,
        };
        Ok(Jobs {
            health: (!config.domain_health_every.is_zero()).then_some(health),
            delivery,
            serving,
            receipts_primary: Primary::from_config(config)?,
        })
    }

    /// Starts every job among `tasks`, on the wired `state`: nothing left to refuse, every
    /// setting was checked in [`Self::from_config`].
    fn spawn(
        self,
        tasks: &mut shortlink_core::background::Tasks,
        config: &Config,
        state: &AppState,
    ) {
        let visits = Arc::clone(&state.analytics.store);
        match self.health {
            Some(settings) => {
                let health = Arc::clone(&state.domains);
                let visits = Arc::clone(&visits);
                let storage = Arc::clone(state.links.storage());
                // The drain on receipts sends its webhooks through the health job's.
                if let Some(rule) = shortlink_domains::receipt_drain::rule_from_config(config) {
                    let health = Arc::clone(&health);
                    let storage = Arc::clone(&storage);
                    let shared = shortlink_domains::receipt_share::SharedCounts::new(
                        self.receipts_primary,
                        config.redis_timeout,
                    );
                    tasks.spawn("domain receipts", move |shutdown| {
                        shortlink_domains::receipt_drain::run(
                            health, storage, rule, shared, shutdown,
                        )
                    });
                }
                tasks.spawn("domain health", move |shutdown| {
                    shortlink_domains::health_job::run(health, settings, visits, storage, shutdown)
                });
            }
            None => {
                let visits = Arc::clone(&visits);
                tasks.spawn("domain click counts", move |shutdown| {
                    shortlink_domains::health_job::forget_old_clicks_hourly(visits, shutdown)
                });
            }
        }
        let messaging = Arc::clone(&state.messaging);
        tasks.spawn("gateway sends", |shutdown| {
            shortlink_messaging::gateway::runner::run(messaging, shutdown)
        });
        if let Some((sender, settings)) = self.delivery {
            let delivery = shortlink_webhooks::deliver::Deliverer::with_sender(
                state.webhooks.stores().clone(),
                sender,
                settings,
            );
            tasks.spawn("webhook delivery", |shutdown| delivery.run(shutdown));
        }
        if let Some(feeds) = state.links.threats() {
            let refreshed = Arc::clone(feeds);
            tasks.spawn("threat feeds", move |shutdown| {
                threats::refresh_every(refreshed, shutdown)
            });
            let (links, feeds) = (Arc::clone(&state.links), Arc::clone(feeds));
            tasks.spawn("quarantines", move |shutdown| {
                threats::quarantine_as_feeds_change(links, feeds, shutdown)
            });
        }
        let Some(serving) = self.serving else {
            return;
        };
        let links = &state.links;
        let noticed = state.settings.click_judge.sweeps();
        serving
            .visits
            .spawn(tasks, Arc::clone(links), visits, noticed);
        // Refills Redis from SQL whenever it lost its data (projection::marker).
        let keeper = projection::marker::Keeper::new(
            ProjectionMarker::with_primary(serving.keeper_primary, config),
            config,
            Arc::clone(links.storage()),
            Arc::clone(links.projection()),
        );
        tasks.spawn("projection marker keeper", |shutdown| keeper.run(shutdown));
        let (links, retention) = (Arc::clone(links), config.idempotency_retention);
        tasks.spawn("idempotency key pruner", move |shutdown| {
            shortlink_core::service::prune_idempotency_keys_every(links, retention, shutdown)
        });
        if !config.audit_retention.is_zero() {
            let (storage, retention) = (Arc::clone(state.links.storage()), config.audit_retention);
            let every = config.cleanup_every;
            tasks.spawn("audit log pruner", move |shutdown| {
                audit_retention::prune_every(storage, retention, every, shutdown)
            });
        }
    }
}

/// A built server with its listener bound (so the port is known before it runs) and its
/// background work started.
pub struct Application {
    listener: tokio::net::TcpListener,
    /// The operator's (`--metrics-listen`), apart from the API's.
    metrics_listener: Option<tokio::net::TcpListener>,
    state: AppState,
    /// The background work, stopped after the requests in flight (see [`Self::run_until`]).
    tasks: shortlink_core::background::Tasks,
}

impl Application {
    /// The API with the domain health checks and webhook delivery, as the tests run it (no visit
    /// consumer, no marker keeper).
    pub async fn build(config: &Config) -> Result<Self, StartupError> {
        Self::build_with(config, false).await
    }

    /// The server as `serve` runs it: [`Self::build`]'s, plus the visit consumer (unless
    /// `--consumer false`) and cleanup jobs, the projection marker's keeper and the idempotency
    /// key pruner.
    pub async fn build_serving(config: &Config) -> Result<Self, StartupError> {
        Self::build_with(config, true).await
    }

    async fn build_with(config: &Config, serving: bool) -> Result<Self, StartupError> {
        // Every setting checked before anything is opened.
        let checked = Checked::from_config(config)?;
        let jobs = Jobs::from_config(config, &checked, serving)?;
        if checked.proxy_secret.is_none() {
            tracing::warn!(
                "no --proxy-secret: X-Shortlink-Pool and X-Shortlink-Public-Base add no domain to \
                 the health checks (only --short-domains and --public-base-url are checked)"
            );
        }
        // Bound first: their addresses (a port 0 picked) are what the gateways never reach.
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartupError::Listen {
                addr: config.listen,
                source,
            })?;
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| StartupError::Listen { addr, source })?,
            ),
            None => None,
        };
        let listening: Vec<SocketAddr> = std::iter::once(listener.local_addr())
            .chain(metrics_listener.as_ref().map(|l| l.local_addr()))
            .collect::<Result<_, _>>()
            .map_err(|source| StartupError::Listen {
                addr: config.listen,
                source,
            })?;
        let state = wire_state(config, checked, &listening).await?;
        let mut tasks = shortlink_core::background::Tasks::new();
        jobs.spawn(&mut tasks, config, &state);
        Ok(Self {
            listener,
            metrics_listener,
            state,
            tasks,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The operator's metrics listener's address, if `--metrics-listen` set one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        (self.metrics_listener.as_ref()).map(|listener| {
            listener
                .local_addr()
                .expect("a bound listener has an address")
        })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then finishes the requests in flight, then stops the
    /// background work within [`background::DRAIN`]. Dropping this future, or an `Application`
    /// never run (a test dropping a server as a crash would), aborts the background work at once.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        // A scrape holds nothing worth finishing: the metrics listener stops with the API.
        let metrics = self.metrics_listener.map(|listener| {
            let router = shortlink_api::metrics_router(self.state.clone());
            let forever = Box::pin(std::future::pending());
            tokio::spawn(shortlink_api::serving::serve(listener, router, forever))
        });
        let router = shortlink_api::router(self.state, console::router());
        let served = shortlink_api::serving::serve(self.listener, router, Box::pin(shutdown)).await;
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        self.tasks.shutdown(shortlink_core::background::DRAIN).await;
        served
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}

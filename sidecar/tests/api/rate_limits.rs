//! Per-key rate limits and workspace quotas shared through Redis (issue 53; docs/SECURITY.md,
//! "Rate limits and quotas"): two sidecars on one Redis draw on one budget per key; a refusal is
//! a 429 with `Retry-After` and the `RateLimit-Policy` / `RateLimit` fields, which every allowed
//! answer carries too; nginx's fallback (`resolve`) is never limited; a Redis outage lets requests
//! through; the links-per-day quota is reserved whole or not at all and given back; all of it on
//! a Redis Cluster too.

use crate::helpers::*;
use redis::AsyncCommands;
use reqwest::Method;
use serde_json::Value;
use shortlink_core::limits::{LimitSettings, Limits, Quota, QuotaError};
use shortlink_core::primary::Primary;
use shortlink_sidecar::Application;
use std::time::{Duration, Instant};
use testkit::RedisServer;

/// A sidecar in-process on `database_url` and `redis_url`; its address.
async fn start(
    database_url: &str,
    redis_url: &str,
    extra: &[&str],
) -> (String, tokio::task::JoinHandle<()>) {
    std::sync::LazyLock::force(&TRACING);
    let app = Application::build(&config(database_url, redis_url, extra))
        .await
        .expect("build the sidecar");
    let address = format!("http://{}", app.local_addr());
    let server = tokio::spawn(async move {
        app.run_until(std::future::pending()).await.expect("serve");
    });
    (address, server)
}

fn http() -> reqwest::Client {
    shortlink_e2e::install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn list(http: &reqwest::Client, address: &str) -> reqwest::Response {
    http.get(format!("{address}/api/v1/links"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .expect("GET /links")
}

const REFUSED: &str = r#"shortlink_rate_limited_total{limit="api-key"}"#;
const UNCHECKED: &str = r#"shortlink_rate_limiter_errors_total{limit="api-key"}"#;

/// The value of one series of `/metrics` (0 before it first counts). The recorder is the
/// process's: every test of this binary counts into it.
async fn counter(app: &TestApp, series: &str) -> f64 {
    let metrics = app.client.get(app.metrics_url()).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Two sidecars on one Redis and one database, both limiting the test key to 1/s with `burst`.
struct TwoSidecars {
    a: String,
    b: String,
    redis: RedisServer,
    http: reqwest::Client,
    _servers: [tokio::task::JoinHandle<()>; 2],
    _dir: tempfile::TempDir,
}

impl TwoSidecars {
    async fn start(burst: &str) -> Self {
        let dir = testkit::temp_dir();
        let database_url = Backend::Sqlite.fresh_database_url(dir.path());
        let redis = RedisServer::start();
        let flags = ["--api-rate-limit", "1", "--api-rate-burst", burst];
        let (a, server_a) = start(&database_url, &redis.url(), &flags).await;
        let (b, server_b) = start(&database_url, &redis.url(), &flags).await;
        Self {
            a,
            b,
            redis,
            http: http(),
            _servers: [server_a, server_b],
            _dir: dir,
        }
    }

    /// `n` requests alternating between the two, as fast as they answer: how many passed.
    async fn fire(&self, n: usize) -> usize {
        let mut allowed = 0;
        for i in 0..n {
            let address = if i % 2 == 0 { &self.a } else { &self.b };
            match list(&self.http, address).await.status().as_u16() {
                200 => allowed += 1,
                429 => {}
                other => panic!("request {i}: {other}"),
            }
        }
        allowed
    }

    /// Scripts Redis ran (`EVALSHA`, and `EVAL` for a script it did not have yet).
    fn scripts_run(&self) -> usize {
        let stats = self.redis.cli(&["INFO", "commandstats"]);
        stats
            .lines()
            .filter(|line| {
                line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")
            })
            .filter_map(|line| {
                line.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .sum()
    }
}

/// With a rate of 1/s and a burst of B (under 20: one request per round trip), 2B requests
/// alternating between two sidecars: exactly B pass, plus at most one per whole second the run
/// took (GCRA's refill). Two budgets (one per process) would let 2B through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sidecars_on_one_redis_share_a_keys_budget() {
    const BURST: usize = 10;
    let sidecars = TwoSidecars::start("10").await;
    let started = Instant::now();
    let allowed = sidecars.fire(2 * BURST).await;
    let elapsed = started.elapsed();
    let refill = elapsed.as_secs() as usize;
    assert!(
        (BURST..=BURST + refill).contains(&allowed),
        "{allowed} allowed in {elapsed:?}: the burst is {BURST}, refilled at most {refill} in that time"
    );
}

/// A burst of 100: each sidecar takes ten requests per round trip to Redis, and the two together
/// still let through no more than the burst (plus the refill), and no fewer than the burst less
/// what each may hold unused (9 each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_take_a_large_burst_ten_at_a_time_and_still_share_it() {
    const BURST: usize = 100;
    let sidecars = TwoSidecars::start("100").await;
    let started = Instant::now();
    let first = sidecars.fire(BURST / 2).await;
    let scripts = sidecars.scripts_run();
    assert!(
        scripts <= BURST / 2 / 10 + 2,
        "{scripts} scripts for {first} requests"
    );
    let allowed = first + sidecars.fire(BURST * 3 / 2).await;
    let elapsed = started.elapsed();
    let refill = elapsed.as_secs() as usize;
    assert!(
        (BURST - 2 * 9..=BURST + refill).contains(&allowed),
        "{allowed} allowed in {elapsed:?}: the burst is {BURST}, refilled at most {refill} in that time"
    );
}

/// Sixty requests of one key at once on one sidecar, with a burst of 100: each may take ten from
/// Redis, which has a hundred to give; what the others took is this sidecar's to hand out, so
/// none is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_what_their_sidecar_took() {
    let app = spawn_app_with(
        Backend::Sqlite,
        &["--api-rate-limit", "1", "--api-rate-burst", "100"],
    )
    .await;
    let requests = (0..60).map(|_| app.api(Method::GET, "/links").send());
    let statuses: Vec<u16> = futures_util::future::join_all(requests)
        .await
        .into_iter()
        .map(|response| response.unwrap().status().as_u16())
        .collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_a_429_with_retry_after_and_the_ratelimit_fields() {
    let app = spawn_app_with(
        Backend::Sqlite,
        &["--api-rate-limit", "1", "--api-rate-burst", "3"],
    )
    .await;
    let code = app.create_code("https://t.example/limited").await;
    let refused_before = counter(&app, REFUSED).await;

    // Until the budget is spent (three at once; at most one more per second it takes).
    let mut answers = Vec::new();
    let refused = loop {
        let response = app.api(Method::GET, "/links").send().await.unwrap();
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some(r#""api-key";q=3;w=3"#)
        );
        answers.push(header(&response, "ratelimit").unwrap().to_owned());
        assert!(answers.len() < 20, "never refused: {answers:?}");
    };
    // Each allowed answer says what is left: the last one before the refusal, nothing.
    assert_eq!(
        answers.last().unwrap(),
        r#""api-key";r=0;t=3"#,
        "{answers:?}"
    );
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    assert_eq!(
        header(&refused, "ratelimit-policy"),
        Some(r#""api-key";q=3;w=3"#)
    );
    let limit = header(&refused, "ratelimit").unwrap().to_owned();
    assert!(limit.starts_with(r#""api-key";r=0;t="#), "{limit}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");

    // nginx's fallback is never limited, and says nothing about a limit.
    for _ in 0..10 {
        let response = app.resolve(&code).await;
        assert_eq!(response.status(), 302);
        assert_eq!(header(&response, "ratelimit"), None);
    }
    // Counted (other tests in this process count too: never less than before plus this one).
    assert!(counter(&app, REFUSED).await >= refused_before + 1.0);
}

/// The limiter's Redis down: reads from SQL keep answering (unlimited, without the fields), and
/// the metric counts each request let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_pass_unlimited_while_the_limiters_redis_is_down() {
    let mut app = spawn_app_with(
        Backend::Sqlite,
        &["--api-rate-limit", "1", "--api-rate-burst", "1"],
    )
    .await;
    let unchecked_before = counter(&app, UNCHECKED).await;
    app.redis.stop();
    for _ in 0..5 {
        let response = app.api(Method::GET, "/links").send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit"), None);
    }
    assert!(counter(&app, UNCHECKED).await >= unchecked_before + 5.0);
}

fn limits_on(primary: Primary) -> Limits {
    let settings = LimitSettings {
        api_key: shortlink_core::limits::Limit::new(1, 3),
        links_per_day: 10,
        compose_recipients: 0,
        webhooks: 0,
    };
    Limits::new(primary, Duration::from_secs(2), settings)
}

/// Links per day: a request that does not fit is refused whole and counts nothing; a released
/// reservation is given back, a kept part stays; workspaces count apart.
async fn links_per_day_are_reserved_whole(limits: &Limits, count: impl AsyncFn(i64) -> i64) {
    let quotas = &limits.quotas;
    let eight = quotas.reserve_links(1, 8, 10).await.unwrap();
    assert_eq!(eight.used(), 8);
    match quotas.reserve_links(1, 3, 10).await {
        Err(QuotaError::Exceeded {
            quota: Quota::LinksPerDay,
            limit: 10,
            used: 8,
            retry_after: Some(wait),
        }) => assert!(wait <= Duration::from_secs(86_400)),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(1).await, 8, "a refused request counts nothing");
    // More than a day allows: retrying tomorrow would not help either.
    assert!(matches!(
        quotas.reserve_links(1, 11, 10).await,
        Err(QuotaError::Exceeded {
            retry_after: None,
            ..
        })
    ));
    // Another workspace has its own count.
    quotas
        .reserve_links(2, 10, 10)
        .await
        .unwrap()
        .keep(10)
        .await;
    assert_eq!(count(2).await, 10);

    // The create failed: all eight back.
    eight.release().await;
    assert_eq!(count(1).await, 0);
    let five = quotas.reserve_links(1, 5, 10).await.unwrap();
    five.keep(2).await;
    assert_eq!(count(1).await, 2, "three of five given back");
    // No quota: nothing counted, nothing asked.
    let unlimited = quotas.reserve_links(1, 1_000_000, 0).await.unwrap();
    assert_eq!(unlimited.used(), 0);
    assert_eq!(count(1).await, 2);
}

fn today() -> String {
    chrono::Utc::now().format("%Y%m%d").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_per_day_are_reserved_whole_and_given_back() {
    let redis = RedisServer::start();
    let limits = limits_on(Primary::fixed(&redis.url()).unwrap());
    let client = redis::Client::open(redis.url()).unwrap();
    let count = async |workspace: i64| -> i64 {
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let key = shortlink_wire::keys::links_quota_key(workspace, &today());
        let value: Option<i64> = connection.get(&key).await.unwrap();
        let expires: i64 = redis::cmd("EXPIRETIME")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        if value.is_some() {
            // Past the end of the UTC day, so a sidecar whose clock is behind still finds it.
            let midnight = chrono::Utc::now().date_naive().succ_opt().unwrap();
            let midnight = midnight.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp();
            assert!(expires > midnight, "{key} expires at {expires}");
        }
        value.unwrap_or(0)
    };
    links_per_day_are_reserved_whole(&limits, count).await;
}

/// On a cluster: the per-key script and the quota scripts each run on the node owning their
/// key's slot, through the sidecar's cluster client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_work_on_a_cluster() {
    let cluster = testkit::RedisCluster::start();
    let seeds = cluster.seeds();
    let sidecar = crate::sentinel::start_sidecar(
        &cluster.urls()[0],
        &[
            "--redis-cluster",
            &seeds,
            "--api-rate-limit",
            "1",
            "--api-rate-burst",
            "3",
        ],
    )
    .await;
    let http = http();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = list(&http, &sidecar.address).await;
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert!(header(&response, "retry-after").is_some());
        }
    }
    assert_eq!(statuses[..3], [200, 200, 200], "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    // The budget lives on the primary that owns its slot.
    let key = shortlink_wire::keys::api_key_rate_key(1);
    let owner = cluster.owner_of(cluster.keyslot(&key)).unwrap();
    assert_eq!(
        cluster.nodes()[owner].cli(&["EXISTS", &key]).trim(),
        "(integer) 1"
    );

    let limits = limits_on(Primary::cluster(&cluster.urls()).unwrap());
    let cluster_client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let count = async |workspace: i64| -> i64 {
        let mut connection = cluster_client.get_async_connection().await.unwrap();
        let key = shortlink_wire::keys::links_quota_key(workspace, &today());
        let value: Option<i64> = connection.get(&key).await.unwrap();
        value.unwrap_or(0)
    };
    links_per_day_are_reserved_whole(&limits, count).await;
}

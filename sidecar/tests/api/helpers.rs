//! `spawn_app`: the sidecar's router in-process on 127.0.0.1:0, with a fresh SQLite file,
//! PostgreSQL or MariaDB database and a fresh redis-server per test.

use clap::Parser;
use redis::AsyncCommands;
use serde_json::{json, Value};
use shortcode::CodeScheme;
use shortlink_sidecar::cli::Cli;
use shortlink_sidecar::Application;
use sqlx::{MySqlPool, PgPool, SqlitePool};
use std::sync::LazyLock;
use std::time::Duration;
use testkit::RedisServer;

/// Logs appear only with `TEST_LOG=1`.
pub static TRACING: LazyLock<()> = LazyLock::new(|| {
    if std::env::var_os("TEST_LOG").is_some() {
        shortlink_api::serving::init_tracing();
    }
});

pub const API_KEY: &str = "slk_test0000000000000000000000000000000000000000000000000000000000";
/// nginx's fallback key (role `resolve`), made on first use ([`TestApp::fallback`]).
pub const RESOLVE_KEY: &str = "slk_resolve00000000000000000000000000000000000000000000000000000000";
pub const SECRET_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
pub const PUBLIC_BASE: &str = "https://s.example";
/// The secret nginx would send (`X-Shortlink-Proxy-Secret`): the app's own client sends it, as
/// nginx does, so its pool headers count as nginx's.
pub const PROXY_SECRET: &str = "testproxysecret0123456789";
pub const GRACE_SECS: i64 = 7 * 86_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    Mariadb,
}

impl Backend {
    /// A fresh database of this backend (SQLite: a file in `dir`).
    pub fn fresh_database_url(self, dir: &std::path::Path) -> String {
        match self {
            Backend::Sqlite => format!("sqlite://{}", dir.join("var/links.db").display()),
            Backend::Postgres => testkit::postgres().fresh_database_url(),
            Backend::Mariadb => testkit::mariadb().fresh_database_url(),
        }
    }
}

/// Direct access to the test's database, for assertions and for states the API cannot produce.
pub enum TestDb {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    Mysql(MySqlPool),
}

impl TestDb {
    pub async fn connect(backend: Backend, database_url: &str) -> Self {
        match backend {
            Backend::Sqlite => TestDb::Sqlite(SqlitePool::connect(database_url).await.unwrap()),
            Backend::Postgres => TestDb::Postgres(PgPool::connect(database_url).await.unwrap()),
            // The sidecar's own sessions: strict, UTC, and "key" quotes a name.
            Backend::Mariadb => TestDb::Mysql(
                shortlink_store::mysql::pool(database_url, 4, Duration::from_secs(10))
                    .await
                    .unwrap(),
            ),
        }
    }

    /// A number the SQL computes (`SELECT COUNT(*) ...`), on any backend.
    pub async fn scalar(&self, sql: &str) -> i64 {
        match self {
            TestDb::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
            TestDb::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
            TestDb::Mysql(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
        }
    }

    /// The first column of every row the SQL returns, as text.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        match self {
            TestDb::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
            TestDb::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
            // Text in a binary collation comes flagged BINARY, which sqlx reads only as bytes.
            TestDb::Mysql(pool) => sqlx::query_scalar::<_, Vec<u8>>(sql)
                .fetch_all(pool)
                .await
                .unwrap()
                .into_iter()
                .map(|bytes| String::from_utf8(bytes).unwrap())
                .collect(),
        }
    }

    /// Runs a statement without parameters; returns the rows it changed.
    pub async fn execute(&self, sql: &str) -> u64 {
        match self {
            TestDb::Sqlite(pool) => sqlx::query(sql)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected(),
            TestDb::Postgres(pool) => sqlx::query(sql)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected(),
            TestDb::Mysql(pool) => sqlx::query(sql)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected(),
        }
    }

    /// `at` as a SQL literal of the backend's time columns.
    pub fn time_literal(&self, at: chrono::DateTime<chrono::Utc>) -> String {
        match self {
            TestDb::Sqlite(_) | TestDb::Postgres(_) => {
                format!("'{}'", at.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
            }
            TestDb::Mysql(_) => format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.6f")),
        }
    }
}

pub struct TestApp {
    pub address: String,
    /// The operator's metrics listener (`--metrics-listen`), apart from the API's.
    pub metrics_address: String,
    pub database_url: String,
    pub client: reqwest::Client,
    pub redis: RedisServer,
    pub db: TestDb,
    pub scheme: CodeScheme,
    redis_client: redis::Client,
    /// What the running app's handlers share (its router is built from it: `routes`).
    pub state: shortlink_api::AppState,
    /// Whether [`RESOLVE_KEY`] is in the database yet.
    resolve_key: tokio::sync::OnceCell<()>,
    _dir: tempfile::TempDir,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Counts of everything stored, to check that refused requests leave nothing behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub links: i64,
    pub api_keys: i64,
    pub redis_keys: i64,
    pub redis_values: Vec<(String, Option<Vec<u8>>)>,
}

/// Gives this app's database workspace ids no other app of this test process gives out.
///
/// A process keeps the slug of each workspace it met, by id, for the records it encodes
/// (`core/src/projection/slugs.rs`): one sidecar serves one database, where an id names one
/// workspace for good. These tests run many apps, each on its own database, in one process;
/// numbered alike, two databases' workspace 2 would be one entry there, and a link record
/// would name the other test's slug.
async fn number_workspaces_apart(db: &TestDb, backend: Backend) {
    static NEXT_BASE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);
    let base = NEXT_BASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) * 1_000_000;
    let sql = match backend {
        Backend::Sqlite => {
            format!("UPDATE sqlite_sequence SET seq = {base} WHERE name = 'workspaces'")
        }
        Backend::Postgres => format!("SELECT setval('workspaces_id_seq', {base})"),
        Backend::Mariadb => format!("ALTER TABLE workspaces AUTO_INCREMENT = {base}"),
    };
    db.execute(&sql).await;
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, &[]).await
}

/// `extra` are more command-line flags, e.g. `["--short-domains", "s1.example"]`.
pub async fn spawn_app_with(backend: Backend, extra: &[&str]) -> TestApp {
    let dir = testkit::temp_dir();
    let database_url = backend.fresh_database_url(dir.path());
    spawn_app_at(backend, database_url, dir, extra).await
}

/// [`spawn_app_with`] on a database of the caller's (e.g. on a server the test restarts).
pub async fn spawn_app_at(
    backend: Backend,
    database_url: String,
    dir: tempfile::TempDir,
    extra: &[&str],
) -> TestApp {
    LazyLock::force(&TRACING);
    let redis = RedisServer::start();
    let config = config(&database_url, &redis.url(), extra);
    let app = Application::build(&config)
        .await
        .expect("build the application");
    let address = format!("http://{}", app.local_addr());
    let state = app.state().clone();
    let metrics_address = format!(
        "http://{}",
        app.metrics_addr().expect("tests set --metrics-listen")
    );
    let server = tokio::spawn(async move {
        app.run_until(std::future::pending()).await.expect("serve");
    });
    let db = TestDb::connect(backend, &database_url).await;
    number_workspaces_apart(&db, backend).await;
    let redis_client = redis::Client::open(redis.url()).unwrap();
    // The workspace builds reqwest with rustls and no default provider (tests/Cargo.toml).
    shortlink_e2e::install_tls_provider();
    TestApp {
        address,
        metrics_address,
        database_url,
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(reqwest::header::HeaderMap::from_iter([(
                reqwest::header::HeaderName::from_static("x-shortlink-proxy-secret"),
                reqwest::header::HeaderValue::from_static(PROXY_SECRET),
            )]))
            .build()
            .unwrap(),
        redis,
        db,
        scheme: CodeScheme::new(
            &shortcode::parse_hex_secret(SECRET_HEX).unwrap(),
            shortcode::DEFAULT_BODY_LEN,
            true,
        )
        .unwrap(),
        redis_client,
        state,
        resolve_key: tokio::sync::OnceCell::new(),
        _dir: dir,
        server,
    }
}

/// The configuration a test sidecar runs with.
pub fn config(database_url: &str, redis_url: &str, extra: &[&str]) -> shortlink_config::Config {
    cli(database_url, redis_url, extra).config
}

/// Why a sidecar with `extra` flags (SQLite in `dir`, `redis`) refuses to start; `None`: it starts.
pub async fn start_error(
    dir: &std::path::Path,
    redis: &RedisServer,
    extra: &[&str],
) -> Option<String> {
    let database = format!("sqlite://{}", dir.join("links.db").display());
    let config = config(&database, &redis.url(), extra);
    let started = shortlink_sidecar::Application::build(&config).await;
    started.err().map(|error| error.to_string())
}

pub fn cli(database_url: &str, redis_url: &str, extra: &[&str]) -> Cli {
    let mut args = vec![
        "shortlink-sidecar",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--database-url",
        database_url,
        "--redis-url",
        redis_url,
        "--code-secret",
        SECRET_HEX,
        "--public-base-url",
        PUBLIC_BASE,
        "--bootstrap-api-key",
        API_KEY,
        "--proxy-secret",
        PROXY_SECRET,
    ];
    // Unless the test sets its own (a flag given twice is refused). Redis gets 2 s: on a machine
    // made very busy beside the suite a reply took over 500 ms, and a create then answered 503
    // `redis_unavailable` (issue 82); a stopped Redis refuses the connection at once whatever this is.
    for default in [["--redis-timeout", "2s"], ["--db-timeout", "2s"]] {
        if !extra.contains(&default[0]) {
            args.extend(default);
        }
    }
    args.extend_from_slice(extra);
    Cli::try_parse_from(args).expect("valid test configuration")
}

impl TestApp {
    /// The configuration a sidecar on this app's database and Redis runs with.
    pub fn config(&self, extra: &[&str]) -> shortlink_config::Config {
        config(&self.database_url, &self.redis.url(), extra)
    }

    /// The command line of a sidecar on this app's database and Redis.
    pub fn cli(&self, extra: &[&str]) -> Cli {
        cli(&self.database_url, &self.redis.url(), extra)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// `GET /metrics`, on the operator's listener.
    /// The metrics listener's page, as Prometheus scrapes it.
    pub async fn metrics_page(&self) -> String {
        let page = reqwest::get(self.metrics_url()).await.unwrap();
        page.text().await.unwrap()
    }

    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.metrics_address)
    }

    pub fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(&format!("/api/v1{path}")))
            .bearer_auth(API_KEY)
    }

    pub async fn post_link(&self, body: &Value) -> reqwest::Response {
        self.api(reqwest::Method::POST, "/links")
            .json(body)
            .send()
            .await
            .expect("send POST /links")
    }

    /// Creates a link and returns its JSON (panics unless 201).
    pub async fn create(&self, body: Value) -> Value {
        let response = self.post_link(&body).await;
        let status = response.status();
        let json: Value = response.json().await.unwrap();
        assert_eq!(status, 201, "create {body}: {json}");
        json
    }

    /// Creates a link to `url` and returns its code (panics unless 201).
    pub async fn create_code(&self, url: &str) -> String {
        let link = self.create(serde_json::json!({ "url": url })).await;
        link["code"].as_str().expect("a code").to_owned()
    }

    /// `POST /links/batch` with a JSON array.
    pub async fn post_batch(&self, items: &(impl serde::Serialize + ?Sized)) -> reqwest::Response {
        self.api(reqwest::Method::POST, "/links/batch")
            .json(items)
            .send()
            .await
            .expect("send POST /links/batch")
    }

    /// Creates `count` links to `https://t.example/<i>` with one JSON batch (panics unless 200).
    pub async fn create_many(&self, count: usize) {
        let items: Vec<Value> = (0..count)
            .map(|i| serde_json::json!({"url": format!("https://t.example/{i}")}))
            .collect();
        let response = self.post_batch(&items).await;
        assert_eq!(response.status(), 200);
        response.text().await.unwrap();
    }

    /// A GET through the API that must answer 200, as JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        let response = self.api(reqwest::Method::GET, path).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    pub async fn get_link(&self, code: &str) -> reqwest::Response {
        self.api(reqwest::Method::GET, &format!("/links/{code}"))
            .send()
            .await
            .unwrap()
    }

    pub async fn patch_link(&self, code: &str, body: &Value) -> reqwest::Response {
        self.api(reqwest::Method::PATCH, &format!("/links/{code}"))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// Sends `body` as a create and as a one-item batch, and `patch` to link `existing`; each
    /// must be refused with error `code` (any code for `invalid_body`, which serde words itself)
    /// and a message containing `message`. Returns the three answers, labelled.
    pub async fn refused_everywhere(
        &self,
        body: &Value,
        patch: &Value,
        code: &str,
        message: &str,
    ) -> Vec<(&'static str, Value)> {
        let mut answers = Vec::new();
        for (label, response) in [
            ("create", self.post_link(body).await),
            ("batch", self.post_batch(&[body]).await),
            ("patch", self.patch_link("existing", patch).await),
        ] {
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap();
            let error = match label {
                "batch" => answer["results"][0]["error"].clone(),
                _ => {
                    assert!(status == 422 || status == 400, "{label} {patch}: {answer}");
                    answer["error"].clone()
                }
            };
            if code == "invalid_body" {
                assert!(error["code"].is_string(), "{label} {patch}: {answer}");
            } else {
                assert_eq!(error["code"], json!(code), "{label} {patch}: {answer}");
                let text = error["message"].as_str().unwrap_or_default();
                assert!(text.contains(message), "{label} {patch}: {text}");
            }
            answers.push((label, answer));
        }
        answers
    }

    pub async fn delete_link(&self, code: &str) -> reqwest::Response {
        self.api(reqwest::Method::DELETE, &format!("/links/{code}"))
            .send()
            .await
            .unwrap()
    }

    /// `GET /resolve/<path_and_query>` as nginx's fallback sends it from a host of `default`.
    pub async fn resolve(&self, path_and_query: &str) -> reqwest::Response {
        self.resolve_on("default", path_and_query).await
    }

    /// [`Self::resolve`] from a host nginx maps to `workspace`: a person's tap, with a phone
    /// browser's agent and language (a bare request is a script's, which spends no
    /// `max_visits`: `shortlink_wire::verdict`).
    pub async fn resolve_on(&self, workspace: &str, path_and_query: &str) -> reqwest::Response {
        self.fallback(workspace, path_and_query)
            .await
            .header("user-agent", PHONE_AGENT)
            .header("accept-language", "en")
            .send()
            .await
            .unwrap()
    }

    /// `GET /resolve/<path_and_query>` as nginx's fallback sends it from a host mapped to
    /// `workspace` (`X-Shortlink-Workspace: ws=<workspace>`), with its `resolve` key.
    pub async fn fallback(&self, workspace: &str, path_and_query: &str) -> reqwest::RequestBuilder {
        self.fallback_at(&self.address, workspace, path_and_query)
            .await
    }

    /// [`Self::fallback`] to another sidecar on this app's database (`address`: `http://…`).
    pub async fn fallback_at(
        &self,
        address: &str,
        workspace: &str,
        path_and_query: &str,
    ) -> reqwest::RequestBuilder {
        let request = (self.client)
            .get(format!("{address}/api/v1/resolve/{path_and_query}"))
            .bearer_auth(self.resolve_key().await);
        from_workspace(request, workspace)
    }

    /// nginx's fallback key (role `resolve`, as `keys create --role resolve` makes it), made in
    /// this app's database on first use.
    pub async fn resolve_key(&self) -> &'static str {
        self.resolve_key
            .get_or_init(|| async {
                let storage = self.storage().await;
                (storage.create_api_key(
                    "nginx-resolve",
                    shortlink_store::Role::Resolve,
                    Some(shortlink_model::WorkspaceId::DEFAULT),
                    &shortlink_api::hash_api_key(RESOLVE_KEY),
                    shortlink_store::now(),
                ))
                .await
                .expect("create the fallback's key");
            })
            .await;
        RESOLVE_KEY
    }

    /// The app's link storage, opened again (a second pool on the same database).
    pub async fn storage(&self) -> std::sync::Arc<dyn shortlink_store::Storage> {
        let options = shortlink_store::ConnectOptions {
            url: self.database_url.clone(),
            max_connections: 2,
            acquire_timeout: Duration::from_secs(5),
            sqlite_cache: Default::default(),
        };
        shortlink_store::connect(&options)
            .await
            .expect("open the storage")
    }

    /// The visit store on the app's database, as the consumer opens it.
    pub async fn visit_store(&self) -> std::sync::Arc<dyn shortlink_visits::store::VisitStore> {
        let options = shortlink_store::ConnectOptions {
            url: self.database_url.clone(),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(5),
            sqlite_cache: Default::default(),
        };
        shortlink_visits_sql::connect(&options)
            .await
            .expect("open the visit store")
            .visits
    }

    pub async fn redis(&self) -> redis::aio::MultiplexedConnection {
        self.redis_client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    pub async fn redis_get(&self, code: &str) -> Option<String> {
        self.redis()
            .await
            .get(format!("sl:c:{code}"))
            .await
            .unwrap()
    }

    /// The record's bytes (a version 2 record is binary after its first line).
    pub async fn redis_record(&self, code: &str) -> Option<Vec<u8>> {
        self.redis()
            .await
            .get(format!("sl:c:{code}"))
            .await
            .unwrap()
    }

    /// Redis `EXPIRETIME`: -1 without TTL, -2 if the key is missing, else the Unix time.
    pub async fn redis_expiretime(&self, code: &str) -> i64 {
        redis::cmd("EXPIRETIME")
            .arg(format!("sl:c:{code}"))
            .query_async(&mut self.redis().await)
            .await
            .unwrap()
    }

    pub async fn stored(&self) -> Stored {
        let links = self.db.scalar("SELECT COUNT(*) FROM links").await;
        let api_keys = self.db.scalar("SELECT COUNT(*) FROM api_keys").await;
        let mut redis = self.redis().await;
        // Link data only: the projection marker and resync token (`sl:meta:*`) are bookkeeping.
        let mut keys: Vec<String> = redis.keys("*").await.unwrap();
        keys.retain(|key| !key.starts_with("sl:meta:"));
        let redis_keys = keys.len() as i64;
        keys.sort();
        let mut redis_values = Vec::new();
        for key in keys {
            let value: Option<Vec<u8>> = redis.get(&key).await.unwrap();
            redis_values.push((key, value));
        }
        Stored {
            links,
            api_keys,
            redis_keys,
            redis_values,
        }
    }

    /// Moves a link's expiry to `at` (Unix seconds) behind the API's back: the API only accepts
    /// future expiries, and tests must not sleep until one passes.
    pub async fn set_expiry_in_sql(&self, code: &str, at: i64) {
        let at = chrono::DateTime::from_timestamp(at, 0).unwrap();
        self.set_link_time_in_sql(code, LinkTime::ExpiresAt, at)
            .await;
    }

    /// Sets one of a link's times in SQL directly, in each backend's own time format.
    pub async fn set_link_time_in_sql(
        &self,
        code: &str,
        column: LinkTime,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        let sql = format!(
            "UPDATE links SET {} = {} WHERE code = '{code}'",
            column.as_str(),
            self.db.time_literal(at)
        );
        assert_eq!(self.db.execute(&sql).await, 1, "{sql}");
    }

    /// Runs a subcommand in-process with this app's database and Redis.
    pub async fn run_cli(&self, args: &[&str]) {
        let cli = cli(&self.database_url, &self.redis.url(), args);
        shortlink_sidecar::cli::run(cli).await.expect("subcommand");
    }
}

/// Starts `shortlink-sidecar serve` on a free port with the suite's secret and key and `args`:
/// its lifeline (which stops it when dropped, also when the test panics or its process dies)
/// and its base URL.
pub fn serve_process(
    (database_url, redis_url): (&str, &str),
    args: &[&str],
    log: std::path::PathBuf,
) -> (testkit::process::Lifeline, String) {
    testkit::Sidecar {
        database_url,
        redis_url,
        secret_hex: SECRET_HEX,
        api_key: API_KEY,
        args,
    }
    .start(env!("CARGO_BIN_EXE_shortlink-sidecar"), log)
}

/// The sidecar binary run as an operator runs it, with `args` on `database_url`: whether it
/// exited 0, its stdout and its stderr.
pub fn run_sidecar(database_url: &str, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(args)
        .args(["--database-url", database_url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shortlink-sidecar");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stdout, stderr)
}

/// [`run_sidecar`] for a command that must succeed: its stdout.
pub fn sidecar_cli(database_url: &str, args: &[&str]) -> String {
    let (ok, stdout, stderr) = run_sidecar(database_url, args);
    assert!(ok, "{args:?}: {stderr}");
    stdout
}

/// Sends `request`: the answer's status and JSON body, whatever the status.
pub async fn status_and_json(request: reqwest::RequestBuilder) -> (u16, Value) {
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

/// `request` as nginx's fallback sends it from a host mapped to `workspace`
/// (`X-Shortlink-Workspace: ws=<workspace>`).
pub fn from_workspace(
    request: reqwest::RequestBuilder,
    workspace: &str,
) -> reqwest::RequestBuilder {
    request.header(
        shortlink_wire::fallback::WORKSPACE_HEADER,
        shortlink_wire::fallback::header_value(workspace),
    )
}

/// Serves `app` on a free loopback port: its address, and the task serving it.
pub async fn serve_router(
    app: axum::Router,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, server)
}

/// Sends `request`: its answer (panics unless `status`).
pub async fn expect_status(request: reqwest::RequestBuilder, status: u16) -> reqwest::Response {
    let answer = request.send().await.unwrap();
    assert_eq!(answer.status(), status);
    answer
}

/// Sends `request`: its JSON answer (panics unless `status`).
pub async fn answered(request: reqwest::RequestBuilder, status: u16) -> Value {
    expect_status(request, status).await.json().await.unwrap()
}

/// Sends `request` with `body` as NDJSON.
pub async fn send_ndjson(request: reqwest::RequestBuilder, body: String) -> reqwest::Response {
    let request = request.header("content-type", "application/x-ndjson");
    request.body(body).send().await.unwrap()
}

/// `answer`'s NDJSON lines, parsed (panics unless 200).
pub async fn ndjson_lines(answer: reqwest::Response) -> Vec<Value> {
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.unwrap();
    (text.lines())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Sends `request`, a compose, with `recipients` as NDJSON: the summary line that ends its
/// answer (panics unless 200).
pub async fn compose_summary(request: reqwest::RequestBuilder, recipients: String) -> Value {
    let answer = send_ndjson(request, recipients).await;
    let status = answer.status();
    let text = answer.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// Sends `request`, a `POST /links/batch` with its items, and reads its answer (panics
/// unless 200).
pub async fn batch_answer(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The domain health job as the tests that watch a domain fall and recover run it: a check
/// every 100 ms over a ten-minute window, a domain judged from its 20th link on.
pub const QUICK_DOMAIN_HEALTH: [&str; 6] = [
    "--domain-health-every",
    "100ms",
    "--domain-health-window",
    "10m",
    "--domain-health-min-issued",
    "20",
];

pub fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Polls `check` until it holds (at most `timeout`); no fixed sleeps.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Generates one `#[tokio::test]` per backend for each listed `async fn name(Backend)`.
#[macro_export]
macro_rules! on_each_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Backend::Postgres).await
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Backend::Mariadb).await
                }
            )*
        }
    };
}

/// The link times a test may move behind the API's back.
#[derive(Debug, Clone, Copy)]
pub enum LinkTime {
    CreatedAt,
    ExpiresAt,
}

impl LinkTime {
    fn as_str(self) -> &'static str {
        match self {
            LinkTime::CreatedAt => "created_at",
            LinkTime::ExpiresAt => "expires_at",
        }
    }
}

/// A phone browser's `User-Agent` ([`TestApp::resolve_on`]).
pub const PHONE_AGENT: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

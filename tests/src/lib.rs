//! The whole system on loopback for end-to-end tests: a private Redis, the sidecar on a fresh SQLite
//! database, and nginx with the shortlink module, rendered from the same templates `scripts/run` uses.
//!
//! The binaries are the ones `cargo build` left beside this test executable (the test command builds
//! the sidecar and the module before running tests).

pub mod agents;
mod api;
pub mod browser;
pub mod cluster;
pub mod cluster_links;
pub mod docs;
pub mod load;
mod nginx;
pub mod nginx_conf;
pub mod paths;
pub mod prometheus;
pub mod qr;
pub mod raw;
pub mod receiver;
mod shared;
pub mod tls;

pub use api::Api;
pub use nginx::{error_pages, templates_with, Nginx, NginxOptions, ERROR_STATUSES, PHONE};
pub use raw::{raw_http, RawResponse};
pub use shared::{
    http_client, install_tls_provider, location, status_and_location, API_KEY, CODE_SECRET, POOL,
    PROJECTION_MARKER, PROXY_SECRET,
};

use std::time::Duration;
use testkit::{Lifeline, RedisServer};

/// Redis + sidecar + nginx, stopped on drop.
pub struct System {
    pub redis: RedisServer,
    pub sidecar: Sidecar,
    pub nginx: Nginx,
    pub dir: tempfile::TempDir,
    /// nginx's fallback key (role `resolve`), as scripts/run makes it.
    pub resolve_key: String,
    /// The sidecar's `--database-url`: SQLite in `dir` unless started on another database.
    database: String,
}

/// The SQLite database a system keeps in its directory.
fn sqlite_in(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("shortlink.db").display())
}

/// `keys create --role resolve` on the system's database, as scripts/run does for nginx's fallback.
pub(crate) fn create_resolve_key(database: &str) -> String {
    let output = std::process::Command::new(paths::sidecar_bin())
        .args([
            "keys",
            "create",
            "--name",
            "nginx-resolve",
            "--role",
            "resolve",
        ])
        .args(["--database-url", database])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shortlink-sidecar keys create");
    assert!(
        output.status.success(),
        "keys create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("the key is text")
        .trim()
        .to_owned()
}

impl System {
    pub fn start() -> Self {
        Self::start_with(NginxOptions::default())
    }

    pub fn start_with(options: NginxOptions) -> Self {
        Self::start_on(RedisServer::start(), options)
    }

    /// Starts the sidecar and nginx on a Redis the test already started (for example to put a
    /// proxy between nginx and it, see [`NginxOptions::redis_addr`]).
    pub fn start_on(redis: RedisServer, options: NginxOptions) -> Self {
        Self::start_in(testkit::temp_dir(), redis, options)
    }

    /// A system whose nginx reaches Redis through a [`testkit::Proxy`] the test controls (to
    /// hold its traffic or cut a reply); the sidecar talks to Redis directly.
    pub fn behind_proxy(options: NginxOptions) -> (Self, testkit::Proxy) {
        let redis = RedisServer::start();
        let proxy = testkit::Proxy::start(redis.port());
        let options = NginxOptions {
            redis_addr: Some(format!("127.0.0.1:{}", proxy.port())),
            ..options
        };
        (Self::start_on(redis, options), proxy)
    }

    /// Starts the sidecar and nginx in a state directory the test prepared (for example with a
    /// restored database at [`System::database_path`]).
    pub fn start_in(dir: tempfile::TempDir, redis: RedisServer, options: NginxOptions) -> Self {
        let database = sqlite_in(&dir);
        Self::start_in_with(dir, database, redis, options, &[])
    }

    /// [`Self::start_on`] with more sidecar flags (e.g. `--redis-sentinels`).
    pub fn start_on_with(redis: RedisServer, options: NginxOptions, sidecar_args: &[&str]) -> Self {
        let dir = testkit::temp_dir();
        let database = sqlite_in(&dir);
        Self::start_in_with(dir, database, redis, options, sidecar_args)
    }

    /// The system on the database at `database_url` (a PostgreSQL or MariaDB the test made)
    /// instead of SQLite; [`System::database_path`] then names no file.
    pub fn start_on_database(database_url: &str) -> Self {
        Self::start_on_database_with(database_url, &[])
    }

    /// [`Self::start_on_database`] with more sidecar flags.
    pub fn start_on_database_with(database_url: &str, sidecar_args: &[&str]) -> Self {
        Self::start_in_with(
            testkit::temp_dir(),
            database_url.to_owned(),
            RedisServer::start(),
            NginxOptions::default(),
            sidecar_args,
        )
    }

    fn start_in_with(
        dir: tempfile::TempDir,
        database: String,
        redis: RedisServer,
        options: NginxOptions,
        sidecar_args: &[&str],
    ) -> Self {
        // Mode 0700, as root's home or `mktemp -d`: under a root master nginx's workers (`nobody`)
        // cannot enter it, so every test checks that they need no file in the prefix.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("make the system's directory private");
        let sidecar_args = sidecar_args.iter().map(|a| a.to_string()).collect();
        let sidecar = Sidecar::spawn(&dir, &redis, &database, 0, sidecar_args);
        let resolve_key = create_resolve_key(&database);
        let nginx = Nginx::start(&dir, &redis.addr(), sidecar.port, &resolve_key, options);
        System {
            redis,
            sidecar,
            nginx,
            dir,
            resolve_key,
            database,
        }
    }

    /// The REST API as campaign tools reach it: through nginx's internal API server.
    pub fn api(&self) -> Api {
        Api::new(format!("http://127.0.0.1:{}", self.nginx.api_port), API_KEY)
    }

    /// Creates a link through the API and returns its code.
    pub fn create(&self, body: serde_json::Value) -> String {
        let (status, json) = self.api().post("/links", &body);
        assert_eq!(status, 201, "create {body}: {json}");
        json["code"]
            .as_str()
            .expect("code in the response")
            .to_owned()
    }
}

impl System {
    /// The sidecar's database, as `--database-url` takes it.
    pub fn database_url(&self) -> String {
        self.database.clone()
    }

    /// The SQLite file of a system on SQLite (the default).
    pub fn database_path(&self) -> std::path::PathBuf {
        self.dir.path().join("shortlink.db")
    }

    /// GET `/{code}` on s1.test with `client` on a connection of its own (`Connection: close`),
    /// so that either nginx worker may take it.
    pub fn redirect_alone(
        &self,
        client: &reqwest::blocking::Client,
        code: &str,
    ) -> reqwest::blocking::Response {
        let url = format!("http://127.0.0.1:{}/{code}", self.nginx.redirect_port);
        (client.get(url))
            .header("Host", "s1.test")
            .header("Connection", "close")
            .send()
            .expect("redirect request")
    }

    /// GET `/{code}` on s1.test, asserting that the fallback answered it (nginx counts one more
    /// fallback) with `status` and `location`: what the module does with a record it must not
    /// read.
    pub fn assert_answered_by_fallback(&self, code: &str, (status, location): (u16, &str)) {
        let before = self.nginx.counters();
        let response = self.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(
            status_and_location(&response),
            (status, location.to_owned())
        );
        assert_eq!(
            self.nginx.counters()["fallbacks"],
            before["fallbacks"] + 1,
            "the answer did not come through the fallback"
        );
    }

    /// A change and a revoke under load: `code` patched to `https://example.com/v2`, `load_on`
    /// (the load going on), then revoked, and `load_on` again. When the PATCH was answered, when
    /// the DELETE was sent and when it was answered.
    pub fn patch_then_revoke(
        &self,
        code: &str,
        mut load_on: impl FnMut(),
    ) -> (std::time::Instant, std::time::Instant, std::time::Instant) {
        let (status, body) = self.api().patch(
            &format!("/links/{code}"),
            &serde_json::json!({"url": "https://example.com/v2"}),
        );
        assert_eq!(status, 200, "patch: {body}");
        let patched = std::time::Instant::now();
        load_on();
        let delete_sent = std::time::Instant::now();
        let (status, body) = self.api().delete(&format!("/links/{code}"));
        assert!((200..300).contains(&status), "revoke: {status} {body}");
        let deleted = std::time::Instant::now();
        load_on();
        (patched, delete_sent, deleted)
    }

    /// Writes `code`'s record in Redis as a live 302 to `target` with `extras` (no expiry, no
    /// flags): what the sidecar would write for a link it cannot be asked to make.
    pub fn put_live_record(
        &self,
        code: &str,
        target: &str,
        extras: &shortlink_wire::record::Extras,
    ) {
        let record = shortlink_wire::record::Record::Live {
            status: 302,
            expires_at: 0,
            flags: 0,
            target,
            extras: Some(extras),
        };
        let key = shortlink_wire::keys::link_key(code);
        self.redis.set_bytes(&key, &record.encode());
    }

    /// `query`'s output through `sqlite3` on the database of a system on SQLite, trimmed.
    pub fn sqlite(&self, query: &str) -> String {
        let output = std::process::Command::new("sqlite3")
            .arg(self.database_path())
            .arg(query)
            .output()
            .expect("run sqlite3");
        assert!(output.status.success(), "{query}: {output:?}");
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// Runs a one-shot sidecar subcommand (`resync`, `keys create`, ...) on this system's database
    /// and Redis, and returns its output.
    pub fn sidecar_cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(paths::sidecar_bin())
            .args(args)
            .arg("--database-url")
            .arg(self.database_url())
            .args(["--redis-url", &self.redis.url()])
            .args(["--code-secret", CODE_SECRET])
            .env("RUST_LOG", "warn")
            .output()
            .expect("run shortlink-sidecar")
    }

    /// `shortlink-sidecar resync`, asserting success; returns what it printed.
    pub fn resync(&self) -> String {
        let output = self.sidecar_cli(&["resync"]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "resync failed: {text}");
        text
    }

    /// Another sidecar on this system's database and Redis, with the flags its own sidecar last
    /// started with, on a free port, its log in `dir`: a second machine behind the same nginx
    /// config. Reach it directly with [`Sidecar::api`] (nginx does not know it).
    pub fn second_sidecar(&self, dir: &tempfile::TempDir) -> Sidecar {
        let database = self.database_url();
        Sidecar::spawn(dir, &self.redis, &database, 0, self.sidecar.args.clone())
    }

    /// Starts the sidecar again on its old port (after a crash or stop), on the same database,
    /// with the flags it last started with.
    pub fn restart_sidecar(&mut self) {
        let args = self.sidecar.args.clone();
        self.restart_sidecar_with(&args);
    }

    /// [`System::restart_sidecar_with`] the domain health job checking every 200 ms over a
    /// ten-minute window, and `extra`: for the tests that watch a domain's clicks stop.
    pub fn restart_sidecar_watching_domains(&mut self, extra: &[&str]) {
        let health = [
            "--domain-health-every",
            "200ms",
            "--domain-health-window",
            "10m",
        ];
        self.restart_sidecar_with(&[&health[..], extra].concat());
    }

    /// Starts the sidecar again on its old port with `args` added to its usual flags: settings
    /// that name this system's nginx (the domain health probes), whose ports exist only once it
    /// runs. Later [`System::restart_sidecar`] calls keep them.
    pub fn restart_sidecar_with<S: AsRef<str>>(&mut self, args: &[S]) {
        self.sidecar.process.stop();
        let database = self.database_url();
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
        self.sidecar = Sidecar::spawn(&self.dir, &self.redis, &database, self.sidecar.port, args);
    }
}

/// The sidecar process.
pub struct Sidecar {
    pub port: u16,
    /// Its `--metrics-listen` port: `GET /metrics`, the operator's.
    pub metrics_port: u16,
    pub process: Lifeline,
    /// Flags beyond the usual ones ([`System::restart_sidecar_with`]).
    args: Vec<String>,
}

impl Sidecar {
    /// A sidecar on any database (e.g. a PostgreSQL the test controls), without nginx; its log is
    /// `sidecar.log` in `dir`. Reach its API directly with [`Sidecar::api`].
    pub fn start_on_database(
        dir: &tempfile::TempDir,
        redis: &RedisServer,
        database_url: &str,
        port: u16,
    ) -> Self {
        Self::spawn(dir, redis, database_url, port, Vec::new())
    }

    fn spawn(
        dir: &tempfile::TempDir,
        redis: &RedisServer,
        database_url: &str,
        port: u16,
        args: Vec<String>,
    ) -> Self {
        // Right after start-up the sidecar marks Redis as holding the whole projection
        // (`sl:meta:projection`); until then nginx falls back for every code. Waiting for it
        // (when Redis is up at all) gives tests a system answering from Redis, and a Redis that no
        // longer changes by itself.
        let projected = || {
            redis.cli(&["PING"]) != "PONG"
                || redis.cli(&["EXISTS", PROJECTION_MARKER]) == "(integer) 1"
        };
        Self::launch(dir, &redis.url(), database_url, port, args, projected)
    }

    /// The sidecar on `redis_url` (and whatever `args` add, such as `--redis-cluster`); returns
    /// once it listens and `projected` says Redis holds the projection.
    pub(crate) fn launch(
        dir: &tempfile::TempDir,
        redis_url: &str,
        database_url: &str,
        port: u16,
        args: Vec<String>,
        projected: impl Fn() -> bool,
    ) -> Self {
        // The operator's metrics listener, apart from the API nginx passes brands' tools on to;
        // on a port the sidecar picks and prints, as its API's, so no other test can take it
        // between a pick and the bind.
        let process = Lifeline::builder(paths::sidecar_bin(), dir.path().join("sidecar.log"))
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(["--database-url", database_url])
            .args(["--redis-url", redis_url])
            .args(["--code-secret", CODE_SECRET])
            .args(["--bootstrap-api-key", API_KEY])
            .args(["--proxy-secret", PROXY_SECRET])
            .args(["--public-base-url", "http://s1.test"])
            .arg("--geoip-db")
            .arg(paths::test_geo_db())
            .args(&args)
            // `E2E_LOG=debug cargo test ...` shows what the sidecar did in a failed test's log.
            .env(
                "RUST_LOG",
                std::env::var("E2E_LOG").unwrap_or("warn".into()),
            )
            .capture_stdout()
            .spawn();
        let line = process.wait_for_line(Duration::from_secs(30), |line| {
            line.starts_with("shortlink-sidecar listening on ")
        });
        let port_of = |line: String| -> u16 {
            (line.rsplit(':').next())
                .and_then(|port| port.trim().parse().ok())
                .unwrap_or_else(|| panic!("no port in {line:?}"))
        };
        let port = port_of(line);
        let metrics_port = port_of(process.wait_for_line(Duration::from_secs(30), |line| {
            line.starts_with("shortlink-sidecar metrics on ")
        }));
        let marked = testkit::wait_until(Duration::from_secs(10), projected);
        assert!(
            marked,
            "the sidecar did not mark the projection; log:\n{}",
            process.log_text()
        );
        Sidecar {
            port,
            metrics_port,
            process,
            args,
        }
    }

    /// The sidecar's Prometheus page, on the operator's metrics listener.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.metrics_port)
    }

    /// The sidecar's own API (no nginx in front: short URLs use `--public-base-url`).
    pub fn api(&self) -> Api {
        Api::new(format!("http://127.0.0.1:{}", self.port), API_KEY)
    }
}

/// Whether this process runs as root (then nginx's workers run as `nobody`).
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// Runs `program` as the unprivileged user `nobody` (group `nogroup`, no supplementary groups), as
/// nginx's workers run under a root master; `None` when this process is not root and cannot switch.
pub fn run_as_nobody(program: &str, args: &[&std::ffi::OsStr]) -> Option<std::process::Output> {
    if !running_as_root() {
        return None;
    }
    let output = std::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            program,
        ])
        .args(args)
        .output()
        .expect("run setpriv");
    Some(output)
}

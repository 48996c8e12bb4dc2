//! The whole system on loopback for end-to-end tests: a private Redis, the sidecar on a fresh SQLite
//! database, and nginx with the shortlink module, rendered from the same templates `scripts/run` uses.
//!
//! The binaries are the ones `cargo build` left beside this test executable (the test command builds
//! the sidecar and the module before running tests).

mod api;
mod nginx;
mod paths;

pub use api::Api;
pub use nginx::{Nginx, NginxOptions};

use std::time::Duration;
use testkit::{Lifeline, RedisServer};

/// The code secret every end-to-end system shares (the module and the sidecar must agree).
pub const CODE_SECRET: &str = "5e1f0d7c3b2a19887766554433221100ffeeddccbbaa99887766554433221100";
pub const API_KEY: &str = "slk_e2e_test_key_0123456789abcdefghijklmnopqrstuvwxyz";
pub const POOL: [&str; 2] = ["s1.test", "s2.test"];

/// Redis + sidecar + nginx, stopped on drop.
pub struct System {
    pub redis: RedisServer,
    pub sidecar: Sidecar,
    pub nginx: Nginx,
    pub dir: tempfile::TempDir,
}

impl System {
    pub fn start() -> Self {
        Self::start_with(NginxOptions::default())
    }

    pub fn start_with(options: NginxOptions) -> Self {
        let dir = testkit::temp_dir();
        let redis = RedisServer::start();
        let sidecar = Sidecar::start(&dir, &redis);
        let nginx = Nginx::start(&dir, &redis, &sidecar, options);
        System {
            redis,
            sidecar,
            nginx,
            dir,
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

/// The sidecar process.
pub struct Sidecar {
    pub port: u16,
    pub process: Lifeline,
}

impl Sidecar {
    fn start(dir: &tempfile::TempDir, redis: &RedisServer) -> Self {
        let database = dir.path().join("shortlink.db");
        let process = Lifeline::builder(paths::sidecar_bin(), dir.path().join("sidecar.log"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .arg("--database-url")
            .arg(format!("sqlite://{}", database.display()))
            .args(["--redis-url", &redis.url()])
            .args(["--code-secret", CODE_SECRET])
            .args(["--bootstrap-api-key", API_KEY])
            .args(["--public-base-url", "http://s1.test"])
            .env("RUST_LOG", "warn")
            .capture_stdout()
            .spawn();
        let line = process.wait_for_line(Duration::from_secs(30), |line| {
            line.starts_with("shortlink-sidecar listening on ")
        });
        let port = line
            .rsplit(':')
            .next()
            .and_then(|port| port.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Sidecar { port, process }
    }
}

/// A blocking HTTP client that never follows redirects: the tests look at the redirect itself.
pub fn http_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build an HTTP client")
}

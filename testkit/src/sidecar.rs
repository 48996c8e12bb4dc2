//! A `shortlink-sidecar serve` process on a free port, for tests and benchmarks that need the
//! real binary (several processes, a crash, CPU time) rather than an app in their own process.

use crate::process::Lifeline;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

/// What the sidecar prints once it accepts connections; the rest of the line is its address.
const LISTENING: &str = "shortlink-sidecar listening on ";

/// The settings of one sidecar process.
pub struct Sidecar<'a> {
    pub database_url: &'a str,
    pub redis_url: &'a str,
    /// The code secret, as hex.
    pub secret_hex: &'a str,
    /// The API key it creates at start-up.
    pub api_key: &'a str,
    /// Flags after the common ones (timeouts, `--consumer false`, ...).
    pub args: &'a [&'a str],
}

impl Sidecar<'_> {
    /// Starts `binary serve` and returns it with its base URL (`http://<addr>`) once it listens.
    /// The lifeline stops it when dropped, also when the caller panics or dies.
    pub fn start(&self, binary: impl AsRef<OsStr>, log: impl Into<PathBuf>) -> (Lifeline, String) {
        let process = Lifeline::builder(binary, log)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(["--database-url", self.database_url])
            .args(["--redis-url", self.redis_url])
            .args(["--code-secret", self.secret_hex])
            .args(["--bootstrap-api-key", self.api_key])
            .args(self.args)
            .env("RUST_LOG", "warn")
            .capture_stdout()
            .spawn();
        let line =
            process.wait_for_line(Duration::from_secs(60), |line| line.starts_with(LISTENING));
        let addr = line.trim_start_matches(LISTENING).trim();
        (process, format!("http://{addr}"))
    }
}

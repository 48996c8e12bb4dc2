//! One private PostgreSQL cluster per test process, a fresh database per test; and dedicated
//! clusters for tests that stop and start the server.
//!
//! A cluster takes a second or two to create, a database a few milliseconds: so the cluster is
//! shared by the tests of one process and each test gets its own database. A test that takes the
//! server down ([`Postgres::dedicated`]) gets a cluster of its own, so it cannot disturb the others.

use crate::process::{Lifeline, Signal};
use crate::restartable::{fresh_database_name, Restartable};
use crate::{free_port, wait_until};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub struct Postgres {
    port: u16,
    socket_dir: PathBuf,
    data: PathBuf,
    log: PathBuf,
    as_root: bool,
    /// `None` until started.
    server: Option<Restartable>,
}

/// The test process's PostgreSQL, started on first use.
pub fn postgres() -> &'static Postgres {
    static CLUSTER: OnceLock<Postgres> = OnceLock::new();
    CLUSTER.get_or_init(Postgres::start)
}

impl Postgres {
    /// The shared cluster: its server's lifeline removes the directory when it stops.
    fn start() -> Self {
        let mut cluster = Self::init();
        let root = cluster.root();
        cluster.server = Some(Restartable::shared(&root, &|dir| cluster.spawn_server(dir)));
        cluster.wait_ready();
        cluster
    }

    /// A cluster of its own, for a test that stops and starts the server; stopped and removed on
    /// drop (or when the test process ends).
    pub fn dedicated() -> Self {
        let mut cluster = Self::init();
        let root = cluster.root();
        cluster.server = Some(Restartable::dedicated(&root, &|dir| {
            cluster.spawn_server(dir)
        }));
        cluster.wait_ready();
        cluster
    }

    fn root(&self) -> PathBuf {
        self.data
            .parent()
            .expect("data sits in the root")
            .to_owned()
    }

    /// Creates the cluster's files (initdb); the server is not running yet.
    fn init() -> Self {
        let bin = server_bin_dir();
        // Not a TempDir: a lifeline removes it after the server stops, also at process exit.
        let root = tempfile::Builder::new()
            .prefix("shortlink-pg-")
            .tempdir()
            .expect("create a PostgreSQL directory")
            .keep();
        let data = root.join("data");
        let socket_dir = root.join("run");
        std::fs::create_dir_all(&socket_dir).expect("create the socket directory");
        let as_root = running_as_root();
        if as_root {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&root)
                .status()
                .expect("run chown");
            assert!(status.success(), "chown the PostgreSQL directory");
        }

        let initdb = server_command(as_root, bin.join("initdb"));
        let initdb = Command::new(&initdb[0])
            .args(&initdb[1..])
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .expect("run initdb");
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        Postgres {
            port: free_port(),
            socket_dir,
            data,
            log: root.join("postgres.log"),
            as_root,
            server: None,
        }
    }

    fn spawn_server(&self, cleanup: Option<&Path>) -> Lifeline {
        let server = server_command(self.as_root, server_bin_dir().join("postgres"));
        let mut builder = Lifeline::builder(&server[0], &self.log)
            .args(&server[1..])
            .arg("-D")
            .arg(&self.data)
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .arg("-k")
            .arg(&self.socket_dir)
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=300"])
            // SIGINT is PostgreSQL's fast shutdown: sessions are ended, then a clean stop.
            .stop_signal(Signal::Int);
        if let Some(dir) = cleanup {
            builder = builder.cleanup(dir);
        }
        builder.spawn()
    }

    fn wait_ready(&self) {
        assert!(
            wait_until(Duration::from_secs(30), || self.psql("SELECT 1").is_ok()),
            "PostgreSQL did not start on port {}; log:\n{}",
            self.port,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Stops the server with a fast shutdown (open sessions are terminated, transactions rolled
    /// back) and waits until it is gone. Data stays for [`Postgres::start_again`].
    pub fn stop(&mut self) {
        self.running().stop();
    }

    /// Starts the stopped server again on the same port and data, and waits until it answers.
    pub fn start_again(&mut self) {
        let mut server = self.server.take().expect("started");
        server.start_again(&|dir| self.spawn_server(dir));
        self.server = Some(server);
        self.wait_ready();
    }

    /// Whether the server is running (not stopped by [`Postgres::stop`]).
    pub fn is_running(&self) -> bool {
        self.server.as_ref().is_some_and(Restartable::is_running)
    }

    fn running(&mut self) -> &mut Restartable {
        self.server.as_mut().expect("started")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new, empty database; returns its connection URL.
    pub fn fresh_database_url(&self) -> String {
        let name = fresh_database_name();
        self.psql(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        self.database_url(&name)
    }

    pub fn database_url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs SQL through psql on the `postgres` database; returns its unaligned output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.psql_in("postgres", sql)
    }

    pub fn psql_in(&self, database: &str, sql: &str) -> Result<String, String> {
        let output = Command::new("psql")
            .arg("-h")
            .arg(&self.socket_dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

/// PostgreSQL refuses to run as root: as root, run it as the `postgres` user the package creates.
fn server_command(as_root: bool, program: PathBuf) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    if as_root {
        argv.extend(
            [
                "setpriv",
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
            ]
            .map(OsString::from),
        );
    }
    argv.push(program.into_os_string());
    argv
}

/// The newest server installed by Debian's postgresql packages.
fn server_bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed (apt-get install postgresql)")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .unwrap_or_else(|| Path::new("/usr/lib/postgresql/15/bin").to_owned())
}

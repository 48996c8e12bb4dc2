//! PostgreSQL for tests: one cluster per test process shared by its tests, each in a fresh
//! database, and dedicated clusters for tests that stop the server ([`crate::sql_server`]).

use crate::process::{Lifeline, Signal};
use crate::sql_server::{Engine, SqlServer};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub type Postgres = SqlServer<PostgresEngine>;

/// The test process's PostgreSQL, started on first use.
pub fn postgres() -> &'static Postgres {
    static CLUSTER: OnceLock<Postgres> = OnceLock::new();
    CLUSTER.get_or_init(Postgres::shared)
}

/// A PostgreSQL cluster's files, and how its server runs.
pub struct PostgresEngine {
    socket_dir: PathBuf,
    data: PathBuf,
    log: PathBuf,
    as_root: bool,
}

impl Engine for PostgresEngine {
    const NAME: &'static str = "PostgreSQL";
    const DIR_PREFIX: &'static str = "shortlink-pg-";
    const ADMIN_DATABASE: &'static str = "postgres";
    const FIELD_SEPARATOR: char = '|';
    const START_TIMEOUT: Duration = Duration::from_secs(30);

    /// Creates the cluster's files (initdb).
    fn init(root: &Path) -> Self {
        let bin = server_bin_dir();
        let data = root.join("data");
        let socket_dir = root.join("run");
        std::fs::create_dir_all(&socket_dir).expect("create the socket directory");
        let as_root = running_as_root();
        if as_root {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(root)
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
        PostgresEngine {
            socket_dir,
            data,
            log: root.join("postgres.log"),
            as_root,
        }
    }

    fn spawn(&self, port: u16, cleanup: Option<&Path>) -> Lifeline {
        let server = server_command(self.as_root, server_bin_dir().join("postgres"));
        let mut builder = Lifeline::builder(&server[0], &self.log)
            .args(&server[1..])
            .arg("-D")
            .arg(&self.data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
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

    fn log(&self) -> &Path {
        &self.log
    }

    /// psql, unaligned, tuples only.
    fn query(&self, port: u16, database: &str, sql: &str) -> Result<String, String> {
        let output = Command::new("psql")
            .arg("-h")
            .arg(&self.socket_dir)
            .args(["-p", &port.to_string(), "-U", "postgres", "-d", database])
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    fn url(port: u16, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/{database}")
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

//! One private MariaDB server per test process, a fresh database per test; and dedicated servers
//! for tests that stop and start it.
//!
//! Like [`crate::postgres`]: creating the data directory takes half a second, a database a few
//! milliseconds, so the tests of one process share the server and each gets its own database. The
//! server reads no option file (`--no-defaults`), so Debian's `/etc/mysql` (and its service, which
//! the tests never use) cannot change what the tests see.

use crate::process::{Lifeline, Signal};
use crate::restartable::{fresh_database_name, Restartable};
use crate::{free_port, wait_until};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub struct MariaDb {
    port: u16,
    socket: PathBuf,
    data: PathBuf,
    log: PathBuf,
    /// `None` until started.
    server: Option<Restartable>,
}

/// The test process's MariaDB, started on first use.
pub fn mariadb() -> &'static MariaDb {
    static SERVER: OnceLock<MariaDb> = OnceLock::new();
    SERVER.get_or_init(MariaDb::start)
}

impl MariaDb {
    /// The shared server: its lifeline removes the directory when it stops.
    fn start() -> Self {
        let mut server = Self::init();
        let root = server.root();
        server.server = Some(Restartable::shared(&root, &|dir| server.spawn_server(dir)));
        server.wait_ready();
        server
    }

    /// A server of its own, for a test that stops and starts it; stopped and removed on drop (or
    /// when the test process ends).
    pub fn dedicated() -> Self {
        let mut server = Self::init();
        let root = server.root();
        server.server = Some(Restartable::dedicated(&root, &|dir| {
            server.spawn_server(dir)
        }));
        server.wait_ready();
        server
    }

    fn root(&self) -> PathBuf {
        self.data
            .parent()
            .expect("data sits in the root")
            .to_owned()
    }

    /// Creates the system tables (mariadb-install-db); the server is not running yet.
    fn init() -> Self {
        // Not a TempDir: a lifeline removes it after the server stops, also at process exit.
        let root = tempfile::Builder::new()
            .prefix("shortlink-mariadb-")
            .tempdir()
            .expect("create a MariaDB directory")
            .keep();
        let data = root.join("data");
        // Its own temporary directory: servers bootstrapping side by side in the shared /tmp were
        // seen to fail on each other's temporary tables ("Could not remove temporary table").
        let tmp = root.join("tmp");
        std::fs::create_dir_all(&tmp).expect("create MariaDB's tmpdir");
        let install = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--user={}", current_user()))
            // root without a password, over TCP from 127.0.0.1 (the tests' only client).
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg("--skip-name-resolve")
            .output()
            .expect("run mariadb-install-db (apt-get install mariadb-server)");
        assert!(
            install.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&install.stdout),
            String::from_utf8_lossy(&install.stderr)
        );
        MariaDb {
            port: free_port(),
            socket: root.join("mariadb.sock"),
            data,
            log: root.join("mariadb.log"),
            server: None,
        }
    }

    fn spawn_server(&self, cleanup: Option<&Path>) -> Lifeline {
        let mut builder = Lifeline::builder("mariadbd", &self.log)
            .arg("--no-defaults")
            .arg(format!("--user={}", current_user()))
            .arg(format!("--datadir={}", self.data.display()))
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!(
                "--tmpdir={}",
                self.data.with_file_name("tmp").display()
            ))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
            .arg(format!(
                "--pid-file={}",
                self.data.with_file_name("mariadb.pid").display()
            ))
            // Test speed, like PostgreSQL's fsync=off: a committed transaction reaches the OS,
            // which is what a server stop and start (not a machine crash) needs.
            .args(["--innodb-flush-log-at-trx-commit=2", "--skip-log-bin"])
            .args(["--innodb-doublewrite=0", "--max-connections=300"])
            .args(["--innodb-buffer-pool-size=512M", "--max-allowed-packet=64M"])
            // Room for a million-link batch's redo without checkpoints stalling it.
            .args(["--innodb-log-file-size=1G", "--innodb-flush-method=nosync"])
            // SIGTERM is mariadbd's normal shutdown: sessions are ended, then a clean stop.
            .stop_signal(Signal::Term);
        if let Some(dir) = cleanup {
            builder = builder.cleanup(dir);
        }
        builder.spawn()
    }

    fn wait_ready(&self) {
        assert!(
            wait_until(Duration::from_secs(60), || self.sql("SELECT 1").is_ok()),
            "MariaDB did not start on port {}; log:\n{}",
            self.port,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Stops the server (a normal shutdown: sessions end, uncommitted transactions roll back)
    /// and waits until it is gone. Data stays for [`MariaDb::start_again`].
    pub fn stop(&mut self) {
        self.running().stop();
    }

    /// Kills the server (SIGKILL: no shutdown at all, InnoDB recovers from its log on the next
    /// start). Data stays for [`MariaDb::start_again`].
    pub fn kill(&mut self) {
        self.running().kill();
    }

    /// Starts the stopped server again on the same port and data, and waits until it answers.
    pub fn start_again(&mut self) {
        let mut server = self.server.take().expect("started");
        server.start_again(&|dir| self.spawn_server(dir));
        self.server = Some(server);
        self.wait_ready();
    }

    /// Whether the server is running (not stopped by [`MariaDb::stop`]).
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
        self.sql(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        self.database_url(&name)
    }

    pub fn database_url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs SQL through the `mariadb` client over the server's socket; returns its tab-separated
    /// output without column names.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        self.sql_in("mysql", sql)
    }

    pub fn sql_in(&self, database: &str, sql: &str) -> Result<String, String> {
        let output = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args([
                "-u",
                "root",
                "--batch",
                "--skip-column-names",
                "-D",
                database,
            ])
            .args(["-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }
}

/// mariadbd refuses to run as root unless told to: run it as whoever runs the tests.
fn current_user() -> String {
    Command::new("id")
        .arg("-un")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "root".into())
}

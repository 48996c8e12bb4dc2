//! MariaDB for tests: one server per test process shared by its tests, each in a fresh database,
//! and dedicated servers for tests that stop it ([`crate::sql_server`]). The server reads no
//! option file (`--no-defaults`), so Debian's `/etc/mysql` (and its service, which the tests never
//! use) cannot change what the tests see.

use crate::process::{Lifeline, Signal};
use crate::sql_server::{Engine, SqlServer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub type MariaDb = SqlServer<MariaDbEngine>;

/// The test process's MariaDB, started on first use.
pub fn mariadb() -> &'static MariaDb {
    static SERVER: OnceLock<MariaDb> = OnceLock::new();
    SERVER.get_or_init(MariaDb::shared)
}

/// A MariaDB server's files, and how it runs.
pub struct MariaDbEngine {
    socket: PathBuf,
    data: PathBuf,
    tmp: PathBuf,
    log: PathBuf,
}

impl Engine for MariaDbEngine {
    const NAME: &'static str = "MariaDB";
    const DIR_PREFIX: &'static str = "shortlink-mariadb-";
    const ADMIN_DATABASE: &'static str = "mysql";
    const FIELD_SEPARATOR: char = '\t';
    const START_TIMEOUT: Duration = Duration::from_secs(60);

    /// Creates the system tables (mariadb-install-db).
    fn init(root: &Path) -> Self {
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
        MariaDbEngine {
            socket: root.join("mariadb.sock"),
            data,
            tmp,
            log: root.join("mariadb.log"),
        }
    }

    fn spawn(&self, port: u16, cleanup: Option<&Path>) -> Lifeline {
        let mut builder = Lifeline::builder("mariadbd", &self.log)
            .arg("--no-defaults")
            .arg(format!("--user={}", current_user()))
            .arg(format!("--datadir={}", self.data.display()))
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!("--tmpdir={}", self.tmp.display()))
            .arg(format!("--port={port}"))
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

    fn log(&self) -> &Path {
        &self.log
    }

    /// The `mariadb` client over the server's socket, tab-separated, no column names.
    fn query(&self, _port: u16, database: &str, sql: &str) -> Result<String, String> {
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

    fn url(port: u16, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{port}/{database}")
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

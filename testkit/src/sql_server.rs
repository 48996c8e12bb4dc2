//! A SQL server for tests (PostgreSQL, MariaDB), written once over what differs between the
//! engines ([`Engine`]).
//!
//! Creating a server's files takes a second or so, a database a few milliseconds: so the tests of
//! one process share a server and each gets its own database. A test that takes the server down
//! gets a dedicated one ([`SqlServer::dedicated`]), which it may stop, kill and start again on the
//! same data without disturbing the others.

use crate::process::{Lifeline, Signal};
use crate::{free_port, wait_until};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// What one database engine does its own way.
pub trait Engine: Sized {
    /// For messages: "PostgreSQL", "MariaDB".
    const NAME: &'static str;
    /// The prefix of the server's temporary directory.
    const DIR_PREFIX: &'static str;
    /// The database that always exists (where databases are created).
    const ADMIN_DATABASE: &'static str;
    /// Between the columns of a row that [`SqlServer::query_in`] returns.
    const FIELD_SEPARATOR: char;
    /// How long a start may take before the server answers.
    const START_TIMEOUT: Duration;

    /// Creates the server's files under `root`; the server is not running yet.
    fn init(root: &Path) -> Self;
    /// Starts the server on `port`; `Some(dir)`: its lifeline removes `dir` when it stops.
    fn spawn(&self, port: u16, cleanup: Option<&Path>) -> Lifeline;
    /// The server's log file.
    fn log(&self) -> &Path;
    /// Runs `sql` in `database` with the engine's command-line client: its rows, columns joined
    /// by [`Engine::FIELD_SEPARATOR`], no header, trimmed; the client's error output on failure.
    fn query(&self, port: u16, database: &str, sql: &str) -> Result<String, String>;
    /// The URL the sidecar reaches `database` by.
    fn url(port: u16, database: &str) -> String;
}

pub struct SqlServer<E: Engine> {
    engine: E,
    port: u16,
    /// `None` until started.
    server: Option<Restartable>,
}

impl<E: Engine> SqlServer<E> {
    /// The server shared by the tests of a process: its lifeline removes the directory when it
    /// stops.
    pub(crate) fn shared() -> Self {
        let (mut server, root) = Self::init();
        server.server = Some(Restartable::shared(&root, &|dir| {
            server.engine.spawn(server.port, dir)
        }));
        server.wait_ready();
        server
    }

    /// A server of its own, for a test that stops and starts it; stopped and removed on drop (or
    /// when the test process ends).
    pub fn dedicated() -> Self {
        let (mut server, root) = Self::init();
        server.server = Some(Restartable::dedicated(&root, &|dir| {
            server.engine.spawn(server.port, dir)
        }));
        server.wait_ready();
        server
    }

    fn init() -> (Self, PathBuf) {
        // Not a TempDir: a lifeline removes it after the server stops, also at process exit.
        let root = tempfile::Builder::new()
            .prefix(E::DIR_PREFIX)
            .tempdir()
            .unwrap_or_else(|e| panic!("create a {} directory: {e}", E::NAME))
            .keep();
        let server = Self {
            engine: E::init(&root),
            port: free_port(),
            server: None,
        };
        (server, root)
    }

    fn wait_ready(&self) {
        assert!(
            wait_until(E::START_TIMEOUT, || self.query("SELECT 1").is_ok()),
            "{} did not start on port {}; log:\n{}",
            E::NAME,
            self.port,
            std::fs::read_to_string(self.engine.log()).unwrap_or_default()
        );
    }

    /// Stops the server (its normal fast shutdown: sessions end, open transactions roll back)
    /// and waits until it is gone. Data stays for [`SqlServer::start_again`].
    pub fn stop(&mut self) {
        self.running().stop();
    }

    /// Kills the server (SIGKILL: no shutdown at all; it recovers from its log on the next
    /// start). Data stays for [`SqlServer::start_again`].
    pub fn kill(&mut self) {
        self.running().kill();
    }

    /// Starts the stopped server again on the same port and data, and waits until it answers.
    pub fn start_again(&mut self) {
        let mut server = self.server.take().expect("started");
        server.start_again(&|dir| self.engine.spawn(self.port, dir));
        self.server = Some(server);
        self.wait_ready();
    }

    /// Whether the server is running (not stopped or killed).
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
        self.query(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        self.database_url(&name)
    }

    pub fn database_url(&self, database: &str) -> String {
        E::url(self.port, database)
    }

    /// Runs SQL in the engine's administrative database ([`Engine::ADMIN_DATABASE`]).
    pub fn query(&self, sql: &str) -> Result<String, String> {
        self.query_in(E::ADMIN_DATABASE, sql)
    }

    /// Runs SQL in `database`: its rows, columns joined by [`Engine::FIELD_SEPARATOR`].
    pub fn query_in(&self, database: &str, sql: &str) -> Result<String, String> {
        self.engine.query(self.port, database, sql)
    }
}

/// The server's process, and for a dedicated server a janitor that removes the directory once the
/// test is done with it: the server's own lifeline must not, since it stops and starts again.
struct Restartable {
    /// `None` while stopped. Declared before `janitor`, so it is dropped (the server stopped)
    /// before the directory goes.
    server: Option<Lifeline>,
    janitor: Option<Lifeline>,
}

/// Starts the server; `Some(dir)`: its lifeline removes `dir` when it stops.
type Spawn<'a> = &'a dyn Fn(Option<&Path>) -> Lifeline;

impl Restartable {
    fn shared(root: &Path, spawn: Spawn) -> Self {
        Self {
            server: Some(spawn(Some(root))),
            janitor: None,
        }
    }

    fn dedicated(root: &Path, spawn: Spawn) -> Self {
        // A process whose only job is to remove the directory when its lifeline ends.
        let janitor = Lifeline::builder("sleep", root.join("janitor.log"))
            .arg("infinity")
            .cleanup(root)
            .spawn();
        Self {
            server: Some(spawn(None)),
            janitor: Some(janitor),
        }
    }

    /// Stops the server with its stop signal and waits until it is gone.
    fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// SIGKILLs the server (no shutdown at all) and waits until it is gone.
    fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.signal(Signal::Kill);
            server.stop();
        }
    }

    fn start_again(&mut self, spawn: Spawn) {
        assert!(self.server.is_none(), "the server is running");
        assert!(
            self.janitor.is_some(),
            "only a dedicated server restarts (the shared one's directory goes with it)"
        );
        self.server = Some(spawn(None));
    }

    fn is_running(&self) -> bool {
        self.server.as_ref().is_some_and(Lifeline::is_alive)
    }
}

/// A database name no other test of any process uses on a shared server.
fn fresh_database_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

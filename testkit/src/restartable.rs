//! A database server that a test may stop and start again on the same data (PostgreSQL, MariaDB),
//! with the directory it lives in.

use crate::process::{Lifeline, Signal};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

/// The server's process, and for a dedicated server a janitor that removes the directory once the
/// test is done with it: the server's own lifeline must not, since it stops and starts again.
pub(crate) struct Restartable {
    /// `None` while stopped. Declared before `janitor`, so it is dropped (the server stopped)
    /// before the directory goes.
    server: Option<Lifeline>,
    janitor: Option<Lifeline>,
}

/// Starts the server; `Some(dir)`: its lifeline removes `dir` when it stops.
pub(crate) type Spawn<'a> = &'a dyn Fn(Option<&Path>) -> Lifeline;

impl Restartable {
    /// A server shared by the tests of a process: its lifeline removes `root` when it stops.
    pub(crate) fn shared(root: &Path, spawn: Spawn) -> Self {
        Self {
            server: Some(spawn(Some(root))),
            janitor: None,
        }
    }

    /// A server of a test's own, which may stop and start again; `root` goes when this is dropped
    /// (or when the test process ends).
    pub(crate) fn dedicated(root: &Path, spawn: Spawn) -> Self {
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
    pub(crate) fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// SIGKILLs the server (no shutdown at all) and waits until it is gone.
    pub(crate) fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.signal(Signal::Kill);
            server.stop();
        }
    }

    /// Starts the stopped server again.
    pub(crate) fn start_again(&mut self, spawn: Spawn) {
        assert!(self.server.is_none(), "the server is running");
        assert!(
            self.janitor.is_some(),
            "only a dedicated server restarts (the shared one's directory goes with it)"
        );
        self.server = Some(spawn(None));
    }

    pub(crate) fn is_running(&self) -> bool {
        self.server.as_ref().is_some_and(Lifeline::is_alive)
    }
}

/// A database name no other test of any process uses on a shared server.
pub(crate) fn fresh_database_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

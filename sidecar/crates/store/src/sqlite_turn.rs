//! Turns on a SQLite file between the serving process and a command run beside it (issue 82).
//!
//! SQLite has one writer and no queue: a connection that finds the write lock taken sleeps and
//! looks again (its busy handler: after 1, 2, 5 ... ms, then every 100 ms) until its busy timeout
//! (`--db-timeout`). The sidecar takes the lock again within microseconds of each commit (its
//! writers queue on its one write connection: [`super::sqlite_file`]), so beside a sidecar that
//! writes without pause (a batch's groups, a burst of creates, the visit consumer) a command's
//! look lands on a free lock only by luck, and the command gives up with "database is locked"
//! however short each of the sidecar's transactions is (measured: bench/results/
//! sqlite-lock-2026-11-29.md).
//!
//! So a command says that it waits: while its write connection is out of its pool (from the
//! moment it is handed out until it goes back) it holds a shared `flock` on `<database>-waiting`.
//! Before each of its own writes, the serving process looks (a non-blocking exclusive `flock`,
//! two system calls) and, while a command waits, holds its write back, up to
//! [`GIVE_WAY_AT_MOST`]: the lock is free at the command's next look. Then it takes one turn
//! whatever waits, so the two alternate: a command that writes for long (an import) slows the
//! sidecar's writes without stopping them, and a command stuck while it waits costs each of the
//! sidecar's writes at most that. Commands never give way, so no two processes wait for each
//! other; between two commands SQLite's busy handler decides, as before. The file holds nothing;
//! it lies beside the database like SQLite's own `-wal` and `-shm`.

use rustix::fs::{flock, FlockOperation};
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long the serving process holds one write back for a waiting command: a command's busy
/// handler looks every 100 ms at most, and its write is one short transaction.
pub const GIVE_WAY_AT_MOST: Duration = Duration::from_secs(1);

/// How often a held-back write looks whether the command is done.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Whether this process serves (`serve`, `consume`): its writes give way to commands' ones.
static SERVING: AtomicBool = AtomicBool::new(false);

/// Marks this process as the one that serves the database: from the next SQLite file it opens,
/// its writes give way to a command waiting to write (see the module's documentation). Every other
/// process is a command, which says when it waits.
pub fn serve_beside_commands() {
    SERVING.store(true, Ordering::Relaxed);
}

/// This process's side of the turns on one database file.
pub(crate) struct Turns {
    waiting: File,
    serving: bool,
    /// The serving process's last write gave way: this one goes first.
    gave_way: AtomicBool,
}

impl Turns {
    /// The turns on the database file `database` (in this process's role), or none for a file
    /// that cannot have its `-waiting` beside it (a read-only directory, an in-memory database).
    pub(crate) fn open(database: &Path) -> Option<Self> {
        Self::open_as(database, SERVING.load(Ordering::Relaxed))
    }

    fn open_as(database: &Path, serving: bool) -> Option<Self> {
        let name = database.file_name()?.to_str()?;
        if name.is_empty() || name.starts_with(':') {
            return None;
        }
        let waiting = database.with_file_name(format!("{name}-waiting"));
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&waiting);
        match opened {
            Ok(waiting) => Some(Self {
                waiting,
                serving,
                gave_way: AtomicBool::new(false),
            }),
            Err(error) => {
                tracing::debug!(%error, file = %waiting.display(), "no turns with commands on this file");
                None
            }
        }
    }

    /// Before this process writes: a command says that it waits; the serving process gives way
    /// to a command that does.
    pub(crate) async fn before_write(&self) {
        if !self.serving {
            // Only the serving process's look holds it exclusively, for two system calls.
            if let Err(error) = flock(&self.waiting, FlockOperation::LockShared) {
                tracing::debug!(%error, "cannot say that this command waits for the SQLite writer");
            }
            return;
        }
        if self.gave_way.swap(false, Ordering::Relaxed) || !self.a_command_waits() {
            return;
        }
        tracing::debug!("a command waits for the SQLite write lock: the sidecar's write gives way");
        self.gave_way.store(true, Ordering::Relaxed);
        let until = Instant::now() + GIVE_WAY_AT_MOST;
        while Instant::now() < until && self.a_command_waits() {
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// After this process wrote: a command no longer waits.
    pub(crate) fn after_write(&self) {
        if !self.serving {
            let _ = flock(&self.waiting, FlockOperation::Unlock);
        }
    }

    fn a_command_waits(&self) -> bool {
        match flock(&self.waiting, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let _ = flock(&self.waiting, FlockOperation::Unlock);
                false
            }
            Err(Errno::WOULDBLOCK) => true,
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_command_says_that_it_waits_while_its_writer_is_out_and_the_sidecar_never_does() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.db");
        let sidecar = Turns::open_as(&file, true).unwrap();
        let command = Turns::open_as(&file, false).unwrap();
        assert!(!sidecar.a_command_waits());
        command.before_write().await;
        assert!(sidecar.a_command_waits());
        command.after_write();
        assert!(!sidecar.a_command_waits());

        // With no command waiting, the sidecar's writes go at once and say nothing.
        sidecar.before_write().await;
        assert!(!Turns::open_as(&file, true).unwrap().a_command_waits());
        sidecar.after_write();
    }

    #[tokio::test]
    async fn the_sidecar_gives_way_once_then_takes_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.db");
        let sidecar = Turns::open_as(&file, true).unwrap();
        let command = Turns::open_as(&file, false).unwrap();
        command.before_write().await;
        // A command stuck while it waits: the write gives way, for GIVE_WAY_AT_MOST ...
        sidecar.before_write().await;
        assert!(sidecar.gave_way.load(Ordering::Relaxed));
        // ... and the next one goes first.
        sidecar.before_write().await;
        assert!(!sidecar.gave_way.load(Ordering::Relaxed));
    }

    #[test]
    fn an_in_memory_database_has_no_turns() {
        assert!(Turns::open(Path::new(":memory:")).is_none());
    }
}

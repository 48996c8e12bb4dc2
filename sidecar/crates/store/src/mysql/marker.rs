//! The MariaDB/MySQL dialect's marker, in a file of its own: [`super::insert`] names it and
//! `mod.rs`, which calls the insert, implements the dialect on it.

/// The MariaDB/MySQL dialect, with the limits of the server it is connected to.
#[derive(Clone)]
pub struct My {
    /// Bytes of values per multi-row INSERT: half the server's `max_allowed_packet`, leaving
    /// room for the statement text and the protocol's framing.
    pub(super) insert_bytes: usize,
    /// Whether a batch group's transaction may run at READ COMMITTED: not where the server
    /// writes a statement-based binary log, which refuses InnoDB writes at that level.
    pub(super) batch_read_committed: bool,
}

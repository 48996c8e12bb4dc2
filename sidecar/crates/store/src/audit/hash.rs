//! The chain's hash. A row's hash is SHA-256 (lower-case hex) of its fields in a fixed order,
//! each length-prefixed, followed by the previous row's hash:
//!
//! ```text
//! "shortlink-audit-v1"
//! int  workspace_id, seq, at_ms        8 bytes big-endian each
//! text actor_kind                      4-byte big-endian length, then the UTF-8 bytes
//! opt  actor_id                        0x00 for none, else 0x01 and the int
//! text actor_name, action, object, changes
//! opt  request_id, client_addr (text), batch_size (int), idempotency_key (text)
//! text prev_hash
//! ```
//!
//! Length prefixes make the encoding unambiguous (no field can run into the next); the
//! version tag lets a later encoding coexist. The row id is not covered: it is the row's place
//! among all workspaces' rows, assigned by the database on insert; `seq` is its place in its chain.

use super::entry::AuditRecord;
use sha2::{Digest, Sha256};

/// The "previous hash" of a chain's first row, and the anchor of a chain nothing was pruned from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const VERSION: &[u8] = b"shortlink-audit-v1";

struct Encoder(Sha256);

impl Encoder {
    fn int(&mut self, value: i64) {
        self.0.update(value.to_be_bytes());
    }

    fn text(&mut self, value: &str) {
        // Fields are far below 4 GiB (the API caps bodies at 64 KiB).
        self.0.update((value.len() as u32).to_be_bytes());
        self.0.update(value.as_bytes());
    }

    fn opt_int(&mut self, value: Option<i64>) {
        match value {
            None => self.0.update([0]),
            Some(value) => {
                self.0.update([1]);
                self.int(value);
            }
        }
    }

    fn opt_text(&mut self, value: Option<&str>) {
        match value {
            None => self.0.update([0]),
            Some(value) => {
                self.0.update([1]);
                self.text(value);
            }
        }
    }
}

/// The hash `row` must carry: of its fields and its `prev_hash` (its own `hash` and `id` are not
/// read).
pub fn row_hash(row: &AuditRecord) -> String {
    let mut e = Encoder(Sha256::new());
    e.0.update(VERSION);
    e.int(row.workspace_id);
    e.int(row.seq);
    e.int(row.at_ms);
    e.text(&row.actor_kind);
    e.opt_int(row.actor_id);
    e.text(&row.actor_name);
    e.text(&row.action);
    e.text(&row.object);
    e.text(&row.changes);
    e.opt_text(row.request_id.as_deref());
    e.opt_text(row.client_addr.as_deref());
    e.opt_int(row.batch_size);
    e.opt_text(row.idempotency_key.as_deref());
    e.text(&row.prev_hash);
    hex(&e.0.finalize())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> AuditRecord {
        AuditRecord {
            id: 7,
            workspace_id: 1,
            seq: 1,
            at_ms: 1_700_000_000_000,
            actor_kind: "key".into(),
            actor_id: Some(3),
            actor_name: "tool".into(),
            action: "link.update".into(),
            object: "abc".into(),
            changes: "{}".into(),
            request_id: None,
            client_addr: None,
            batch_size: None,
            idempotency_key: None,
            prev_hash: GENESIS.into(),
            hash: String::new(),
        }
    }

    #[test]
    fn every_field_counts_and_none_runs_into_the_next() {
        let base = row_hash(&row());
        assert_eq!(base.len(), 64);
        let mut moved = row();
        // The same bytes split differently between two fields.
        moved.action = "link.updateabc".into();
        moved.object = String::new();
        assert_ne!(row_hash(&moved), base);
        let mut none_vs_empty = row();
        none_vs_empty.request_id = Some(String::new());
        assert_ne!(row_hash(&none_vs_empty), base);
        let mut other_prev = row();
        other_prev.prev_hash = "1".repeat(64);
        assert_ne!(row_hash(&other_prev), base);
        // Not covered: the id and the stored hash.
        let mut other_id = row();
        other_id.id = 8;
        other_id.hash = "x".into();
        assert_eq!(row_hash(&other_id), base);
    }
}

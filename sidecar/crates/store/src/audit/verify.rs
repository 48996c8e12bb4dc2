//! `audit verify`: walks each chain from its anchor and reports the first row that breaks it.

use super::entry::AuditHead;
use super::hash::{row_hash, GENESIS};
use crate::api::{Storage, StorageResult};
use std::fmt;

/// Rows read per query.
const PAGE: u32 = 1000;

/// The first thing wrong with a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Rows `expected..found` are missing (deleted).
    Gap { expected: i64, found: i64 },
    /// The row's `prev_hash` is not the hash of the row before it (or of the anchor).
    BrokenLink { seq: i64, id: i64 },
    /// The row's fields do not give its hash (edited).
    WrongHash { seq: i64, id: i64 },
    /// A row at or before the anchor retention left (pruned rows cannot come back).
    BeforeAnchor { seq: i64, id: i64 },
    /// The chain ends elsewhere than its head says: rows deleted from its end, or added after it.
    Head { head_seq: i64, last_seq: i64 },
    /// Rows of a workspace no append ever made (inserted in SQL).
    NoHead,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Gap { expected, found } => {
                write!(f, "rows {expected} to {} are missing (deleted)", found - 1)
            }
            Problem::BrokenLink { seq, id } => {
                write!(f, "row {seq} (id {id}) does not follow the row before it")
            }
            Problem::WrongHash { seq, id } => {
                write!(f, "row {seq} (id {id}) does not match its hash (edited)")
            }
            Problem::BeforeAnchor { seq, id } => write!(
                f,
                "row {seq} (id {id}) is at or before the retention anchor (inserted)"
            ),
            Problem::Head { head_seq, last_seq } if head_seq > last_seq => write!(
                f,
                "rows {} to {head_seq} are missing from the end (deleted)",
                last_seq + 1
            ),
            Problem::Head { head_seq, last_seq } if head_seq < last_seq => write!(
                f,
                "rows {} to {last_seq} follow the head (inserted)",
                head_seq + 1
            ),
            Problem::Head { .. } => write!(f, "the last row is not the head's (replaced)"),
            Problem::NoHead => write!(f, "rows without a chain head (inserted)"),
        }
    }
}

/// What [`verify`] found in one workspace's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub workspace_id: i64,
    /// Rows found sound before the first problem (all of them without one).
    pub rows_checked: u64,
    /// Where the rows checked start (the retention anchor: 0 when nothing was pruned).
    pub anchor_seq: i64,
    pub problem: Option<Problem>,
}

/// Walks every chain (or `workspace`'s) and reports each.
pub async fn verify(
    storage: &dyn Storage,
    workspace: Option<i64>,
) -> StorageResult<Vec<ChainReport>> {
    let mut reports = Vec::new();
    for head in storage.audit_heads().await? {
        if workspace.is_some_and(|only| only != head.workspace_id) {
            continue;
        }
        reports.push(verify_chain(storage, &head).await?);
    }
    Ok(reports)
}

async fn verify_chain(storage: &dyn Storage, head: &AuditHead) -> StorageResult<ChainReport> {
    let (anchor_seq, anchor_hash) = head.anchor.clone().unwrap_or((0, GENESIS.to_owned()));
    let mut report = ChainReport {
        workspace_id: head.workspace_id,
        rows_checked: 0,
        anchor_seq,
        problem: None,
    };
    if head.last.is_none() {
        report.problem = Some(Problem::NoHead);
        return Ok(report);
    }
    let (mut expected, mut prev) = (anchor_seq + 1, anchor_hash);
    let mut after = 0;
    'pages: loop {
        let rows = storage.audit_chain(head.workspace_id, after, PAGE).await?;
        let Some(last) = rows.last() else {
            break;
        };
        after = last.seq;
        for row in &rows {
            let problem = if row.seq <= anchor_seq {
                Some(Problem::BeforeAnchor {
                    seq: row.seq,
                    id: row.id,
                })
            } else if row.seq != expected {
                Some(Problem::Gap {
                    expected,
                    found: row.seq,
                })
            } else if row.prev_hash != prev {
                Some(Problem::BrokenLink {
                    seq: row.seq,
                    id: row.id,
                })
            } else if row_hash(row) != row.hash {
                Some(Problem::WrongHash {
                    seq: row.seq,
                    id: row.id,
                })
            } else {
                None
            };
            if problem.is_some() {
                report.problem = problem;
                break 'pages;
            }
            report.rows_checked += 1;
            expected += 1;
            prev.clone_from(&row.hash);
        }
    }
    if report.problem.is_none() {
        let last_seq = expected - 1;
        report.problem = match &head.last {
            None => Some(Problem::NoHead),
            Some((head_seq, head_hash)) if *head_seq != last_seq || *head_hash != prev => {
                Some(Problem::Head {
                    head_seq: *head_seq,
                    last_seq,
                })
            }
            Some(_) => None,
        };
    }
    Ok(report)
}

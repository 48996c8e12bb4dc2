//! What an import did: counts per outcome and per reason, each problem with its code, printed at
//! the end and, with `--report FILE`, written as JSON for machines.

use serde::Serialize;
use std::collections::BTreeMap;

/// Why a link was not imported now. `AlreadyImported` is the only reason a second run gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// An earlier run of this source imported it (same code, domain and target).
    AlreadyImported,
    /// The code is a link already: ours, another source's, or this source's on another domain
    /// or with another target. Never overwritten.
    Collision,
    /// The code cannot be kept as it is (`[A-Za-z0-9._~-]{1,64}`).
    InvalidCode,
    /// The target, a time, the tags or the cap fail our checks.
    Invalid,
    /// Protected by a password that cannot be carried over.
    PasswordProtected,
    /// The source gave a row that is not a link.
    Unreadable,
    /// Valid, but the write failed (Redis or the database unavailable).
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    pub code: String,
    pub domain: String,
    pub reason: Reason,
    pub message: String,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Report {
    pub source: String,
    pub dry_run: bool,
    /// Links the source gave (rows, for a file).
    pub read: u64,
    /// Created now (with `--dry-run`: would be).
    pub imported: u64,
    /// Individual visits stored now (a visit stored before is not counted again). With
    /// `--dry-run`: those of the links that would be created (an already imported link's
    /// missing visits, left by an interrupted run, are not counted).
    pub visits_imported: u64,
    /// Links not imported now, by reason.
    pub skipped: BTreeMap<Reason, u64>,
    /// Every link not imported now, except those already imported.
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn skip(&mut self, code: &str, domain: &str, reason: Reason, message: String) {
        *self.skipped.entry(reason).or_default() += 1;
        if reason != Reason::AlreadyImported {
            self.problems.push(Problem {
                code: code.to_owned(),
                domain: domain.to_owned(),
                reason,
                message,
            });
        }
    }

    pub fn count(&self, reason: Reason) -> u64 {
        self.skipped.get(&reason).copied().unwrap_or(0)
    }

    /// The summary lines for people.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "import --from {}{}: {} links read: {} {}imported, {} already imported",
            self.source,
            if self.dry_run { " (dry run)" } else { "" },
            self.read,
            self.imported,
            if self.dry_run { "would be " } else { "" },
            self.count(Reason::AlreadyImported),
        );
        let others: Vec<String> = self
            .skipped
            .iter()
            .filter(|(reason, _)| **reason != Reason::AlreadyImported)
            .map(|(reason, n)| format!("{n} {}", reason_name(*reason)))
            .collect();
        if !others.is_empty() {
            out.push_str(&format!(", skipped: {}", others.join(", ")));
        }
        out.push_str(&format!(
            "; {} visits {}imported",
            self.visits_imported,
            if self.dry_run { "would be " } else { "" }
        ));
        out
    }
}

pub fn reason_name(reason: Reason) -> &'static str {
    match reason {
        Reason::AlreadyImported => "already_imported",
        Reason::Collision => "collision",
        Reason::InvalidCode => "invalid_code",
        Reason::Invalid => "invalid",
        Reason::PasswordProtected => "password_protected",
        Reason::Unreadable => "unreadable",
        Reason::Failed => "failed",
    }
}

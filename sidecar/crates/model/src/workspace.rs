//! Who owns a link, a key, a webhook subscription (issue 53).
//!
//! Every read or write of an owned object names its workspace with a [`WorkspaceId`]: the
//! storage and the service take one, so a query that forgot to filter does not compile.

use std::fmt;

/// The id of a workspace (`workspaces.id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspaceId(i64);

impl WorkspaceId {
    /// The workspace every installation has, which an installation from before workspaces
    /// became (migration `workspaces`).
    pub const DEFAULT: WorkspaceId = WorkspaceId(1);

    /// An id read from the database or named by an operator; whether it exists is the caller's
    /// question.
    pub const fn from_db(id: i64) -> Self {
        WorkspaceId(id)
    }

    pub const fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for WorkspaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

//! What a retention policy is: the types the job and its store share (their own file, so the
//! store does not import the job that imports it).

use shortlink_model::WorkspaceId;

/// A workspace's own row: `None` takes the installation's setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceRetention {
    pub visits_days: Option<i64>,
    pub conversions_days: Option<i64>,
    pub webhook_failures_days: Option<i64>,
    /// Truncate visitors' addresses (`--anonymize-ip` for this workspace).
    pub anonymize_ip: Option<bool>,
}

impl WorkspaceRetention {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A campaign's row: `None` takes the workspace's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignRetention {
    pub campaign: String,
    pub visits_days: Option<i64>,
    pub conversions_days: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub workspace: WorkspaceRetention,
    pub campaigns: Vec<CampaignRetention>,
}

/// Whose raw visits a delete is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VisitScope {
    /// One campaign's links in one workspace.
    Campaign {
        workspace: WorkspaceId,
        campaign: String,
    },
    /// A workspace's links but those of `except`'s campaigns (which have their own).
    Workspace {
        workspace: WorkspaceId,
        except: Vec<String>,
    },
    /// Every link but those of these workspaces and campaigns (the installation's default).
    Rest {
        workspaces: Vec<WorkspaceId>,
        campaigns: Vec<(WorkspaceId, String)>,
    },
}

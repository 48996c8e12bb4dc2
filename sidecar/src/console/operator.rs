//! Who is signed in, and what their role lets them do. Kept apart from the sessions that find
//! them so the page layout can show the operator without depending on sign-in.
//!
//! Two kinds of people: [`Operator`], a workspace's key (every page but the operator's), and
//! [`InstanceOperator`], an operator key (the workspaces and the audit log only). A handler names
//! the one it serves, so a workspace page cannot be reached with a session that has no workspace.

use axum::http::StatusCode;
use shortlink_api::Error;
use shortlink_model::WorkspaceId;
use shortlink_store::{ApiKey, Role};
use subtle::ConstantTimeEq;

/// A signed-in person: their key's name, role and workspace, and the session's CSRF token.
#[derive(Clone)]
pub struct Operator {
    /// The signed-in key's id: what the jobs it starts act for (they stop once it is revoked).
    pub key: i64,
    pub name: String,
    pub role: Role,
    /// Every page shows and changes this workspace's objects only, as the key's API requests do.
    pub workspace: WorkspaceId,
    pub workspace_slug: String,
    /// The workspace's name, as its own page shows it.
    pub workspace_name: String,
    pub csrf: String,
    /// Every place of the session, this one included (the switcher shows the others).
    pub places: Vec<Place>,
}

/// A signed-in operator key: it manages workspaces and reads every audit chain, and never acts
/// in a workspace (no link, campaign or webhook page answers it).
#[derive(Clone)]
pub struct InstanceOperator {
    pub key: ApiKey,
    pub csrf: String,
    pub places: Vec<Place>,
}

impl InstanceOperator {
    pub fn check_csrf(&self, token: Option<&str>) -> Result<(), Error> {
        check_token(&self.csrf, token)
    }
}

impl Operator {
    /// Whether the role may create, change and revoke links (admin, issuer).
    pub fn may_issue(&self) -> bool {
        matches!(self.role, Role::Admin | Role::Issuer)
    }

    /// Refuses a change to a role that may only read, as the API does (403 `forbidden`).
    pub fn require_issue(&self) -> Result<(), Error> {
        if self.may_issue() {
            Ok(())
        } else {
            Err(Error::Forbidden(self.role))
        }
    }

    /// Refuses a page only admins see (webhooks, imports, the workspace's keys), as the API
    /// does for their routes (403 `forbidden`).
    pub fn require_admin(&self) -> Result<(), Error> {
        match self.role {
            Role::Admin => Ok(()),
            role => Err(Error::Forbidden(role)),
        }
    }

    /// Checks a form's CSRF token against the session's (constant time).
    pub fn check_csrf(&self, token: Option<&str>) -> Result<(), Error> {
        check_token(&self.csrf, token)
    }
}

/// Where a key acts: its workspace, or the whole installation (an operator key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Workspace {
        id: WorkspaceId,
        slug: String,
        name: String,
    },
    Installation,
}

impl Place {
    /// What the switcher sends for this place: a slug, or a word no slug can be (slugs never
    /// start with `-`).
    pub fn choice(&self) -> &str {
        match self {
            Place::Workspace { slug, .. } => slug,
            Place::Installation => "-operator",
        }
    }

    /// What people read in the switcher.
    pub fn label(&self) -> String {
        match self {
            Place::Workspace { slug, name, .. } if name != slug => format!("{name} ({slug})"),
            Place::Workspace { slug, .. } => slug.clone(),
            Place::Installation => "operator (all workspaces)".into(),
        }
    }

    /// Where a valid key acts; `None` for a key that may not sign in (revoked, nginx's resolve
    /// key, of a suspended workspace).
    pub fn of(key: &ApiKey) -> Option<Place> {
        if key.revoked_at.is_some() {
            return None;
        }
        match (key.role, &key.workspace) {
            (Role::Resolve, _) => None,
            (Role::Operator, None) => Some(Place::Installation),
            (Role::Operator, Some(_)) | (_, None) => None,
            (_, Some(workspace)) if workspace.suspended => None,
            (_, Some(workspace)) => Some(Place::Workspace {
                id: workspace.id,
                slug: workspace.slug.clone(),
                name: workspace.name.clone(),
            }),
        }
    }
}

/// An empty `expected` (no sign-in cookie) matches nothing, not even an empty field.
pub(super) fn check_token(expected: &str, token: Option<&str>) -> Result<(), Error> {
    match token {
        Some(token)
            if !expected.is_empty() && bool::from(token.as_bytes().ct_eq(expected.as_bytes())) =>
        {
            Ok(())
        }
        _ => Err(Error::Request {
            status: StatusCode::FORBIDDEN,
            code: "invalid_csrf_token",
            message: "the form was sent without its security token; reload the page and try again"
                .into(),
        }),
    }
}

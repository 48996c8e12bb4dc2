//! Who is signed in, and what their role lets them do. Kept apart from the sessions that find
//! them so the page layout can show the operator without depending on sign-in.

use crate::http::Error;
use crate::storage::{Role, WorkspaceId};
use axum::http::StatusCode;
use subtle::ConstantTimeEq;

/// A signed-in person: their key's name, role and workspace, and the session's CSRF token.
#[derive(Clone)]
pub struct Operator {
    pub name: String,
    pub role: Role,
    /// Every page shows and changes this workspace's objects only, as the key's API requests do.
    pub workspace: WorkspaceId,
    pub workspace_slug: String,
    pub csrf: String,
    pub secure: bool,
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

    /// Checks a form's CSRF token against the session's (constant time).
    pub fn check_csrf(&self, token: Option<&str>) -> Result<(), Error> {
        check_token(&self.csrf, token)
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

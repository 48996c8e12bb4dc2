//! Which domains a request may see and change: those of its key's workspace (the operator's
//! key: every one), named by a request or a setting.

use crate::{AppState, Error, InWorkspace, Result};
use axum::http::StatusCode;
use shortlink_domains::health::DomainStatus;

/// The domain's status if the key may see it: named by a request or a setting, and of the
/// key's workspace (the operator's: any).
pub(crate) fn known(
    state: &AppState,
    workspace: Option<InWorkspace>,
    domain: &str,
) -> Result<DomainStatus> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let ours = |status: &DomainStatus| match workspace {
        Some(workspace) => status.workspace == slug(state, workspace),
        None => true,
    };
    (state.domains.status(&domain))
        .filter(ours)
        .ok_or_else(|| Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "unknown_domain",
            // The same words for a name never seen, another workspace's domain and one that
            // moved away (nginx's list maps it elsewhere now): none of them is this key's.
            message: "no short domain of that name is this workspace's".into(),
        })
}

/// The workspace's slug; one this process has not met (authentication remembers every key's)
/// matches no domain rather than the default's.
pub(crate) fn slug(state: &AppState, workspace: InWorkspace) -> String {
    (state.links.slugs().get(workspace.0)).map_or_else(String::new, |name| name.as_str().to_owned())
}

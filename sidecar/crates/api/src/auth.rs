//! API keys: `Authorization: Bearer <key>` on every `/api/v1` route.
//!
//! A key is 32 random bytes (`slk_` + 64 hex digits), shown once when created; the database keeps
//! only its SHA-256. A request's key is hashed and looked up by that hash, so the lookup's timing
//! depends only on a digest the caller cannot steer; the stored digest is then compared in
//! constant time all the same.
//!
//! Each key has a role (`storage::Role`), checked here against the route the request matched, so
//! a route nobody listed for a narrow role is refused to it (403 `forbidden`): `viewer` keys read
//! ([`READ_ROUTES`]), `issuer` keys read and change links ([`ISSUE_ROUTES`]), `resolve` keys reach
//! `GET /api/v1/resolve/{code}` only (and no other role reaches it: [`RESOLVE_ROUTE`]), `admin`
//! keys everything else of their workspace, `operator` keys the workspaces
//! (`/api/v1/workspaces…`) and nothing in them.
//!
//! Each key but an operator's acts in one workspace ([`InWorkspace`]): a request sees and changes
//! that workspace's objects only, and another's answer as if they did not exist (404).

use super::{AppState, Error};
use axum::extract::{FromRequestParts, MatchedPath, OptionalFromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use shortlink_model::validate::hex;
use shortlink_model::WorkspaceId;
use shortlink_store::Role;
use subtle::ConstantTimeEq;

const KEY_PREFIX: &str = "slk_";
/// Longest Authorization value examined; longer ones are refused unread.
const MAX_KEY_LEN: usize = 256;

/// A new random API key.
pub fn generate_api_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{KEY_PREFIX}{}", hex(&bytes)))
}

/// What the database stores for `key` (`shortlink_core::signing::secret_hash`).
pub fn hash_api_key(key: &str) -> String {
    shortlink_core::signing::secret_hash(key)
}

/// The API key id of an authenticated request, for handlers and logs.
#[derive(Debug, Clone, Copy)]
pub struct ApiKeyId(pub i64);

/// The workspace an authenticated request acts in: its key's. Every handler that reads or
/// changes an owned object takes one, so a handler cannot forget whose objects it may see. An
/// operator key has none: the routes that need one are not its ([`permits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InWorkspace(pub WorkspaceId);

impl<S: Send + Sync> FromRequestParts<S> for InWorkspace {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Error> {
        (parts.extensions.get::<InWorkspace>().copied()).ok_or(Error::Forbidden(Role::Operator))
    }
}

/// `Option<InWorkspace>`: for the routes an operator key shares with a workspace's (the audit
/// log), where none means "every workspace".
impl<S: Send + Sync> OptionalFromRequestParts<S> for InWorkspace {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<InWorkspace>().copied())
    }
}

pub async fn require_api_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, Error> {
    let key = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|token| !token.is_empty())
        .ok_or(Error::MissingApiKey)?;
    if key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidApiKey);
    }
    let presented = hash_api_key(key);
    let stored = state
        .links
        .storage()
        .api_key_by_hash(&presented)
        .await?
        .ok_or(Error::InvalidApiKey)?;
    if !bool::from(stored.key_hash.as_bytes().ct_eq(presented.as_bytes())) {
        return Err(Error::InvalidApiKey);
    }
    if stored.revoked_at.is_some() {
        return Err(Error::RevokedApiKey);
    }
    if let Some(workspace) = &stored.workspace {
        if workspace.suspended {
            return Err(Error::WorkspaceSuspended);
        }
        // What the link records of this request's writes name, known without a query.
        if let Err(error) = state.links.slugs().remember(workspace.id, &workspace.slug) {
            tracing::error!(%error, "the key's workspace has no record name");
        }
        request.extensions_mut().insert(InWorkspace(workspace.id));
        // The workspace's own quotas, for the handlers that count against them.
        request.extensions_mut().insert(workspace.quotas);
    }
    if let Some(rate) = stored.rate {
        request.extensions_mut().insert(rate);
    }
    tracing::Span::current().record("api_key", stored.id);
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    if !permits(stored.role, request.method(), route) {
        return Err(Error::Forbidden(stored.role));
    }
    request.extensions_mut().insert(ApiKeyId(stored.id));
    // Who the audit log names for this request's changes.
    let actor = shortlink_store::audit::Actor::key(stored.id, stored.name);
    request.extensions_mut().insert(actor);
    Ok(next.run(request).await)
}

/// What `viewer` and `issuer` keys may read (GET, HEAD). Not resolve ([`RESOLVE_ROUTE`]).
const READ_ROUTES: &[&str] = &[
    "/api/v1/links",
    "/api/v1/links/{code}",
    "/api/v1/links/{code}/stats",
    "/api/v1/links/{code}/qr",
    "/api/v1/stats",
    "/api/v1/visits",
    "/api/v1/visits/orphan",
    "/api/v1/links/{code}/visits",
    "/api/v1/campaigns/{campaign}",
    "/api/v1/links/{code}/ab",
    "/api/v1/campaigns/{campaign}/ab",
    "/api/v1/campaigns/{campaign}/funnel",
    "/api/v1/domains",
    "/api/v1/domains/{domain}",
    // The re-send list: the campaign tool holding an issuer key is who re-sends.
    "/api/v1/domains/{domain}/unclicked",
    "/api/v1/workspace",
    // The workspace's own numbers; /metrics, every workspace's, is on the operator's listener.
    "/api/v1/workspace/metrics",
    "/api/v1/openapi.json",
];

/// What a phone would get from a link: `viewer` and `issuer` keys may ask.
const PREVIEW_ROUTE: &str = "/api/v1/links/{code}/preview";

/// The operator's: workspaces and their keys. Nobody else's, not even an admin's (an admin's
/// power ends at its workspace).
const OPERATOR_PREFIX: &str = "/api/v1/workspaces";

/// The workspace routes an operator key may read too: the domains of every workspace.
const OPERATOR_READS: &[&str] = &["/api/v1/domains", "/api/v1/domains/{domain}"];

/// nginx's fallback: the `resolve` role's only route, and nobody else's. It takes the host's
/// workspace from a header (`shortlink_wire::fallback`) rather than from the key, counts the
/// click and answers targets and password pages; a workspace's key there could read and use up
/// another workspace's links.
const RESOLVE_ROUTE: &str = "/api/v1/resolve/{code}";

/// What `issuer` keys may change besides reading.
const ISSUE_ROUTES: &[(Method, &str)] = &[
    (Method::POST, "/api/v1/links"),
    (Method::POST, "/api/v1/links/batch"),
    (Method::POST, "/api/v1/conversions"),
    // Delivery receipts: the campaign tool that sends is who hears back from the gateway.
    (Method::POST, "/api/v1/deliveries"),
    (Method::PATCH, "/api/v1/links/{code}"),
    (Method::DELETE, "/api/v1/links/{code}"),
    // The re-send list's new links: issued like a batch, by the campaign tool that re-sends.
    (Method::POST, "/api/v1/domains/{domain}/reissue"),
];

/// Whether `role` may send `method` to `route` (the matched route pattern; `None` for paths no
/// route matched).
fn permits(role: Role, method: &Method, route: Option<&str>) -> bool {
    let Some(route) = route else {
        return role == Role::Admin;
    };
    let operators = route == OPERATOR_PREFIX || route.starts_with("/api/v1/workspaces/");
    // A preview is a POST that reads: it answers a made-up click and changes nothing.
    let reads = ((method == Method::GET || method == Method::HEAD) && READ_ROUTES.contains(&route))
        || (method == Method::POST && route == PREVIEW_ROUTE);
    match role {
        Role::Resolve => {
            (method == Method::GET || method == Method::HEAD) && route == RESOLVE_ROUTE
        }
        _ if route == RESOLVE_ROUTE => false,
        Role::Operator => {
            operators
                || route == "/api/v1/audit"
                || route == "/api/v1/openapi.json"
                // Every workspace's domains and their health, each labelled (read only).
                || (reads && OPERATOR_READS.contains(&route))
        }
        _ if operators => false,
        Role::Admin => true,
        Role::Issuer => {
            reads
                || ISSUE_ROUTES
                    .iter()
                    .any(|(allowed, pattern)| allowed == method && *pattern == route)
        }
        Role::Viewer => reads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolve_key_reaches_resolve_only() {
        let resolve = Some("/api/v1/resolve/{code}");
        assert!(permits(Role::Resolve, &Method::GET, resolve));
        assert!(permits(Role::Resolve, &Method::HEAD, resolve));
        assert!(!permits(Role::Resolve, &Method::POST, resolve));
        assert!(!permits(Role::Resolve, &Method::GET, Some("/api/v1/links")));
        assert!(!permits(Role::Resolve, &Method::GET, None));
        assert!(permits(
            Role::Admin,
            &Method::DELETE,
            Some("/api/v1/links/{code}")
        ));
        assert!(permits(Role::Admin, &Method::GET, None));
    }

    #[test]
    fn no_role_but_resolve_reaches_resolve() {
        for role in [Role::Admin, Role::Issuer, Role::Viewer, Role::Operator] {
            for method in [Method::GET, Method::HEAD] {
                assert!(
                    !permits(role, &method, Some(RESOLVE_ROUTE)),
                    "{role:?} {method}"
                );
            }
        }
    }

    #[test]
    fn viewers_read_and_issuers_also_change_links() {
        let code = Some("/api/v1/links/{code}");
        for role in [Role::Viewer, Role::Issuer] {
            assert!(permits(role, &Method::GET, code));
            assert!(permits(role, &Method::HEAD, Some("/api/v1/stats")));
            assert!(!permits(role, &Method::GET, Some("/api/v1/resolve/{code}")));
            assert!(!permits(role, &Method::GET, None));
        }
        assert!(!permits(Role::Viewer, &Method::PATCH, code));
        assert!(!permits(Role::Viewer, &Method::POST, Some("/api/v1/links")));
        assert!(permits(Role::Issuer, &Method::PATCH, code));
        assert!(permits(Role::Issuer, &Method::DELETE, code));
        assert!(permits(
            Role::Issuer,
            &Method::POST,
            Some("/api/v1/links/batch")
        ));
        assert!(!permits(
            Role::Issuer,
            &Method::POST,
            Some("/api/v1/links/{code}")
        ));
    }

    #[test]
    fn issuers_and_viewers_read_the_resend_list_but_drain_nothing() {
        let unclicked = Some("/api/v1/domains/{domain}/unclicked");
        for role in [Role::Issuer, Role::Viewer] {
            assert!(permits(role, &Method::GET, unclicked), "{role:?}");
            for change in ["restore", "pin", "drain"] {
                let route = format!("/api/v1/domains/{{domain}}/{change}");
                assert!(
                    !permits(role, &Method::POST, Some(&route)),
                    "{role:?} {change}"
                );
            }
        }
    }

    #[test]
    fn issuers_reissue_the_resend_list_and_viewers_do_not() {
        let reissue = Some("/api/v1/domains/{domain}/reissue");
        assert!(permits(Role::Issuer, &Method::POST, reissue));
        assert!(permits(Role::Admin, &Method::POST, reissue));
        for role in [Role::Viewer, Role::Operator, Role::Resolve] {
            assert!(!permits(role, &Method::POST, reissue), "{role:?}");
        }
    }

    #[test]
    fn an_operator_reads_the_domains_and_no_other_workspace_route() {
        for route in ["/api/v1/domains", "/api/v1/domains/{domain}"] {
            assert!(permits(Role::Operator, &Method::GET, Some(route)));
            assert!(!permits(Role::Operator, &Method::POST, Some(route)));
        }
        for route in [
            "/api/v1/links",
            "/api/v1/stats",
            "/api/v1/visits",
            "/api/v1/workspace",
            "/api/v1/workspace/metrics",
        ] {
            assert!(
                !permits(Role::Operator, &Method::GET, Some(route)),
                "{route}"
            );
        }
    }

    #[test]
    fn keys_are_random_and_hashed() {
        let a = generate_api_key().unwrap();
        let b = generate_api_key().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX) && a.len() == KEY_PREFIX.len() + 64);
        assert_eq!(hash_api_key(&a).len(), 64);
        assert_eq!(
            hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

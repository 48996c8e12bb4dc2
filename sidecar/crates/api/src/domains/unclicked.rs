//! `GET /api/v1/domains/{domain}/unclicked` (issue 55): the re-send list. The per-recipient links
//! (those with a `ref`) of the key's workspace issued on the domain that never got a human click,
//! newest first, as NDJSON, for a campaign tool to send those recipients a new link.
//!
//! Which domain a link was issued on is not stored: it is the pick of the request's issuing list
//! with the drains of the link's creation time (each domain's drained periods,
//! shortlink_domains::drain), the pick the create made. Another sidecar learns of a drain at its
//! next check, so a link created up to one check interval (`--domain-health-every`) after the
//! domain was drained is listed if the pick of that earlier time was the domain too: a
//! recipient sent twice is cheaper than one lost. "No human click" is `visit_count` 0 (humans
//! only, unless `--count-bots`).
//!
//! Each line says why the recipient has no click ([`super::reasons`]): `not_delivered` (with the
//! message's `receipt_state` and `error_code`), `delivered_not_clicked`, `no_receipt`, or
//! `handoff_unknown` (shortlink's hand-off of its message got no answer: the gateway may have it).

use super::reasons::{self, Reason};
use super::scope::known;
use crate::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Path, Query, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_domains::drain::{At, Snapshot};
use shortlink_domains::IssuingBases;
use shortlink_model::Link;
use shortlink_store::{LinkFilter, ListCursor, Storage};
use std::sync::Arc;

/// Links read per query.
const PAGE: u32 = 1000;
/// `since` when the request gives none.
const DEFAULT_DAYS: i64 = 7;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UnclickedQuery {
    /// Links issued at or after this time (RFC 3339); default: 7 days ago.
    pub since: Option<DateTime<Utc>>,
    /// Only this campaign's links.
    pub campaign: Option<String>,
}

/// One line of the re-send list.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UnclickedLink {
    pub code: String,
    pub campaign: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: String,
    pub issued_at: DateTime<Utc>,
    /// The short URL it was sent with (on the domain asked about).
    pub short_url: String,
    /// Why it has no click, by what the gateways reported of its message.
    pub reason: Reason,
    /// With `not_delivered`: the message's current state (`failed`, `rejected`, `expired`, or
    /// one not final yet: `submitted`, `buffered`, `unknown`) and the gateway's error code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

/// The links of the key's workspace issued on the domain with no human click, newest first.
#[utoipa::path(get, path = "/api/v1/domains/{domain}/unclicked", tag = "domains",
    params(("domain" = String, Path), UnclickedQuery),
    responses(
        (status = 200, description = "One `UnclickedLink` per line, newest first",
            content((UnclickedLink = "application/x-ndjson"))),
        (status = 400, description = "`invalid_query`, or `invalid_header`: the issuing list nginx sends is malformed", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: not a domain of the key's workspace; `not_issuing`: not in its issuing list", body = ErrorBody),
    ))]
pub async fn unclicked_links(
    State(state): State<AppState>,
    workspace: InWorkspace,
    domains: DomainContext,
    Path(domain): Path<String>,
    Query(query): Query<UnclickedQuery>,
) -> Result<Response> {
    let reader = Reader::new(&state, workspace, &domains, &domain, query)?;
    // The first page before the answer: a database error is a 503, not a cut stream.
    let first = reader.page(None).await?;
    let reader = Arc::new(reader);
    let pages = futures_util::stream::unfold(Some(first), move |page| {
        let reader = Arc::clone(&reader);
        async move {
            let (lines, next) = page?;
            let following = match next {
                Some(cursor) => match reader.page(Some(&cursor)).await {
                    Ok(page) => Some(page),
                    Err(error) => {
                        // The list ends short; the client sees no final newline-less line,
                        // only fewer lines: logged for the operator.
                        tracing::warn!(%error, "unclicked list cut short");
                        None
                    }
                },
                None => None,
            };
            Some((Ok::<_, std::io::Error>(Bytes::from(lines)), following))
        }
    });
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        Body::from_stream(pages),
    )
        .into_response())
}

/// The re-send list's links, a page at a time (also what `reissue` replaces).
pub(super) struct Reader {
    state: AppState,
    workspace: shortlink_model::WorkspaceId,
    storage: Arc<dyn Storage>,
    filter: LinkFilter,
    since: DateTime<Utc>,
    pub(super) list: IssuingBases,
    pub(super) domain: String,
    pub(super) snapshot: Arc<Snapshot>,
    /// How late a sidecar may learn of a drain.
    lag: chrono::Duration,
}

/// A link of the re-send list.
pub(super) struct Listed {
    pub link: Link,
    pub recipient_ref: String,
    /// The short URL it was sent with.
    pub short_url: String,
}

impl Reader {
    /// The list of the key's workspace for `domain`: 404 `unknown_domain` if the key may not see
    /// it, `not_issuing` if the request's issuing list does not name it.
    pub(super) fn new(
        state: &AppState,
        workspace: InWorkspace,
        domains: &DomainContext,
        domain: &str,
        query: UnclickedQuery,
    ) -> Result<Self> {
        let status = known(state, Some(workspace), domain)?;
        let list = (domains.issuing.clone())
            .filter(|list| list.bases.iter().any(|b| b.host == status.domain))
            .ok_or_else(|| Error::Request {
                status: StatusCode::NOT_FOUND,
                code: "not_issuing",
                message: "the domain is not in the workspace's issuing list".into(),
            })?;
        let mut filter = LinkFilter::in_workspace(workspace.0);
        filter.campaign = query.campaign;
        let since =
            (query.since).unwrap_or_else(|| Utc::now() - chrono::Duration::days(DEFAULT_DAYS));
        Ok(Reader {
            state: state.clone(),
            workspace: workspace.0,
            storage: Arc::clone(state.links.storage()),
            filter,
            since,
            list,
            domain: status.domain,
            snapshot: state.domains.drains.current(),
            lag: chrono::Duration::from_std(state.domains.snapshot_lag()).unwrap_or_default(),
        })
    }

    /// One page's lines, and the cursor of the next page (none at the end or before `since`).
    async fn page(&self, after: Option<&ListCursor>) -> Result<(String, Option<ListCursor>)> {
        let (listed, next) = self.listed(after).await?;
        let codes: Vec<String> = listed.iter().map(|l| l.link.code.clone()).collect();
        let mut reasons = reasons::of_codes(&self.state, self.workspace, &codes).await?;
        let mut lines = String::new();
        for listed in listed {
            let why = reasons.remove(&listed.link.code);
            let line = UnclickedLink {
                reason: why.as_ref().map_or(Reason::NoReceipt, |why| why.reason),
                receipt_state: (why.as_ref())
                    .and_then(|why| why.state)
                    .map(|state| state.as_str().to_owned()),
                error_code: why.and_then(|why| why.error_code),
                short_url: listed.short_url,
                code: listed.link.code,
                campaign: listed.link.campaign,
                recipient_ref: listed.recipient_ref,
                issued_at: listed.link.created_at,
            };
            if let Ok(line) = serde_json::to_string(&line) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
        Ok((lines, next))
    }

    /// One page's links of the list, and the cursor of the next page (none at the end or
    /// before `since`).
    pub(super) async fn listed(
        &self,
        after: Option<&ListCursor>,
    ) -> Result<(Vec<Listed>, Option<ListCursor>)> {
        let links = self.storage.list_links(&self.filter, after, PAGE).await?;
        let full = links.len() == PAGE as usize;
        let mut listed = Vec::new();
        let mut next = None;
        for link in links {
            if link.created_at < self.since {
                return Ok((listed, None));
            }
            next = Some(ListCursor {
                created_at: link.created_at,
                code: link.code.clone(),
            });
            if let Some(entry) = self.entry(link) {
                listed.push(entry);
            }
        }
        Ok((listed, next.filter(|_| full)))
    }

    fn entry(&self, link: Link) -> Option<Listed> {
        let recipient_ref = link.recipient_ref.clone()?;
        if link.visit_count > 0 || link.revoked_at.is_some() {
            return None;
        }
        let campaign = link.campaign.as_deref();
        let on = |at: DateTime<Utc>| {
            let drains = At {
                snapshot: &self.snapshot,
                at,
            };
            let pick = self.list.pick_live(&link.code, campaign, &drains);
            (pick.host == self.domain).then(|| pick.url.to_owned())
        };
        let url = on(link.created_at).or_else(|| match self.lag.is_zero() {
            true => None,
            false => on(link.created_at - self.lag),
        })?;
        Some(Listed {
            short_url: format!("{url}/{}", link.code),
            recipient_ref,
            link,
        })
    }
}

//! `POST /api/v1/domains/{domain}/reissue` (issue 55): a new link for every link of the re-send
//! list ([`super::unclicked`]) of a drained domain, issued on the domains that still take new
//! links, in one idempotent batch; the answer maps each old code to its new short URL (NDJSON).
//!
//! A new link copies its old one's target, redirect, lifecycle (expiry, not-yet and expired
//! URLs, visit cap, password), rules, preview card, click id parameter, campaign, ref and tags;
//! its code is new. The links are written by the batch's service path
//! ([`shortlink_core::service::LinkService::create_chunks`]), a page of the list per
//! transaction, stopping at the next page once the key is revoked or the workspace suspended or
//! deleted (its later lines answer why). Under a daily link quota the whole list is counted
//! first and its links reserved: a request over quota is refused before anything is issued.
//!
//! The `Idempotency-Key` is required. Each new link records the key's row and a number derived
//! from its old link's code (its sequence number for a generated code, else a hash of it): a
//! repeat, also after a crash in the middle, answers the link an earlier attempt made for each
//! old link still listed and issues only those still missing. An old link clicked since an
//! earlier attempt is off the list, and off the repeat's answer.

use super::unclicked::{Listed, Reader, UnclickedQuery};
use crate::{
    failure_error, links, ApiKeyId, AppState, Budget, DomainContext, Error, ErrorBody, ErrorDetail,
    InWorkspace, Path, Query, Recorder, Result,
};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Serialize;
use sha2::{Digest, Sha256};
use shortlink_core::limits::Reservation;
use shortlink_core::service::{self, accept, Claim, ItemOutcome, NewLink};
use shortlink_domains::issuing::DrainView;
use shortlink_store::audit::{AuditEntry, Changes};
use shortlink_store::{ListCursor, Storage};
use std::collections::HashMap;

/// Pages of answer lines written ahead of a slow reader.
const AHEAD: usize = 4;
/// Slot numbers of codes that are not generated ones: above every sequence number.
const HASHED: i64 = 1 << 62;

/// One line of the answer: an old link and its replacement, or why it has none.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReissuedLink {
    /// The old link's code (as the re-send list gives it).
    pub code: String,
    pub campaign: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: String,
    /// 201: issued by this request; 200: issued by an earlier one with the same
    /// `Idempotency-Key`; else the error's status (nothing issued for this link).
    pub status: u16,
    /// The new link's code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_code: Option<String>,
    /// The new link's short URL, on a domain that takes new links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// A new link, on a domain that takes new links, for each unclicked per-recipient link issued on
/// the drained domain (the re-send list, same `since` and `campaign`).
#[utoipa::path(post, path = "/api/v1/domains/{domain}/reissue", tag = "domains",
    params(("domain" = String, Path), UnclickedQuery,
        ("Idempotency-Key" = String, Header, description = "required: a repeat with the same key answers the same new links and issues none twice; 1 to 255 visible ASCII characters", pattern = "^[!-~]{1,255}$")),
    responses(
        (status = 200, description = "One `ReissuedLink` per line (old code → new short URL), \
            the re-send list's links a page at a time",
            content((ReissuedLink = "application/x-ndjson"))),
        (status = 400, description = "`invalid_query`; `invalid_header`: the issuing list nginx sends is malformed, or a malformed Idempotency-Key; `idempotency_key_required`", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: not a domain of the key's workspace; `not_issuing`: not in its issuing list", body = ErrorBody),
        (status = 409, description = "`not_drained`: the domain takes new links (nothing to replace them with); `no_healthy_domain`: every domain of the list is drained", body = ErrorBody),
        (status = 422, description = "`idempotency_key_reused`: the key was used with another request", body = ErrorBody),
        (status = 429, description = "`quota_exceeded`: the list's links do not fit the day's quota; nothing was issued", body = ErrorBody),
    ))]
// Axum extractors, one per part of the request.
#[allow(clippy::too_many_arguments)]
pub async fn reissue_links(
    State(state): State<AppState>,
    workspace: InWorkspace,
    budget: Budget,
    Recorder(origin): Recorder,
    Extension(api_key): Extension<ApiKeyId>,
    headers: HeaderMap,
    domains: DomainContext,
    Path(domain): Path<String>,
    Query(query): Query<UnclickedQuery>,
) -> Result<Response> {
    let key = links::idempotency_key(&headers, api_key)?.ok_or_else(|| Error::Request {
        status: StatusCode::BAD_REQUEST,
        code: "idempotency_key_required",
        message: "send an Idempotency-Key: a repeat must not issue the links twice".into(),
    })?;
    // What identifies the request: the list asked for, as asked (a default `since` moves).
    let asked = serde_json::to_vec(&(
        &domain.trim_end_matches('.').to_ascii_lowercase(),
        query.since,
        &query.campaign,
    ))
    .unwrap_or_default();
    let reader = Reader::new(&state, workspace, &domains, &domain, query)?;
    let conflict = |code, message: &str| Error::Request {
        status: StatusCode::CONFLICT,
        code,
        message: message.into(),
    };
    if !reader.snapshot.is_drained(&reader.domain) {
        return Err(conflict(
            "not_drained",
            "the domain takes new links: drain it first",
        ));
    }
    // Every domain drained: the pick is the healthiest whatever the code.
    if (reader.list.pick_live("", None, reader.snapshot.as_ref())).degraded {
        return Err(conflict(
            "no_healthy_domain",
            "every domain of the issuing list is drained: no domain to reissue on",
        ));
    }
    let started = shortlink_store::now();
    let claim = (state.links)
        .claim(&key, &service::request_hash("reissue", [asked.as_slice()]))
        .await?;
    // With a quota, the whole list is counted first: over it, nothing is issued. Each page
    // draws on it. Without one nothing is counted, and the list is not read twice for it.
    let links = match budget.links_per_day() {
        0 => u64::MAX,
        _ => count(&reader).await?,
    };
    let mut reservation = budget.reserve_links(links).await?;
    let mut audit = origin.entry("links.reissue", reader.domain.clone(), Changes::new());
    audit.idempotency_key = Some(key.key);
    let reissue = Reissue {
        started,
        state,
        domains,
        reader,
        claim,
        job: service::Job::new(service::Authority::key(workspace.0, api_key.0)),
    };
    // The first page before the answer: a database error is a 503, not a cut stream.
    let (first, next) = reissue.page(None, &mut reservation).await?;
    let (sender, receiver) = tokio::sync::mpsc::channel(AHEAD);
    tokio::spawn(reissue.rest(first, next, sender, (reservation, audit)));
    let pages = futures_util::stream::unfold(receiver, |mut receiver| async move {
        (receiver.recv().await).map(|page| (Ok::<_, std::io::Error>(page), receiver))
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

/// How many links the list has.
async fn count(reader: &Reader) -> Result<u64> {
    let mut count = 0;
    let mut after: Option<ListCursor> = None;
    loop {
        let (listed, next) = reader.listed(after.as_ref()).await?;
        count += listed.len() as u64;
        match next {
            Some(next) => after = Some(next),
            None => return Ok(count),
        }
    }
}

struct Reissue {
    /// Before anything this request writes: older links are an earlier attempt's.
    started: chrono::DateTime<chrono::Utc>,
    state: AppState,
    domains: DomainContext,
    reader: Reader,
    claim: Claim,
    /// The request's key and workspace: no page is written once they no longer stand.
    job: service::Job,
}

/// A page's answer lines and how many links it issued.
struct Page {
    lines: Vec<u8>,
    created: u64,
}

impl Reissue {
    /// The pages after `first`, sent to `sender` until the list ends or the client is gone;
    /// then the quota keeps what was issued and the request's audit row is written.
    async fn rest(
        self,
        first: Page,
        mut next: Option<ListCursor>,
        sender: tokio::sync::mpsc::Sender<Bytes>,
        (mut reservation, mut audit): (Reservation, AuditEntry),
    ) {
        let mut created = first.created;
        let mut gone = sender.send(Bytes::from(first.lines)).await.is_err();
        while let (false, Some(after)) = (gone, next.take()) {
            match self.page(Some(&after), &mut reservation).await {
                Ok((page, following)) => {
                    created += page.created;
                    gone = sender.send(Bytes::from(page.lines)).await.is_err();
                    next = following;
                }
                Err(error) => {
                    // The answer ends short; a repeat with the key finishes it.
                    tracing::warn!(%error, "reissue cut short");
                    break;
                }
            }
        }
        reservation.keep(created).await;
        audit.batch_size = i64::try_from(created).ok();
        let storage: &dyn Storage = self.state.links.storage().as_ref();
        if let Err(error) = storage.append_audit(&audit).await {
            tracing::error!(%error, "a reissue's audit row could not be written");
        }
    }

    /// Replaces one page of the list (one transaction): its answer lines, and the next page's
    /// cursor.
    async fn page(
        &self,
        after: Option<&ListCursor>,
        reservation: &mut Reservation,
    ) -> Result<(Page, Option<ListCursor>)> {
        let (listed, next) = self.reader.listed(after).await?;
        let mut items: Vec<(i64, Listed, Result<NewLink>)> = (listed.into_iter())
            .map(|old| (self.slot(&old.link.code), self.new_link(&old), old))
            .map(|(slot, new, old)| (slot, old, new))
            .collect();
        // Ascending slots: a repeat reads what the page made by the range of its slots.
        items.sort_by_key(|(slot, ..)| *slot);
        let valid: Vec<(i64, NewLink)> = (items.iter())
            .filter_map(|(slot, _, new)| new.as_ref().ok().map(|new| (*slot, new.clone())))
            .collect();
        let mut outcomes: HashMap<i64, ItemOutcome> = match valid.is_empty() {
            true => HashMap::new(),
            false => (self.state.links)
                .create_chunks(
                    self.chunks(valid),
                    Some(self.claim),
                    (&self.job, self.job.turn()),
                    reservation,
                )
                .await
                .into_iter()
                .flatten()
                .collect(),
        };
        let mut page = Page {
            lines: Vec::new(),
            created: 0,
        };
        for (slot, old, new) in items {
            let answer = match new {
                Err(error) => Err(error),
                Ok(_) => match outcomes.remove(&slot) {
                    // A replay answers what an earlier attempt committed as created.
                    Some(ItemOutcome::Created(link)) if link.created_at < self.started => {
                        Ok((link, StatusCode::OK))
                    }
                    Some(ItemOutcome::Created(link)) => {
                        page.created += 1;
                        self.domains.link_created("reissue", &link);
                        Ok((link, StatusCode::CREATED))
                    }
                    Some(ItemOutcome::Existing(link)) => Ok((link, StatusCode::OK)),
                    Some(ItemOutcome::Failed(failure)) => Err(failure_error(failure)),
                    None => Err(failure_error(service::ItemFailure::Internal)),
                },
            };
            let line = self.line(old, answer);
            if serde_json::to_writer(&mut page.lines, &line).is_ok() {
                page.lines.push(b'\n');
            }
        }
        Ok((page, next))
    }

    /// The page's items as the write path takes them. A first attempt: one chunk (one insert).
    /// A repeat reads what an earlier attempt made by each chunk's range of slots: generated
    /// codes' slots (sequence numbers) of one page lie close together, but hashed ones spread
    /// over the whole range, and one chunk of them read the whole earlier attempt per page
    /// (a repeat over 100,000 codes of another shape took 90 s, the first attempt 7 s): each
    /// goes alone, read by its own slot (a query each, linear in the list).
    fn chunks(&self, valid: Vec<(i64, NewLink)>) -> Vec<Vec<(i64, NewLink)>> {
        if self.claim.fresh {
            return vec![valid];
        }
        let (generated, hashed): (Vec<_>, Vec<_>) =
            valid.into_iter().partition(|(slot, _)| *slot < HASHED);
        let alone = hashed.into_iter().map(|item| vec![item]);
        std::iter::once(generated)
            .filter(|chunk| !chunk.is_empty())
            .chain(alone)
            .collect()
    }

    fn line(
        &self,
        old: Listed,
        answer: Result<(Box<shortlink_model::Link>, StatusCode)>,
    ) -> ReissuedLink {
        let mut line = ReissuedLink {
            code: old.link.code,
            campaign: old.link.campaign,
            recipient_ref: old.recipient_ref,
            status: StatusCode::CREATED.as_u16(),
            new_code: None,
            short_url: None,
            error: None,
        };
        match answer {
            Ok((link, status)) => {
                line.status = status.as_u16();
                line.short_url = self.domains.short_url(&link.code, link.campaign.as_deref());
                line.new_code = Some(link.code);
            }
            Err(error) => {
                shortlink_core::metrics::api_error(error.code());
                line.status = error.status_code().as_u16();
                line.error = Some(ErrorDetail {
                    code: error.code().to_owned(),
                    message: error.message(),
                });
            }
        }
        line
    }

    /// The slot of the new link replacing `code`: the same for every attempt, and distinct per
    /// code (a generated code's sequence number; another code's hash, above them all).
    fn slot(&self, code: &str) -> i64 {
        if let Some(sequence) = self.state.links.scheme().decode(code) {
            if let Ok(slot) = i64::try_from(sequence) {
                if slot < HASHED {
                    return slot;
                }
            }
        }
        let digest = Sha256::digest(code.as_bytes());
        let hash = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        HASHED | (hash >> 2) as i64
    }

    /// The replacement of `old`: all it has but its code. Its target is checked again (the URL
    /// policy may have changed since); an expired link has nothing to replace it with.
    fn new_link(&self, old: &Listed) -> Result<NewLink> {
        let link = &old.link;
        if link.expires_at.is_some_and(|at| at <= chrono::Utc::now()) {
            return Err(Error::Request {
                status: StatusCode::GONE,
                code: "gone",
                message: "the link has expired: no new link is issued for it".into(),
            });
        }
        Ok(accept::replacement_link(
            &self.state.links,
            &self.state.settings.url_policy,
            &self.domains.own_domains,
            link,
            old.recipient_ref.clone(),
        )?)
    }
}

//! Extractors: axum's, with rejections that answer as every other API error, and the request's
//! view of the domain pool.

use super::{AppState, Error, InWorkspace, Result};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use shortlink_domains::{IssuingBases, WorkspaceBases};
use shortlink_model::validate;
use shortlink_model::WorkspaceId;
use shortlink_store::DEFAULT_SLUG;
use std::marker::PhantomData;
use std::sync::Arc;

/// Request headers set by the internal nginx API server (docs/DOMAINS.md, "The domain pool").
pub const PUBLIC_BASE_HEADER: &str = "x-shortlink-public-base";
pub const POOL_HEADER: &str = "x-shortlink-pool";
/// The workspace nginx maps the request's short domain to, sent by the fallback's location only
/// (`ws=$shortlink_workspace`, spelled in `shortlink_wire::fallback`).
pub use shortlink_wire::fallback::WORKSPACE_HEADER;

/// `axum::Json` whose rejections become [`Error`]s with a JSON body, and which reads a request
/// body only from a JSON object: serde fills a struct from an array too (`[]` as every field's
/// default, `["https://…"]` as the first field), a form no schema of this API documents.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = Error;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self> {
        let axum::Json(JsonObject(value)) = axum::Json::from_request(request, state).await?;
        Ok(Json(value))
    }
}

/// `T` read through serde's map access only: any other JSON value is a data error (422).
struct JsonObject<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for JsonObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = JsonObject<T>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(JsonObject)
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Query` whose rejections become [`Error`]s.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(Error))]
pub struct Query<T>(pub T);

/// `axum::extract::Path` whose rejections become [`Error`]s.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(Error))]
pub struct Path<T>(pub T);

/// The request's view of the domain pool: where short URLs live and which hosts are ours.
#[derive(Debug, Clone)]
pub struct DomainContext {
    /// Where new short URLs are built: one base or several with weights.
    pub issuing: Option<IssuingBases>,
    /// The pool from the request header together with `--short-domains`: a target on any of our
    /// domains would loop.
    pub own_domains: Vec<String>,
    /// Whether `issuing` is the deployment's: from the configuration, or from a request that came
    /// through nginx ([`super::proxy_secret`]). Only then is a link counted under its host.
    issuing_trusted: bool,
    /// Every workspace's part of the request's issuing list, for [`Self::in_workspace`].
    lists: Option<WorkspaceBases>,
    health: Arc<shortlink_domains::health::DomainHealth>,
}

impl DomainContext {
    /// The bookkeeping of every new link, whichever route or page made it:
    /// `shortlink_links_created_total{via}` and the host it is issued on.
    pub fn link_created(&self, via: &'static str, link: &shortlink_model::Link) {
        shortlink_core::metrics::links_created(via, 1);
        self.count_issued(&link.code, link.campaign.as_deref());
    }

    /// Counts a new link under the host it is issued on (`shortlink_links_issued_total`), the
    /// expected-traffic side of a domain's health.
    fn count_issued(&self, code: &str, campaign: Option<&str>) {
        if let Some(bases) = &self.issuing {
            let drains = self.health.drains.current();
            let host = bases.pick_live(code, campaign, drains.as_ref()).host;
            if self.issuing_trusted {
                self.health.issued_on(host);
                shortlink_core::metrics::links_issued(host.to_owned());
            } else {
                // A name nobody configured: no health entry, no metric label of its own.
                shortlink_core::metrics::links_issued("other".to_owned());
            }
        }
    }

    /// Where new links go, for people: each base with its weight, `draining` ones marked.
    pub fn issuing_description(&self) -> String {
        match &self.issuing {
            None => "no issuing domain configured".into(),
            Some(bases) => bases
                .bases
                .iter()
                .map(
                    |base| match (base.draining, base.standby, bases.bases.len()) {
                        (true, _, _) => format!("{} (draining)", base.url),
                        (false, true, _) => {
                            format!("{} (standby, weight {})", base.url, base.weight)
                        }
                        (false, false, 1) => base.url.clone(),
                        (false, false, _) => format!("{} (weight {})", base.url, base.weight),
                    },
                )
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The same request, issuing every link on the shortest issuing base
    /// ([`IssuingBases::shortest`]).
    pub fn on_shortest_base(mut self) -> Self {
        let drains = self.health.drains.current();
        self.issuing = (self.issuing.as_ref()).map(|bases| bases.shortest_live(drains.as_ref()));
        self
    }

    /// The longest base a link of this request may get now ([`IssuingBases::longest_live`]).
    pub fn longest_live_base(&self) -> Option<&str> {
        let drains = self.health.drains.current();
        (self.issuing.as_ref()).map(|bases| bases.longest_live(drains.as_ref()))
    }

    /// The same request as workspace `slug`'s: issuing on its part of the list. For the
    /// console, whose sessions are no API key the extractor could read a workspace from.
    pub fn in_workspace(mut self, slug: &str, state: &AppState) -> Self {
        let slug = Some(slug).filter(|slug| *slug != DEFAULT_SLUG);
        self.issuing = issuing_of(self.lists.as_ref(), slug, state);
        self
    }

    /// The link's short URL on the base it is issued on ([`shortlink_domains::issuing`]), with
    /// the domains drained as of now (the in-process snapshot, read per link: a batch or compose
    /// running when a domain is drained moves its remaining links).
    pub fn short_url(&self, code: &str, campaign: Option<&str>) -> Option<String> {
        self.issuing_on(code, campaign).map(|(url, _)| url)
    }

    /// [`Self::short_url`] and whether it is on a drained domain because every domain of the
    /// list is drained (`degraded_issuing` in the answer).
    pub fn issuing_on(&self, code: &str, campaign: Option<&str>) -> Option<(String, bool)> {
        let bases = self.issuing.as_ref()?;
        let drains = self.health.drains.current();
        let pick = bases.pick_live(code, campaign, drains.as_ref());
        Some((format!("{}/{code}", pick.url), pick.degraded))
    }
}

impl FromRequestParts<AppState> for DomainContext {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let header = |name: &str| -> Result<Option<&str>> {
            match parts.headers.get(name) {
                None => Ok(None),
                Some(value) => value.to_str().map(Some).map_err(|_| Error::Request {
                    status: StatusCode::BAD_REQUEST,
                    code: "invalid_header",
                    message: format!("the {name} header is not ASCII"),
                }),
            }
        };
        let trusted = (state.settings.proxy_secret.as_ref())
            .is_some_and(|secret| secret.matches(&parts.headers));
        let issuing_trusted = trusted || parts.headers.get(PUBLIC_BASE_HEADER).is_none();
        let lists = (header(PUBLIC_BASE_HEADER)?)
            .map(WorkspaceBases::parse)
            .transpose()
            .map_err(|reason| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_header",
                message: format!("the {PUBLIC_BASE_HEADER} header {reason}"),
            })?;
        // `None` for `default`. Authentication remembered the key's workspace; one it did not
        // meet matches no issuing list (`""`), never `default`'s.
        let workspace = (parts.extensions.get::<InWorkspace>())
            .filter(|workspace| workspace.0 != WorkspaceId::DEFAULT)
            .map(|workspace| match state.links.slugs().get(workspace.0) {
                Some(name) => name.as_str().to_owned(),
                None => String::new(),
            });
        let issuing = issuing_of(lists.as_ref(), workspace.as_deref(), state);
        let mut own_domains = state.settings.short_domains.clone();
        if let Some(pool) = header(POOL_HEADER)? {
            let hosts: Vec<&str> = pool.split_ascii_whitespace().collect();
            let pool = validate::normalize_hosts(&hosts).map_err(|entry| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_header",
                message: format!("the {POOL_HEADER} header has {entry:?}, not a host name"),
            })?;
            own_domains.extend(pool);
        }
        // Names the job may check: the configuration's, and nginx's (its pool is its config).
        let named = match trusted {
            true => own_domains.clone(),
            false => state.settings.short_domains.clone(),
        };
        // Listed (and checked) from the first request naming them, the domains endpoints' own
        // included: not only once a link is issued. Headers from anyone but nginx serve this
        // request only: the job never probes a name nobody configured.
        // Every workspace's part of nginx's list, or without one the configuration's base
        // (`--public-base-url`), which no header names.
        let listed: Vec<String> = match (&lists, issuing_trusted) {
            (_, false) => Vec::new(),
            (Some(lists), true) => lists.hosts().collect(),
            (None, true) => issuing.iter().flat_map(IssuingBases::hosts).collect(),
        };
        state.domains.saw(named.into_iter().chain(listed));
        // Which workspace each domain is: from nginx's list only, so that a header sent around
        // nginx cannot claim another brand's domain (and read its health).
        // A changed list may have moved a domain: its former owner's not-found redirects go
        // (domains::moved::drop_moved). A failure costs this request nothing: Redis keys
        // each domain's setting by workspace, so a stale row never answers anyway.
        let changed = (lists.as_ref().filter(|_| issuing_trusted))
            .is_some_and(|lists| state.domains.sections(lists));
        if changed {
            if let Err(error) = crate::domains::moved::drop_moved(state).await {
                tracing::warn!(%error, "cannot drop the not-found redirects of moved domains");
            }
        }
        Ok(DomainContext {
            issuing,
            own_domains,
            issuing_trusted,
            lists,
            health: Arc::clone(&state.domains),
        })
    }
}

/// The list a workspace issues on (`None`: the default): its own part (its links answer on its
/// domains only); the default's falls back to `--public-base-url`, as before workspaces.
fn issuing_of(
    lists: Option<&WorkspaceBases>,
    workspace: Option<&str>,
    state: &AppState,
) -> Option<IssuingBases> {
    let fallback = || {
        state
            .settings
            .public_base_url
            .clone()
            .map(IssuingBases::single)
    };
    match (lists, workspace) {
        (Some(lists), Some(name)) => lists.of(name).cloned(),
        (Some(lists), None) => lists.of(DEFAULT_SLUG).cloned().or_else(fallback),
        (None, Some(_)) => None,
        (None, None) => fallback(),
    }
}

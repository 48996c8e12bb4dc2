//! One page of another shortener's links into ours: checked, sorted (new, already imported,
//! collision), created through the service's batch path (SQL and Redis write-through, as every
//! create), recorded in `imported_links`, then their history: individual visits through the
//! visit store's own write path (rollups, stats), the source's total into `visit_count`.
//!
//! Every step is keyed by the code, so a run interrupted anywhere is finished by the next one: a
//! link created but not yet recorded is recognised by its target and creation time, visits are
//! stored under stable ids (a visit stored before is skipped), the total only raises the count.

use super::report::{Reason, Report};
use super::source::{Item, Source, SourceLink, SourceVisit};
use crate::cli::error::BoxError;
use chrono::{DateTime, Utc};
use shortlink_api::{AppState, Error};
use shortlink_core::limits::{Budget, QuotaError};
use shortlink_core::service::accept::{self, CreateLinkRequest, Kept, Origin};
use shortlink_core::service::{Authority, ItemFailure, ItemOutcome, Job, NewLink, Restore};
use shortlink_model::schema::WholeNumber;
use shortlink_model::WorkspaceId;
use shortlink_store::{self, ImportedLink};
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
use std::collections::{HashMap, HashSet};

/// Visits per write transaction.
const VISIT_CHUNK: usize = 5000;

/// What an import says of a code another workspace holds: that it is taken, nothing of whose.
const TAKEN: &str = "taken: another link has this code";

pub struct Writer<'a> {
    pub state: &'a AppState,
    /// Where the links go.
    pub workspace: WorkspaceId,
    /// What the new links count against: the workspace's quota for the console's imports, none
    /// for the command line's.
    budget: Budget,
    pub source: &'static str,
    /// For links whose source does not name their domain.
    pub default_domain: String,
    pub dry_run: bool,
    pub visits: bool,
    /// `--forward-query`: overrides the source's behaviour for every link.
    pub forward_query: Option<bool>,
    enricher: Enricher,
    /// Codes met in this run and their domain: a code twice in the source is one collision.
    seen: HashMap<String, String>,
    /// Who the links are created for: the import stops once that no longer stands.
    job: Job,
}

/// A link of the page that passed the checks.
struct Candidate {
    link: SourceLink,
    new: NewLink,
}

impl<'a> Writer<'a> {
    pub fn new(
        state: &'a AppState,
        budget: Budget,
        source: &'static str,
        default_domain: Option<&str>,
        dry_run: bool,
        visits: bool,
    ) -> Self {
        let workspace = budget.workspace();
        Self {
            state,
            workspace,
            budget,
            source,
            default_domain: default_domain.unwrap_or_default().to_ascii_lowercase(),
            dry_run,
            visits,
            forward_query: None,
            // Addresses are located by the source where it did (YOURLS, Shlink); ours would need
            // --geoip-db, which the import does not open.
            enricher: Enricher::new(GeoDb::disabled(), false),
            seen: HashMap::new(),
            job: Job::new(Authority::command_line(workspace)),
        }
    }

    /// Creates for `authority` (the console's signed-in key) instead of the command line.
    pub fn acting_for(mut self, authority: Authority) -> Self {
        self.job = Job::new(authority);
        self
    }

    /// Imports one page; `report` counts every link of it.
    pub async fn page(
        &mut self,
        source: &mut dyn Source,
        items: Vec<Item>,
        report: &mut Report,
    ) -> Result<(), BoxError> {
        let now = shortlink_store::now();
        let mut candidates = Vec::with_capacity(items.len());
        for item in items {
            report.read += 1;
            let mut link = match item {
                Ok(link) => link,
                Err(bad) => {
                    report.skip(&bad.at, "", Reason::Unreadable, bad.message);
                    continue;
                }
            };
            if link.domain.is_empty() {
                link.domain.clone_from(&self.default_domain);
            }
            if let Some(first) = self.seen.get(&link.code) {
                let message = format!(
                    "the source has this code twice (on {first:?} first, then {:?}); a code \
                     answers on every domain of the pool, so only the first is kept",
                    link.domain
                );
                report.skip(&link.code, &link.domain, Reason::Collision, message);
                continue;
            }
            self.seen.insert(link.code.clone(), link.domain.clone());
            match self.check(&link, now) {
                Ok(new) => candidates.push(Candidate { link, new }),
                Err((reason, message)) => report.skip(&link.code, &link.domain, reason, message),
            }
        }
        let (fresh, mut history) = self.sort(candidates, report).await?;
        if self.dry_run {
            report.imported += fresh.len() as u64;
            // What the import would store: every individual visit of a link it would create.
            if self.visits {
                for candidate in &fresh {
                    report.visits_imported += source.visits(&candidate.link).await?.len() as u64;
                }
            }
            return Ok(());
        }
        history.extend(self.create(fresh, report).await?);
        // The key revoked or the workspace suspended or deleted: the page's links not created
        // are reported, and the import ends there.
        if let Some(stop) = self.job.stopped() {
            return Err(Box::new(stop));
        }
        if self.visits {
            for link in &history {
                self.history(source, link, report).await?;
            }
        }
        Ok(())
    }

    /// Checks a link as a create is checked (`accept::imported_link`), except its code:
    /// another shortener's, kept exactly, with its times.
    fn check(&self, link: &SourceLink, now: DateTime<Utc>) -> Result<NewLink, (Reason, String)> {
        // The code first: a link whose code cannot be kept is reported as that, whatever else.
        accept::code_origin(self.state.links.scheme(), &link.code, Origin::Foreign)
            .map_err(|invalid| (Reason::InvalidCode, invalid.to_string()))?;
        if link.password {
            return Err((
                Reason::PasswordProtected,
                "the source protects it with a password whose hash it does not give: import it \
                 by hand with a password of ours"
                    .into(),
            ));
        }
        let request = CreateLinkRequest {
            url: link.target.clone(),
            code: Some(link.code.clone()),
            expires_at: link.expires_at,
            redirect: Some(link.redirect),
            forward_query: Some(self.forward_query.unwrap_or(link.forward_query)),
            tags: Some(link.tags.clone()),
            valid_since: link.valid_since,
            max_visits: link.max_visits.map(WholeNumber),
            ..CreateLinkRequest::default()
        };
        let kept = Kept {
            origin: Origin::Foreign,
            restore: Some(Restore {
                created_at: link.created_at.unwrap_or(now),
                revoked_at: link.revoked.then_some(now),
            }),
            password_digest: None,
        };
        let settings = &self.state.settings;
        let (policy, own) = (&settings.url_policy, &settings.short_domains);
        accept::imported_link(
            &self.state.links,
            self.workspace,
            policy,
            own,
            request,
            kept,
        )
        .map_err(|invalid| {
            let error = Error::from(invalid);
            (
                Reason::Invalid,
                format!("{}: {}", error.code(), error.message()),
            )
        })
    }

    /// Sorts the checked links: those to create, and those an earlier run imported (whose history
    /// may still be missing). A code that is any other link of this workspace is a collision,
    /// reported with its target; a code another workspace holds is reported as taken, nothing
    /// more (its target, source and state are that workspace's), and never touched.
    async fn sort(
        &self,
        candidates: Vec<Candidate>,
        report: &mut Report,
    ) -> Result<(Vec<Candidate>, Vec<SourceLink>), BoxError> {
        let storage = self.state.links.storage();
        let codes: Vec<String> = candidates.iter().map(|c| c.link.code.clone()).collect();
        let recorded: HashMap<String, ImportedLink> = (storage.imported_links(&codes).await?)
            .into_iter()
            .map(|row| (row.code.clone(), row))
            .collect();
        let existing: HashSet<String> = storage.existing_codes(&codes).await?.into_iter().collect();
        let mut fresh = Vec::new();
        let mut done = Vec::new();
        let mut adopted = Vec::new();
        for candidate in candidates {
            let link = &candidate.link;
            // A code is one across workspaces: one held by another workspace is not ours to
            // skip, finish or describe.
            let ours = match existing.contains(&link.code) {
                true => match storage.get_link(self.workspace, &link.code).await? {
                    Some(ours) => Some(ours),
                    None => {
                        report.skip(&link.code, &link.domain, Reason::Collision, TAKEN.into());
                        continue;
                    }
                },
                false => None,
            };
            if let Some(row) = recorded.get(&link.code) {
                if row.source == self.source
                    && row.domain == link.domain
                    && row.source_target == link.target
                {
                    report.skip(
                        &link.code,
                        &link.domain,
                        Reason::AlreadyImported,
                        String::new(),
                    );
                    done.push(candidate.link);
                } else {
                    let message = format!(
                        "imported before from {} on {:?}, to {}",
                        row.source, row.domain, row.source_target
                    );
                    report.skip(&link.code, &link.domain, Reason::Collision, message);
                }
                continue;
            }
            // A link of this workspace with this code but no import record: this run's own,
            // created by a run interrupted before it recorded it (same target, same creation
            // time), or another.
            let created_at = candidate.new.restore().map(|r| r.created_at);
            match ours {
                None => fresh.push(candidate),
                Some(ours)
                    if ours.target == candidate.new.target().as_str()
                        && Some(ours.created_at) == created_at =>
                {
                    report.skip(
                        &link.code,
                        &link.domain,
                        Reason::AlreadyImported,
                        String::new(),
                    );
                    if !self.dry_run {
                        adopted.push(self.record(link));
                    }
                    done.push(candidate.link);
                }
                Some(ours) => {
                    let message = format!("a link already has this code, to {}", ours.target);
                    report.skip(&link.code, &link.domain, Reason::Collision, message);
                }
            }
        }
        if !adopted.is_empty() {
            storage.record_imported(&adopted).await?;
        }
        Ok((fresh, done))
    }

    /// Creates the new links in one batch chunk and records them; returns those created.
    async fn create(
        &self,
        fresh: Vec<Candidate>,
        report: &mut Report,
    ) -> Result<Vec<SourceLink>, BoxError> {
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let (links, items): (Vec<SourceLink>, Vec<(i64, NewLink)>) = fresh
            .into_iter()
            .enumerate()
            .map(|(i, c)| (c.link, (i as i64, c.new)))
            .unzip();
        let outcomes = match self.budget.reserve_links(items.len() as u64).await {
            Ok(mut reservation) => {
                let outcomes = (self.state.links)
                    .create_chunk(items, None, (&self.job, self.job.turn()), &mut reservation)
                    .await;
                let created = (outcomes.iter())
                    .filter(|(_, outcome)| matches!(outcome, ItemOutcome::Created(_)))
                    .count();
                reservation.keep(created as u64).await;
                outcomes
            }
            // Over the day's quota: none of the page is created, each reported as refused.
            Err(QuotaError::Exceeded { .. }) => (items.into_iter())
                .map(|(index, _)| (index, ItemOutcome::Failed(ItemFailure::QuotaExceeded)))
                .collect(),
            Err(error) => return Err(error.into()),
        };
        let mut created = Vec::with_capacity(links.len());
        let mut records = Vec::with_capacity(links.len());
        for (link, (_, outcome)) in links.into_iter().zip(outcomes) {
            match outcome {
                ItemOutcome::Created(_) | ItemOutcome::Existing(_) => {
                    report.imported += 1;
                    records.push(self.record(&link));
                    created.push(link);
                }
                ItemOutcome::Failed(ItemFailure::CodeTaken) => report.skip(
                    &link.code,
                    &link.domain,
                    Reason::Collision,
                    "the code was taken meanwhile, or Redis holds another record for it".into(),
                ),
                ItemOutcome::Failed(failure) => {
                    let error = shortlink_api::failure_error(failure);
                    let message = format!("{}: {}", error.code(), error.message());
                    report.skip(&link.code, &link.domain, Reason::Failed, message);
                }
            }
        }
        self.state.links.storage().record_imported(&records).await?;
        Ok(created)
    }

    fn record(&self, link: &SourceLink) -> ImportedLink {
        ImportedLink {
            code: link.code.clone(),
            source: self.source.to_owned(),
            domain: link.domain.clone(),
            source_target: link.target.clone(),
            title: link.title.clone(),
            source_visits: link.visits,
            imported_at_ms: shortlink_store::now().timestamp_millis(),
        }
    }

    /// A link's history: its individual visits where the source keeps them (stored as the
    /// consumer stores clicks, so stats answer them), then its total.
    async fn history(
        &self,
        source: &mut dyn Source,
        link: &SourceLink,
        report: &mut Report,
    ) -> Result<(), BoxError> {
        let visits = source.visits(link).await?;
        let analytics = &self.state.analytics;
        for chunk in visits.chunks(VISIT_CHUNK) {
            let enriched: Vec<_> = chunk.iter().map(|v| self.enrich(link, v)).collect();
            let outcome = analytics
                .store
                .store_batch(&enriched, analytics.count_bots)
                .await?;
            report.visits_imported += outcome.inserted;
        }
        if link.visits > 0 {
            (self.state.links.storage())
                .raise_visit_count(
                    self.workspace,
                    &link.code,
                    link.visits,
                    shortlink_store::now(),
                )
                .await?;
        }
        Ok(())
    }

    fn enrich(&self, link: &SourceLink, visit: &SourceVisit) -> shortlink_visit_enrich::Visit {
        let event = VisitEvent {
            id: visit.id.clone(),
            code: link.code.clone(),
            time_ms: visit.at.timestamp_millis(),
            status: Some(link.redirect),
            ip: visit.ip.as_deref().and_then(|ip| ip.parse().ok()),
            user_agent: visit.user_agent.clone(),
            referrer: visit.referrer.clone(),
            host: (!link.domain.is_empty()).then(|| link.domain.clone()),
            accept_language: None,
            rule: None,
            orphan: None,
            workspace: None,
            // Another shortener kept no method or headers: the agent alone judges.
            signals: None,
        };
        let mut enriched = self.enricher.enrich(&event);
        // Where the source located the visit, its place is kept.
        if visit.country.is_some() {
            enriched.country.clone_from(&visit.country);
            enriched.region.clone_from(&visit.region);
            enriched.city.clone_from(&visit.city);
        }
        enriched
    }
}

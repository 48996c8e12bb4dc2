//! Personal data requests (issue 56, docs/PRIVACY.md): the export and the erasure of one data
//! subject, a recipient named by `ref` (within a campaign, or everywhere in the workspace) or
//! one link by its code, always within the caller's workspace.
//!
//! An erase is a stored request (`subject_requests`) that is also its own progress: its links
//! are found once and written down (their codes, never the ref), then each link's visits,
//! visitor-set rows, per-link rollups, conversions and delivery receipts are deleted in one
//! transaction and its `ref` replaced by the request's tombstone
//! ([`LinkService::tombstone_ref`]), and the request is marked done with one audit row holding
//! the selector's kind and the counts. Sending the same `request_id` again answers a done
//! request as it is, and finishes one that was cut short: every step is safe to run twice.

mod model;
mod store;

pub use model::{Selector, SubjectRequest, SubjectVisit};
pub use store::SubjectStore;

use crate::conversions::store::Conversion;
use crate::deliveries::Receipt;
use crate::store::VisitStore;
use chrono::Utc;
use shortlink_core::service::{LinkService, ServiceError};
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::audit::{Changes, Origin};
use shortlink_store::StorageError;
use std::sync::Arc;

/// Everything stored about a subject.
#[derive(Debug, Clone, Default)]
pub struct Export {
    pub links: Vec<Link>,
    pub visits: Vec<SubjectVisit>,
    pub conversions: Vec<Conversion>,
    /// The delivery receipts of the subject's links (they hold no phone number, but say what
    /// happened to messages sent to the subject).
    pub receipts: Vec<Receipt>,
}

#[derive(Debug, thiserror::Error)]
pub enum SubjectError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// What the tombstone of a request's links starts with (the rest is random).
pub const TOMBSTONE_PREFIX: &str = "erased-";

fn random_hex() -> Result<String, StorageError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| StorageError::Corrupt(format!("no randomness: {error}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Subject requests: export and erase over the visit store (visits, rollups, conversions,
/// requests) and the link service (links, their records in Redis, the audit log).
#[derive(Clone)]
pub struct SubjectService {
    store: Arc<dyn VisitStore>,
    links: Arc<LinkService>,
}

impl SubjectService {
    pub fn new(store: Arc<dyn VisitStore>, links: Arc<LinkService>) -> Self {
        Self { store, links }
    }

    /// Every link, raw visit and conversion of the subject.
    pub async fn export(
        &self,
        workspace: WorkspaceId,
        selector: &Selector,
    ) -> Result<Export, SubjectError> {
        let subjects = self.store.subjects();
        let codes = subjects.subject_codes(workspace, selector).await?;
        let mut export = Export::default();
        for code in &codes {
            if let Some(link) = self.links.storage().get_link(workspace, code).await? {
                export.links.push(link);
            }
        }
        export.visits = subjects.subject_visits(&codes).await?;
        let ids = subjects.subject_conversion_ids(workspace, &codes).await?;
        let mut conversions = self.store.conversions().conversions(&ids).await?;
        // In the order the ids were read (by conversion time).
        conversions.sort_by_key(|c| ids.iter().position(|id| *id == c.id));
        export.conversions = conversions;
        export.receipts = self
            .store
            .deliveries()
            .receipts_of(workspace, &codes)
            .await?;
        Ok(export)
    }

    /// Erases the subject, or answers (and finishes, if it was cut short) the request made
    /// before with the same `key`.
    pub async fn erase(
        &self,
        workspace: WorkspaceId,
        key: &str,
        selector: &Selector,
        origin: &Origin,
    ) -> Result<SubjectRequest, SubjectError> {
        let subjects = self.store.subjects();
        let request = match subjects.request(workspace, key).await? {
            Some(request) => request,
            None => {
                let codes = subjects.subject_codes(workspace, selector).await?;
                let new = SubjectRequest {
                    id: format!("sr_{}", random_hex()?),
                    workspace,
                    key: key.to_owned(),
                    selector: selector.kind().to_owned(),
                    done: false,
                    codes,
                    tombstone: format!("{TOMBSTONE_PREFIX}{}", random_hex()?),
                    links: 0,
                    visits: 0,
                    conversions: 0,
                    created_ms: Utc::now().timestamp_millis(),
                    finished_ms: None,
                };
                subjects.insert_request(&new).await?;
                // A concurrent repeat may have stored its own first: carry on with that one.
                (subjects.request(workspace, key).await?)
                    .ok_or_else(|| StorageError::Corrupt("subject request vanished".into()))?
            }
        };
        if request.done {
            return Ok(request);
        }
        let mut links = 0;
        for code in &request.codes {
            subjects.erase_code(workspace, code, &request.id).await?;
            // The ref last: a request cut short before it still finds its links by code.
            self.links
                .tombstone_ref(workspace, code, &request.tombstone)
                .await?;
            links += 1;
        }
        let finished_ms = Utc::now().timestamp_millis();
        subjects
            .finish_request(&request.id, links, finished_ms)
            .await?;
        let done = (subjects.request(workspace, key).await?)
            .ok_or_else(|| StorageError::Corrupt("subject request vanished".into()))?;
        let changes = Changes::new()
            .set("selector", done.selector.clone())
            .set("links", done.links)
            .set("visits", done.visits)
            .set("conversions", done.conversions);
        let entry = origin.entry("subject.erase", &done.id, changes);
        self.links.storage().append_audit(&entry).await?;
        Ok(done)
    }

    /// The workspace's erase requests, newest first.
    pub async fn requests(
        &self,
        workspace: WorkspaceId,
        limit: u32,
    ) -> Result<Vec<SubjectRequest>, SubjectError> {
        Ok(self.store.subjects().requests(workspace, limit).await?)
    }
}

//! The requests and outcomes of the write path, shared by its parts.

use super::error::ServiceError;
use crate::issuer::IssueError;
use crate::limits::QuotaError;
use chrono::{DateTime, SubsecRound, Utc};
use sha2::{Digest, Sha256};
use shortlink_model::validate::{hex, TargetUrl};
use shortlink_model::{Link, LinkExtras, WorkspaceId};
use shortlink_store::StorageError;

/// A validated request to create a link.
#[derive(Debug, Clone)]
///
/// Its fields are the core's own: a `NewLink` is made only by the checks of
/// [`super::accept`] (`new_link`, `imported_link`, `replacement_link`), so no path that makes a
/// link (the API, a batch, compose, import, reissue, the console) can skip one.
pub struct NewLink {
    /// Who will own it.
    pub(crate) workspace: WorkspaceId,
    pub(crate) target: TargetUrl,
    /// A custom alias (already checked with `shortcode::parse_alias`), or `None` to generate.
    pub(crate) code: Option<String>,
    /// Whole seconds, in the future.
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) redirect: u16,
    pub(crate) forward_query: bool,
    /// Return the existing live link for the same URL instead of creating one.
    pub(crate) idempotent: bool,
    pub(crate) campaign: Option<String>,
    pub(crate) recipient_ref: Option<String>,
    pub(crate) tags: Vec<String>,
    /// Lifecycle and rules, checked (`accept::extras`).
    pub(crate) extras: LinkExtras,
    /// Set by `import` only: recreate an exported link as it was (its code may have the generated
    /// shape, its expiry may be past, it may be revoked).
    pub(crate) restore: Option<Restore>,
    /// The code is another shortener's (`import --from`, checked with
    /// `shortcode::parse_imported`). A generated shape with a valid check says nothing of our
    /// sequence then (a 7-character Bitly code has one 1 time in 62): it does not move the
    /// sequence, and the issuer, meeting it later, skips to the next number.
    pub(crate) foreign: bool,
    /// Set by the check at create when the workspace holds listed targets for review
    /// ([`super::target_lists::TargetLists::hold_for_review`]): the link is stored quarantined
    /// under this feed entry instead of refused.
    pub(crate) held: Option<std::sync::Arc<shortlink_threats::Refusal>>,
}

impl NewLink {
    /// The checked target.
    pub fn target(&self) -> &TargetUrl {
        &self.target
    }

    /// The exported times an import recreates the link with, if any.
    pub fn restore(&self) -> Option<Restore> {
        self.restore
    }
}

/// Times of an exported link, recreated by `import`.
#[derive(Debug, Clone, Copy)]
pub struct Restore {
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An `Idempotency-Key` and whose it is (API key id; [`CLI_API_KEY_ID`] for the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub api_key_id: i64,
    pub key: String,
}

/// The owner of idempotency keys given on the command line (`import`).
pub const CLI_API_KEY_ID: i64 = 0;

/// A claimed idempotency key: its row id numbers the request's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub batch_id: i64,
    /// First use of the key: nothing can have been committed under it yet.
    pub fresh: bool,
}

/// SHA-256 (hex) identifying a request for its idempotency key: its kind and the canonical text
/// of its first items (a streamed batch is checked item by item after those).
pub fn request_hash<'a>(kind: &str, items: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    for item in items {
        hasher.update(b"\n");
        hasher.update(item);
    }
    hex(&hasher.finalize())
}

/// What became of one item of a batch. Links are boxed: a chunk keeps one outcome slot per item
/// from its plan to its answer, mostly empty until the commit, and a `Link` inline made each
/// slot ~15 times larger (~240 bytes instead of 16; 8.4 MB of the peak heap of a 300k-link
/// batch, heaptrack).
#[derive(Debug, Clone)]
pub enum ItemOutcome {
    /// Created now, or by an earlier attempt with the same idempotency key.
    Created(Box<Link>),
    /// An `idempotent` item found this live link for the same URL.
    Existing(Box<Link>),
    Failed(ItemFailure),
}

/// Why a valid item was not stored. Causes are logged where they arise, once per chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemFailure {
    CodeTaken,
    /// A retry with the same idempotency key sent another URL for this item.
    IdempotencyMismatch,
    RedisUnavailable,
    DatabaseUnavailable,
    CodesExhausted,
    /// The workspace's links per day would be exceeded (issue 53): nothing of its group issued.
    QuotaExceeded,
    /// The job's key was revoked or its workspace suspended or deleted: nothing of its group,
    /// nor of any later one, issued.
    Stopped(super::error::Stop),
    /// The target is listed by a threat feed: this item only was refused.
    UnsafeTarget(std::sync::Arc<shortlink_threats::Refusal>),
    Internal,
}

impl ItemFailure {
    pub(super) fn of(error: &ServiceError) -> Self {
        match error {
            ServiceError::CodeTaken | ServiceError::Storage(StorageError::Conflict) => {
                ItemFailure::CodeTaken
            }
            ServiceError::IdempotencyKeyReused => ItemFailure::IdempotencyMismatch,
            ServiceError::Quota(QuotaError::Exceeded { .. }) => ItemFailure::QuotaExceeded,
            ServiceError::Quota(QuotaError::Unavailable(_)) => ItemFailure::RedisUnavailable,
            ServiceError::Stopped(stop) => ItemFailure::Stopped(*stop),
            ServiceError::UnsafeTarget(refusal) => ItemFailure::UnsafeTarget(refusal.clone()),
            ServiceError::Redis(_) => ItemFailure::RedisUnavailable,
            ServiceError::Storage(StorageError::Unavailable(_))
            | ServiceError::Issue(IssueError::Storage(StorageError::Unavailable(_))) => {
                ItemFailure::DatabaseUnavailable
            }
            ServiceError::Issue(IssueError::Exhausted(_)) => ItemFailure::CodesExhausted,
            ServiceError::NotFound
            | ServiceError::Invalid(_)
            | ServiceError::Revoked
            | ServiceError::Storage(_)
            | ServiceError::Issue(_) => ItemFailure::Internal,
        }
    }
}

/// A validated change to a link; `None` leaves a field as it is. Its fields are the core's own:
/// a patch is made by [`super::UpdateLinkRequest::into_patch`] (or [`LinkPatch::expire_now`]), so
/// the API, the console and the jobs change a link through the same checks.
#[derive(Debug, Clone, Default)]
pub struct LinkPatch {
    pub(crate) target: Option<TargetUrl>,
    /// `Some(None)` clears the expiry.
    pub(crate) expires_at: Option<Option<DateTime<Utc>>>,
    pub(crate) redirect: Option<u16>,
    pub(crate) forward_query: Option<bool>,
    /// `Some(None)` clears.
    pub(crate) campaign: Option<Option<String>>,
    /// `Some(None)` clears.
    pub(crate) recipient_ref: Option<Option<String>>,
    pub(crate) tags: Option<Vec<String>>,
    /// `Some(None)` clears; each checked like a create's (`accept::extras`).
    pub(crate) valid_since: Option<Option<DateTime<Utc>>>,
    pub(crate) not_yet_url: Option<Option<String>>,
    pub(crate) expired_url: Option<Option<String>>,
    /// The normalised JSON text of the rules; `Some(None)` removes them.
    pub(crate) rules: Option<Option<String>>,
    /// `Some(None)` removes the cap; the clicks counted so far stay counted (the cap is on
    /// clicks ever redirected).
    pub(crate) max_visits: Option<Option<i64>>,
    /// A new password's digest (`accept::password`), replacing any; `Some(None)` removes it.
    pub(crate) password_digest: Option<Option<String>>,
    /// The card's normalised JSON (`card::column`); `Some(None)` removes it.
    pub(crate) preview: Option<Option<String>>,
    /// `Some(None)` stops sending the click id.
    pub(crate) click_id_param: Option<Option<String>>,
}

impl LinkPatch {
    /// The idle-expiry job's change: the link expires now (whole seconds, as the record carries
    /// them). Every other patch is an [`super::UpdateLinkRequest`] checked by `into_patch`.
    pub fn expire_now() -> LinkPatch {
        LinkPatch {
            expires_at: Some(Some(shortlink_store::now().trunc_subsecs(0))),
            ..LinkPatch::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.target.is_none()
            && self.expires_at.is_none()
            && self.redirect.is_none()
            && self.forward_query.is_none()
            && self.campaign.is_none()
            && self.recipient_ref.is_none()
            && self.tags.is_none()
            && self.valid_since.is_none()
            && self.not_yet_url.is_none()
            && self.expired_url.is_none()
            && self.rules.is_none()
            && self.max_visits.is_none()
            && self.password_digest.is_none()
            && self.preview.is_none()
            && self.click_id_param.is_none()
    }
}

#[derive(Debug, Clone)]
pub enum Created {
    New(Link),
    /// An idempotent create found this live link for the same URL.
    Existing(Link),
}

/// What the redirect path answers for a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Redirect {
        status: u16,
        location: String,
        /// The rule (and variant) that chose the target; `None` for the link's own.
        chosen: Option<shortlink_wire::record::Chosen>,
    },
    NotFound,
    Gone,
    /// A threat feed lists the target: `wire`'s warning page (451), no target.
    Quarantined,
    /// Before `valid_since`, without a "not yet" URL: `wire`'s "not yet" page.
    NotYet {
        opens_at: u64,
    },
    /// A password-protected link: `wire`'s password page.
    Password,
    /// A preview fetcher asking for a link with a card: `wire`'s card page (200), drawn for the
    /// target a click would get.
    Card {
        page: Vec<u8>,
        target: String,
        chosen: Option<shortlink_wire::record::Chosen>,
    },
}

//! Creating one link: the code (alias or issued), the SQL insert and the `SET NX` write-through.

use super::commit::Scope;
use super::{Claim, Created, LinkService, NewLink, ServiceError};
use crate::limits::Budget;
use crate::projection::{written_value, RecordWorkspace, RecordWrite};
use chrono::{DateTime, Utc};
use shortlink_model::{Link, LinkExtras, LinkFlags, LinkState};
use shortlink_store::audit::{link_changes, AuditEntry, Changes, Origin};
use shortlink_store::{self as storage, Slot, StorageError};
use std::sync::atomic::Ordering;

/// Attempts at a generated code whose insert collides, in SQL or in Redis: only possible if the
/// database's sequence went back (reset, or restored from an older backup) while nothing moved
/// it past the numbers issued (the high-water mark, see [`crate::issuer`], was lost too). Each
/// refused code moves the sequence past it, and the next number is tried.
pub(super) const GENERATED_CODE_ATTEMPTS: usize = 32;

impl LinkService {
    /// Creates one link, counted against `budget` (its workspace's quota of links per day:
    /// refused whole, nothing written, when it does not fit). With a `claim`, the link takes
    /// slot 0 of the claimed key, and a retry returns the link the first attempt created.
    pub async fn create(
        &self,
        new: NewLink,
        budget: &Budget,
        claim: Option<Claim>,
        origin: &Origin,
    ) -> Result<Created, ServiceError> {
        debug_assert_eq!(
            budget.workspace(),
            new.workspace,
            "another workspace's budget"
        );
        // Before anything is reserved or written: a refused target costs no quota.
        let mut new = new;
        let urls = super::destinations::of(new.target.as_str(), &new.extras);
        new.held = self.screen(new.workspace, &urls, origin).await?;
        // A delete of the workspace waits for this write, or this for it ([`super::authority`]).
        let _writing = self.in_flight.enter(new.workspace).await;
        let reservation = budget.reserve_links(1).await?;
        let created = self.create_reserved(new, claim, origin).await;
        match &created {
            Ok(Created::New(_)) => reservation.keep(1).await,
            Ok(Created::Existing(_)) | Err(_) => reservation.release().await,
        }
        created
    }

    async fn create_reserved(
        &self,
        new: NewLink,
        claim: Option<Claim>,
        origin: &Origin,
    ) -> Result<Created, ServiceError> {
        let slot = claim.map(|claim| Slot {
            batch_id: claim.batch_id,
            index: 0,
        });
        if let Some(claim) = claim.filter(|claim| !claim.fresh) {
            if let Some((_, link)) = self
                .storage
                .links_by_slots(claim.batch_id, 0, 0)
                .await?
                .pop()
            {
                return Ok(Created::New(link));
            }
        }
        // Named before anything is written: a link whose workspace cannot be named is refused.
        let workspace = self.record_workspace(new.workspace).await?;
        let now = storage::now();
        let url_hash = new.target.hash();
        if new.idempotent {
            if let Some(existing) = self.find_existing(&new, &url_hash, now).await? {
                return Ok(Created::Existing(existing));
            }
        }
        let alias = new.code.clone();
        let held = new.held.clone();
        let mut link = new_link(new, String::new(), url_hash, now);
        let attempts = if alias.is_some() {
            1
        } else {
            GENERATED_CODE_ATTEMPTS
        };
        for _ in 1..=attempts {
            // Lease before beginning: on SQLite the lease needs the (single) write connection.
            link.code = match &alias {
                Some(code) => code.clone(),
                None => self.issuer.next_code().await?,
            };
            let mut changes = created_changes(&link);
            if let Some(refusal) = &held {
                changes = (changes.set("feed", refusal.feed.as_str()))
                    .set("entry", refusal.entry.as_str());
            }
            let audit = origin.entry("link.create", &link.code, changes);
            let sql_started = std::time::Instant::now();
            let mut tx = self.storage.begin().await?;
            let inserted = tx.insert_link_audited(&link, slot, &audit).await;
            crate::metrics::write_latency("sql", sql_started);
            let audited = match inserted {
                Ok(audited) => audited,
                Err(StorageError::Conflict) => {
                    let _ = tx.rollback().await;
                    // A concurrent request with the same idempotency key may have won the slot.
                    if let Some(slot) = slot {
                        if let Some((_, won)) = self
                            .storage
                            .links_by_slots(slot.batch_id, 0, 0)
                            .await?
                            .pop()
                        {
                            return Ok(Created::New(won));
                        }
                    }
                    if alias.is_none() {
                        self.generated_code_taken(&link.code).await;
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            super::destinations::index(tx.as_mut(), &link, None).await?;
            if let Some(refusal) = &held {
                super::quarantine::hold(tx.as_mut(), &link, refusal).await?;
            }
            // Appended with the insert where the backend could, else now, before the commit.
            let audit = (!audited).then_some(&audit);
            if self
                .publish_new_and_commit(tx, &link, workspace, alias.is_some(), audit)
                .await?
            {
                return Ok(Created::New(link));
            }
            if alias.is_some() {
                return Err(ServiceError::CodeTaken);
            }
            self.issuer.skip_past(&link.code).await?;
        }
        Err(ServiceError::CodeTaken)
    }

    /// A generated code met a row that holds it already; the caller tries the next number. An
    /// imported code of our shape (`import --from` keeps another shortener's codes as they are)
    /// is expected to: it is skipped quietly. Anything else means the sequence went back.
    pub(super) async fn generated_code_taken(&self, code: &str) {
        match self.storage.imported_links(&[code.to_owned()]).await {
            Ok(found) if !found.is_empty() => {
                tracing::info!(code, "generated code is an imported link's: skipped");
            }
            _ => tracing::error!(
                code,
                "generated code already exists: was the sequence table reset?"
            ),
        }
    }

    /// A create found its code in Redis but not in SQL: SQL is behind Redis (restored from an
    /// older backup). The record stays as it is: it may be a link already sent.
    pub(super) fn refused_code(&self, code: &str, existing: &[u8]) {
        self.refused_codes.fetch_add(1, Ordering::Relaxed);
        // A version 2 record is binary after its first line: log that line.
        let line = existing.split(|&b| b == b'\n').next().unwrap_or_default();
        let existing = String::from_utf8_lossy(line);
        tracing::error!(
            code,
            %existing,
            "a new link's code is already in Redis but not in the database: the database is \
             behind Redis (restored from an older backup?). The code was refused and left as it \
             is; see docs/BACKUP.md"
        );
    }

    /// How many codes creates refused because Redis already held them ([`Self::refused_code`]).
    pub fn refused_codes(&self) -> u64 {
        self.refused_codes.load(Ordering::Relaxed)
    }

    pub(super) async fn find_existing(
        &self,
        new: &NewLink,
        url_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Link>, ServiceError> {
        let candidate = match &new.code {
            // With an alias, only that alias can be "the existing link".
            Some(code) => self.storage.get_link(new.workspace, code).await?,
            None => {
                self.storage
                    .find_live_link(new.workspace, url_hash, new.recipient_ref.as_deref(), now)
                    .await?
            }
        };
        Ok(candidate.filter(|link| {
            link.state(now) == LinkState::Live
                && link.target == new.target.as_str()
                && same_options(&link.extras, &new.extras)
        }))
    }

    /// The write-through of a new link: its record goes in with `SET NX`, so a create never
    /// overwrites a record (a code in Redis but not in SQL means SQL is behind Redis). Returns
    /// `false`, rolled back, when Redis holds the code already; an `explicit` code (alias,
    /// import) whose record is there exactly as it would be written is accepted. A card goes in
    /// after the record (a fetcher in between gets the redirect, as without a card).
    async fn publish_new_and_commit(
        &self,
        tx: Box<dyn storage::LinkTx>,
        link: &Link,
        workspace: RecordWorkspace,
        explicit: bool,
        audit: Option<&AuditEntry>,
    ) -> Result<bool, ServiceError> {
        let write = RecordWrite::for_link(link, workspace, storage::now(), self.grace);
        let redis_started = std::time::Instant::now();
        let created = self.projection.create(&write).await;
        crate::metrics::write_latency("redis", redis_started);
        let ours = match created {
            Ok(None) => true,
            Ok(Some(existing))
                if explicit && Some(existing.as_slice()) == written_value(&write) =>
            {
                false
            }
            Ok(Some(existing)) => {
                let _ = tx.rollback().await;
                self.refused_code(&link.code, &existing);
                return Ok(false);
            }
            Err(error) => {
                // The record is on the primary if too few replicas have it: taken back then.
                let written: Vec<(&str, &[u8])> = written_value(&write)
                    .map(|value| (write.key(), value))
                    .into_iter()
                    .collect();
                let undo = self.projection.delete_if_unchanged(&written);
                self.roll_back_after_redis(tx, Scope::Link(link), &error, undo)
                    .await;
                return Err(error.into());
            }
        };
        let card = RecordWrite::new_card(link, &write);
        // What to take back if the link is not committed after all: the record if this create
        // wrote it, and the card.
        let written: Vec<(&str, &[u8])> = written_value(&write)
            .filter(|_| ours)
            .map(|value| (write.key(), value))
            .into_iter()
            .chain(
                card.iter()
                    .filter_map(|card| Some((card.key(), written_value(card)?))),
            )
            .collect();
        if let Some(card) = &card {
            if let Err(error) = self.projection.apply(std::slice::from_ref(card)).await {
                let undo = self.projection.delete_if_unchanged(&written);
                self.roll_back_and_undo(tx, Scope::Link(link), &error, Some(undo))
                    .await;
                return Err(error.into());
            }
        }
        let undo = self.projection.delete_if_unchanged(&written);
        self.commit_or_undo(tx, Scope::Link(link), audit, undo)
            .await?;
        Ok(true)
    }
}

/// Whether an existing link answers as a new request asks: the same options, and a password on
/// neither. A password cannot be compared with another's salted digest, so a request with one
/// always gets a link of its own, and one without is never handed a protected link.
fn same_options(existing: &LinkExtras, new: &LinkExtras) -> bool {
    existing.password_digest.is_none() && new.password_digest.is_none() && existing == new
}

/// What a create's audit row says of the new link: the fields it was made with (a password only
/// as set, never its digest).
fn created_changes(link: &Link) -> Changes {
    let unset = Link {
        target: String::new(),
        extras: LinkExtras::default(),
        campaign: None,
        recipient_ref: None,
        tags: Vec::new(),
        expires_at: None,
        quarantined_at: None,
        ..link.clone()
    };
    link_changes(&unset, link)
}

/// The link a new item becomes.
pub(super) fn new_link(new: NewLink, code: String, url_hash: String, now: DateTime<Utc>) -> Link {
    let (created_at, revoked_at) = match new.restore {
        Some(restore) => (restore.created_at, restore.revoked_at),
        None => (now, None),
    };
    Link {
        redirect: new.redirect,
        flags: LinkFlags::with_forward_query(new.forward_query),
        updated_at: revoked_at.unwrap_or(created_at).max(created_at),
        expires_at: new.expires_at,
        revoked_at,
        quarantined_at: new.held.as_ref().map(|_| now),
        campaign: new.campaign,
        recipient_ref: new.recipient_ref,
        tags: new.tags,
        extras: new.extras,
        ..Link::new(
            code,
            new.workspace,
            new.target.into_string(),
            url_hash,
            created_at,
        )
    }
}

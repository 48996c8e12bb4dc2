//! Quarantine after the fact (issue 79): when a threat feed adds an entry, the live links whose
//! target it lists are found through the links' host index (`links.target_host`, never a scan
//! of every link) and quarantined: their record answers the warning page wherever it is read
//! (the module, its caches, the fallback), and the link itself is kept. A release (the
//! workspace's admin or the operator) holds against that feed entry; another entry quarantines
//! again. The entry leaving its feed ends the quarantine. Each step is a locked row rewritten
//! and its record re-projected, as a revoke is, with its audit row in the link's workspace.

use super::destinations;
use super::target_lists::BLOCK_LIST;
use super::{LinkService, ServiceError};
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::audit::{link_changes, Actor, Origin};
use shortlink_store::{
    self as storage, LinkEvent, LinkEventKind, LinkEventReason, LinkTx, Quarantine,
};
use shortlink_threats::{normalize, FeedChange};
use std::collections::HashSet;

/// Links read at a time.
const PAGE: u32 = 500;

/// Above this many added hosts (a feed's first load), the sweep walks the links' distinct hosts
/// (the index alone) and looks each up among the added ones, instead of a range per entry.
const PER_ENTRY_MAX: usize = 10_000;

/// The audit actor of what a feed did.
const JOB: &str = "threat-feeds";

impl LinkService {
    /// Quarantines the unrevoked links whose target one of `change`'s added entries lists;
    /// returns how many it quarantined.
    pub async fn quarantine_added(&self, change: &FeedChange) -> Result<u64, ServiceError> {
        let mut quarantined = 0;
        let hosts = if change.added_hosts.len() <= PER_ENTRY_MAX {
            change.added_hosts.clone()
        } else {
            self.listed_link_hosts(&change.added_hosts).await?
        };
        for host in &hosts {
            quarantined += self
                .quarantine_on_host(host, &change.feed, host, |_| true)
                .await?;
        }
        for url in &change.added_urls {
            let Some(host) = normalize::host_of(url) else {
                continue;
            };
            let same_url = |link: &Link| {
                destinations::of(&link.target, &link.extras)
                    .iter()
                    .any(|to| {
                        normalize::serialized_parts(to).is_some_and(|(listed, _)| listed == url)
                    })
            };
            quarantined += self
                .quarantine_on_host(&host, &change.feed, url, same_url)
                .await?;
        }
        if quarantined > 0 {
            tracing::warn!(
                feed = change.feed,
                quarantined,
                "links quarantined by a threat feed"
            );
        }
        Ok(quarantined)
    }

    /// Of `added` (hosts), those that links point to (themselves or by a subdomain), from one
    /// walk over the links' distinct hosts.
    async fn listed_link_hosts(&self, added: &[String]) -> Result<Vec<String>, ServiceError> {
        let added: HashSet<&str> = added.iter().map(String::as_str).collect();
        let mut found = HashSet::new();
        for of_targets in [true, false] {
            let mut after: Option<String> = None;
            loop {
                let (storage, from) = (&self.storage, after.as_deref());
                let keys = match of_targets {
                    true => storage.link_host_keys(from, PAGE * 10).await?,
                    false => storage.destination_host_keys(from, PAGE * 10).await?,
                };
                let Some(last) = keys.last() else { break };
                after = Some(last.clone());
                for key in &keys {
                    let host = host_of_key(key);
                    let entry =
                        normalize::self_and_parents(&host).find(|name| added.contains(name));
                    if let Some(entry) = entry {
                        found.insert(entry.to_owned());
                    }
                }
            }
        }
        Ok(found.into_iter().collect())
    }

    /// Quarantines the links on `host` (and its subdomains) that `matches` keeps, under `feed`'s
    /// `entry`.
    async fn quarantine_on_host(
        &self,
        host: &str,
        feed: &str,
        entry: &str,
        matches: impl Fn(&Link) -> bool,
    ) -> Result<u64, ServiceError> {
        let mut quarantined = 0;
        // By target, then by the other destinations (lifecycle URLs, rules' targets).
        for by_target in [true, false] {
            let mut after: Option<String> = None;
            loop {
                let storage = &self.storage;
                let page = match by_target {
                    true => storage.links_on_host(host, after.as_deref(), PAGE).await?,
                    false => (storage.links_sending_to_host(host, after.as_deref(), PAGE)).await?,
                };
                let Some(last) = page.last() else { break };
                after = Some(last.code.clone());
                for link in page.iter().filter(|link| matches(link)) {
                    match self
                        .quarantine(link.workspace, &link.code, feed, entry)
                        .await
                    {
                        Ok(true) => quarantined += 1,
                        Ok(false) | Err(ServiceError::NotFound) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        Ok(quarantined)
    }

    /// Quarantines `workspace`'s link `code` under `feed`'s `entry`; `false` when it is revoked,
    /// already quarantined, or released under this very entry (a release holds until the entry
    /// changes).
    pub async fn quarantine(
        &self,
        workspace: WorkspaceId,
        code: &str,
        feed: &str,
        entry: &str,
    ) -> Result<bool, ServiceError> {
        let (_writing, mut tx, current) = self.lock_for_change(workspace, code).await?;
        let held = match tx.quarantine_of(code).await? {
            Some(q) => q.released_at.is_none() || (q.feed == feed && q.entry == entry),
            None => false,
        };
        if current.revoked_at.is_some() || held {
            let _ = tx.rollback().await;
            return Ok(false);
        }
        let now = storage::now().max(current.updated_at);
        let mut next = current.clone();
        next.quarantined_at = Some(now);
        next.updated_at = now;
        tx.update_link(&next).await?;
        let quarantine = Quarantine {
            code: code.to_owned(),
            workspace,
            feed: feed.to_owned(),
            entry: entry.to_owned(),
            quarantined_at: now,
            released_at: None,
            released_by: None,
        };
        tx.put_quarantine(&quarantine).await?;
        let told = LinkEvent::of(
            &quarantine,
            LinkEventKind::Quarantined,
            LinkEventReason::Listed,
            now,
        );
        tx.stage_link_event(told);
        let changes = link_changes(&current, &next)
            .set("feed", feed)
            .set("entry", entry);
        let origin = Origin::new(Actor::system(JOB));
        let audit = origin.entry_in(workspace.get(), "link.quarantined", code, changes);
        self.publish_and_commit(tx, &next, Some(&current), &audit)
            .await?;
        crate::metrics::link_quarantine(feed, "quarantined");
        Ok(true)
    }

    /// Releases the quarantined link `code`: of `workspace` (its admin), or of any workspace
    /// (`None`: the operator). It answers again, and the feed entry that listed it does not
    /// quarantine it again while the feed keeps listing it. A link not quarantined is returned
    /// as it is.
    pub async fn release(
        &self,
        workspace: Option<WorkspaceId>,
        code: &str,
        origin: &Origin,
    ) -> Result<Link, ServiceError> {
        let workspace = match workspace {
            Some(workspace) => workspace,
            None => {
                (self.storage.link_by_code(code).await?)
                    .ok_or(ServiceError::NotFound)?
                    .workspace
            }
        };
        let (_writing, mut tx, current) = self.lock_for_change(workspace, code).await?;
        let quarantine = tx.quarantine_of(code).await?;
        let Some(mut quarantine) = quarantine.filter(|q| q.released_at.is_none()) else {
            let _ = tx.rollback().await;
            return Ok(current);
        };
        let now = storage::now().max(current.updated_at);
        let mut next = current.clone();
        next.quarantined_at = None;
        next.updated_at = now;
        quarantine.released_at = Some(now);
        quarantine.released_by = Some(origin.actor.name.clone());
        tx.update_link(&next).await?;
        tx.put_quarantine(&quarantine).await?;
        let told = LinkEvent::of(
            &quarantine,
            LinkEventKind::Released,
            LinkEventReason::Released,
            now,
        );
        tx.stage_link_event(told);
        let changes = link_changes(&current, &next)
            .set("feed", quarantine.feed.as_str())
            .set("entry", quarantine.entry.as_str());
        let audit = origin.entry_in(workspace.get(), "link.released", code, changes);
        self.publish_and_commit(tx, &next, Some(&current), &audit)
            .await?;
        crate::metrics::link_quarantine(&quarantine.feed, "released");
        Ok(next)
    }

    /// After a refresh of `feed`: every quarantine under an entry the feed no longer lists
    /// (`lists` says) ends. A held one's link answers again (audited `link.quarantine_ended`); a
    /// released one is forgotten, so the entry coming back quarantines again. Returns how many
    /// links answer again.
    pub async fn end_unlisted(
        &self,
        feed: &str,
        lists: impl Fn(&str) -> bool,
    ) -> Result<u64, ServiceError> {
        let mut ended = 0;
        for quarantine in self.storage.quarantines(Some(feed), None).await? {
            if lists(&quarantine.entry) {
                continue;
            }
            match self.end(&quarantine).await {
                Ok(true) => ended += 1,
                Ok(false) | Err(ServiceError::NotFound) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(ended)
    }

    async fn end(&self, ending: &Quarantine) -> Result<bool, ServiceError> {
        let workspace = ending.workspace;
        let _writing = self.in_flight.enter(workspace).await;
        let mut tx = self.storage.begin().await?;
        let current = tx.lock_link(workspace, &ending.code).await?;
        // The row as it is now: a sweep of another sidecar may have changed it since the read.
        let same = (tx.quarantine_of(&ending.code).await?)
            .filter(|q| q.feed == ending.feed && q.entry == ending.entry);
        let (Some(current), Some(quarantine)) = (current, same) else {
            tx.delete_quarantine(&ending.code).await?;
            tx.commit().await?;
            return Ok(false);
        };
        tx.delete_quarantine(&ending.code).await?;
        if quarantine.released_at.is_some() || current.quarantined_at.is_none() {
            tx.commit().await?;
            return Ok(false);
        }
        let mut next = current.clone();
        next.quarantined_at = None;
        next.updated_at = storage::now().max(current.updated_at);
        tx.update_link(&next).await?;
        let told = LinkEvent::of(
            &quarantine,
            LinkEventKind::Released,
            LinkEventReason::Unlisted,
            next.updated_at,
        );
        tx.stage_link_event(told);
        let changes = link_changes(&current, &next)
            .set("feed", quarantine.feed.as_str())
            .set("entry", quarantine.entry.as_str());
        let origin = Origin::new(Actor::system(JOB));
        let audit = origin.entry_in(
            workspace.get(),
            "link.quarantine_ended",
            &ending.code,
            changes,
        );
        self.publish_and_commit(tx, &next, Some(&current), &audit)
            .await?;
        crate::metrics::link_quarantine(&quarantine.feed, "released");
        Ok(true)
    }

    /// A workspace's block list changed from `before` to `after`: its unrevoked links on a host
    /// added are quarantined (feed [`BLOCK_LIST`]); the quarantines under a host removed end.
    /// Another workspace's links are never touched.
    pub(super) async fn follow_block_list(
        &self,
        workspace: WorkspaceId,
        before: &[String],
        after: &[String],
    ) -> Result<(), ServiceError> {
        for host in after.iter().filter(|host| !before.contains(host)) {
            let own = |link: &Link| link.workspace == workspace;
            self.quarantine_on_host(host, BLOCK_LIST, host, own).await?;
        }
        let ended = (self
            .storage
            .quarantines(Some(BLOCK_LIST), Some(workspace))
            .await?)
            .into_iter()
            .filter(|q| !after.contains(&q.entry));
        for quarantine in ended {
            match self.end(&quarantine).await {
                Ok(_) | Err(ServiceError::NotFound) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// `workspace`'s quarantines (held and released), newest first.
    pub async fn quarantines(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<Quarantine>, ServiceError> {
        Ok(self.storage.quarantines(None, Some(workspace)).await?)
    }

    /// Writes the host key of the links stored before keys existed, a page at a time, until
    /// none is left; returns how many.
    pub async fn fill_host_keys(&self) -> Result<u64, ServiceError> {
        let mut filled = 0;
        loop {
            match self.storage.fill_link_host_keys(PAGE * 2).await? {
                0 => return Ok(filled),
                n => filled += n,
            }
        }
    }
}

/// Stores `link`, inserted in `tx`, held for review under `refusal`'s entry, and tells its
/// workspace's subscribers.
pub(super) async fn hold(
    tx: &mut dyn LinkTx,
    link: &Link,
    refusal: &shortlink_threats::Refusal,
) -> Result<(), ServiceError> {
    let quarantine = held(link, refusal);
    tx.put_quarantine(&quarantine).await?;
    let told = LinkEvent::of(
        &quarantine,
        LinkEventKind::Quarantined,
        LinkEventReason::Held,
        link.created_at,
    );
    tx.stage_link_event(told);
    Ok(())
}

/// The quarantine of `link`, stored held for review at its creation under `refusal`'s entry.
fn held(link: &Link, refusal: &shortlink_threats::Refusal) -> Quarantine {
    Quarantine {
        code: link.code.clone(),
        workspace: link.workspace,
        feed: refusal.feed.clone(),
        entry: refusal.entry.clone(),
        quarantined_at: link.created_at,
        released_at: None,
        released_by: None,
    }
}

/// The host a key of `links.target_host` is made from (`example.evil.www.` gives
/// `www.evil.example`).
fn host_of_key(key: &str) -> String {
    let labels: Vec<&str> = key.trim_end_matches('.').split('.').collect();
    labels.into_iter().rev().collect::<Vec<_>>().join(".")
}

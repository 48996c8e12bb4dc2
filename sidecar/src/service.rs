//! The link write path: SQL transaction + Redis write-through, and the resolver behind nginx's
//! fallback.
//!
//! Every create, update and revoke runs:
//!
//! 1. the SQL write, inside a transaction (row locked for updates);
//! 2. the Redis write of the resulting record (`SET`, `SET ... EXAT` or the tombstone);
//! 3. the commit.
//!
//! If Redis fails, the transaction is rolled back and the caller gets `redis_unavailable`: a link
//! only in SQL would answer 404 at nginx, so it is better not to acknowledge it. If the commit fails
//! after the Redis write, the previous record is put back (best effort) and the error returned. So an
//! acknowledged write is in both stores, and a refused one in neither (up to that best effort).

use crate::issuer::{IssueError, Issuer};
use crate::projection::{Projection, ProjectionError, RecordWrite};
use crate::storage::{self, Link, LinkFlags, LinkState, ListCursor, Storage, StorageError};
use crate::validate::TargetUrl;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no such link")]
    NotFound,
    #[error("the link is revoked")]
    Revoked,
    #[error("the code is taken")]
    CodeTaken,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
    #[error(transparent)]
    Issue(#[from] IssueError),
}

/// A validated request to create a link.
#[derive(Debug, Clone)]
pub struct NewLink {
    pub target: TargetUrl,
    /// A custom alias (already checked with `shortcode::parse_alias`), or `None` to generate.
    pub code: Option<String>,
    /// Whole seconds, in the future.
    pub expires_at: Option<DateTime<Utc>>,
    pub redirect: u16,
    pub forward_query: bool,
    /// Return the existing live link for the same URL instead of creating one.
    pub idempotent: bool,
}

/// A validated change to a link; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct LinkPatch {
    pub target: Option<TargetUrl>,
    /// `Some(None)` clears the expiry.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    pub redirect: Option<u16>,
    pub forward_query: Option<bool>,
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
    Redirect { status: u16, location: String },
    NotFound,
    Gone,
}

pub struct LinkService {
    storage: Arc<dyn Storage>,
    projection: Arc<Projection>,
    issuer: Issuer,
    grace: Duration,
}

/// Attempts at a generated code whose insert collides: only possible if the sequence table was
/// reset, and then a later number is free.
const GENERATED_CODE_ATTEMPTS: usize = 3;

impl LinkService {
    pub fn new(
        storage: Arc<dyn Storage>,
        projection: Arc<Projection>,
        issuer: Issuer,
        grace: Duration,
    ) -> Self {
        Self {
            storage,
            projection,
            issuer,
            grace,
        }
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn projection(&self) -> &Arc<Projection> {
        &self.projection
    }

    pub fn scheme(&self) -> &shortcode::CodeScheme {
        self.issuer.scheme()
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    pub async fn create(&self, new: NewLink) -> Result<Created, ServiceError> {
        let now = storage::now();
        let url_hash = new.target.hash();
        if new.idempotent {
            if let Some(existing) = self.find_existing(&new, &url_hash, now).await? {
                return Ok(Created::Existing(existing));
            }
        }
        let mut link = Link {
            code: String::new(),
            target: new.target.into_string(),
            url_hash,
            redirect: new.redirect,
            flags: LinkFlags::with_forward_query(new.forward_query),
            created_at: now,
            updated_at: now,
            expires_at: new.expires_at,
            revoked_at: None,
            visit_count: 0,
            last_visit_at: None,
        };
        let attempts = if new.code.is_some() {
            1
        } else {
            GENERATED_CODE_ATTEMPTS
        };
        for attempt in 1..=attempts {
            // Lease before beginning: on SQLite the lease needs the (single) write connection.
            link.code = match &new.code {
                Some(code) => code.clone(),
                None => self.issuer.next_code().await?,
            };
            let mut tx = self.storage.begin().await?;
            match tx.insert_link(&link).await {
                Ok(()) => {}
                Err(StorageError::Conflict) => {
                    let _ = tx.rollback().await;
                    if new.code.is_none() {
                        tracing::error!(
                            code = %link.code,
                            attempt,
                            "generated code already exists: was the sequence table reset?"
                        );
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            self.publish_and_commit(tx, &link, None).await?;
            return Ok(Created::New(link));
        }
        Err(ServiceError::CodeTaken)
    }

    async fn find_existing(
        &self,
        new: &NewLink,
        url_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Link>, ServiceError> {
        let candidate = match &new.code {
            // With an alias, only that alias can be "the existing link".
            Some(code) => self.storage.get_link(code).await?,
            None => self.storage.find_live_link(url_hash, now).await?,
        };
        Ok(candidate.filter(|link| {
            link.state(now) == LinkState::Live && link.target == new.target.as_str()
        }))
    }

    pub async fn get(&self, code: &str) -> Result<Link, ServiceError> {
        self.storage
            .get_link(code)
            .await?
            .ok_or(ServiceError::NotFound)
    }

    pub async fn list(
        &self,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> Result<Vec<Link>, ServiceError> {
        Ok(self.storage.list_links(after, limit).await?)
    }

    pub async fn update(&self, code: &str, patch: LinkPatch) -> Result<Link, ServiceError> {
        let mut tx = self.storage.begin().await?;
        let Some(current) = tx.lock_link(code).await? else {
            let _ = tx.rollback().await;
            return Err(ServiceError::NotFound);
        };
        if current.revoked_at.is_some() {
            let _ = tx.rollback().await;
            return Err(ServiceError::Revoked);
        }
        let mut next = current.clone();
        if let Some(target) = patch.target {
            next.url_hash = target.hash();
            next.target = target.into_string();
        }
        if let Some(expires_at) = patch.expires_at {
            next.expires_at = expires_at;
        }
        if let Some(redirect) = patch.redirect {
            next.redirect = redirect;
        }
        if let Some(forward) = patch.forward_query {
            next.flags.set_forward_query(forward);
        }
        next.updated_at = storage::now().max(current.updated_at);
        tx.update_link(&next).await?;
        self.publish_and_commit(tx, &next, Some(&current)).await?;
        Ok(next)
    }

    /// Revokes a link for good. Revoking a revoked link changes nothing in SQL, rewrites the
    /// tombstone (repairing Redis if needed) and returns the link as it is.
    pub async fn revoke(&self, code: &str) -> Result<Link, ServiceError> {
        let mut tx = self.storage.begin().await?;
        let Some(current) = tx.lock_link(code).await? else {
            let _ = tx.rollback().await;
            return Err(ServiceError::NotFound);
        };
        let mut next = current.clone();
        if current.revoked_at.is_none() {
            let now = storage::now().max(current.updated_at);
            next.revoked_at = Some(now);
            next.updated_at = now;
            tx.update_link(&next).await?;
        }
        self.publish_and_commit(tx, &next, Some(&current)).await?;
        Ok(next)
    }

    async fn publish_and_commit(
        &self,
        tx: Box<dyn storage::LinkTx>,
        link: &Link,
        previous: Option<&Link>,
    ) -> Result<(), ServiceError> {
        let now = storage::now();
        let write = RecordWrite::for_link(link, now, self.grace);
        if let Err(error) = self.projection.apply(std::slice::from_ref(&write)).await {
            tracing::warn!(code = %link.code, %error, "redis write failed; rolling back");
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(code = %link.code, error = %rollback, "rollback failed");
            }
            return Err(error.into());
        }
        if let Err(error) = tx.commit().await {
            let restore = RecordWrite::restore(&link.code, previous, now, self.grace);
            if let Err(redis) = self.projection.apply(&[restore]).await {
                tracing::error!(
                    code = %link.code,
                    %error,
                    %redis,
                    "commit failed after the redis write, and redis could not be restored: \
                     run `shortlink-sidecar resync`"
                );
            }
            return Err(error.into());
        }
        Ok(())
    }

    /// What nginx would answer for `code` (and the request's raw `query`), from SQL. Repairs the
    /// Redis key in the background if it is missing.
    pub async fn resolve(
        &self,
        code: &str,
        query: Option<&str>,
    ) -> Result<Resolution, ServiceError> {
        if !self.issuer.scheme().shape(code.as_bytes()).may_exist() {
            return Ok(Resolution::NotFound);
        }
        let Some(link) = self.storage.get_link(code).await? else {
            return Ok(Resolution::NotFound);
        };
        let now = storage::now();
        let write = RecordWrite::for_link(&link, now, self.grace);
        let resolution = match link.state(now) {
            LinkState::Live => Resolution::Redirect {
                status: link.redirect,
                location: match query {
                    Some(query) if link.flags.forward_query() => append_query(&link.target, query),
                    _ => link.target.clone(),
                },
            },
            LinkState::Revoked => Resolution::Gone,
            // 410 while the key would still exist (expiry + grace), then 404, as nginx answers.
            LinkState::Expired if matches!(write, RecordWrite::Delete { .. }) => {
                Resolution::NotFound
            }
            LinkState::Expired => Resolution::Gone,
        };
        let projection = Arc::clone(&self.projection);
        tokio::spawn(async move {
            if let Err(error) = projection.repair(&write).await {
                tracing::debug!(%error, "redis repair after fallback resolve failed");
            }
        });
        Ok(resolution)
    }
}

/// Appends a request's query string to a target, before its fragment.
pub fn append_query(target: &str, query: &str) -> String {
    if query.is_empty() {
        return target.to_owned();
    }
    let (base, fragment) = match target.find('#') {
        Some(at) => target.split_at(at),
        None => (target, ""),
    };
    let separator = if base.ends_with('?') || base.ends_with('&') {
        ""
    } else if base.contains('?') {
        "&"
    } else {
        "?"
    };
    format!("{base}{separator}{query}{fragment}")
}

#[cfg(test)]
mod tests {
    use super::append_query;

    #[test]
    fn query_forwarding() {
        assert_eq!(append_query("https://a.example/", ""), "https://a.example/");
        assert_eq!(
            append_query("https://a.example/", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/?a=b", "x=1"),
            "https://a.example/?a=b&x=1"
        );
        assert_eq!(
            append_query("https://a.example/?", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/p#f", "x=1"),
            "https://a.example/p?x=1#f"
        );
        assert_eq!(
            append_query("https://a.example/?a#f?g", "x"),
            "https://a.example/?a&x#f?g"
        );
    }
}

//! What a receipt is evidence of (issue 77), beyond its fields' shapes: the short domain it names
//! must be one of its workspace's, and its time must be one a report of a message can have.
//!
//! **The domain.** A receipt's domain feeds the funnel's `by_domain` and the drain on
//! rejections: a host its reporter merely writes would let it judge any domain. A `short_url`'s
//! host is kept only when it is a domain of the receipt's workspace, as nginx's issuing list names
//! them (the `[<slug>]` part; the default workspace's also `--short-domains` and
//! `--public-base-url`); another host is refused, 422 `foreign_domain`, nothing stored. A sidecar
//! that has not yet had nginx's list since it started cannot tell: it keeps the receipt without a
//! domain (it counts on none) rather than lose it. A send job's own reports are signed instead
//! ([`super::signed`]): their host is the one the job sent.
//!
//! **The time.** One rule for every gateway: a report's time outside [now − 31 days, now + 5
//! minutes] is not believed, and the receipt is taken at the time it was received. 31 days is the
//! longest report window a job keeps its callback (720 h) and a day; a report cannot be older
//! than its message. The receipt is kept (a gateway does not send a refused report again, and
//! its state is worth more than its time), but a year-0 or year-2100 `ts` is never stored.

use crate::{AppState, Error, Result};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use shortlink_store::WorkspaceId;
use shortlink_visits::deliveries::NewReceipt;

/// How far ahead of ours a gateway's clock may be.
pub const MAX_AHEAD: Duration = Duration::minutes(5);
/// How old a report may be: the longest report window (720 h) and a day.
pub const MAX_BEHIND: Duration = Duration::hours(720 + 24);

/// `at` if a report can have it as of `now`, else `now`.
pub fn believable(at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    match now - MAX_BEHIND <= at && at <= now + MAX_AHEAD {
        true => at,
        false => now,
    }
}

/// The domains of one workspace, as this request sees them.
pub struct WorkspaceDomains {
    state: AppState,
    slug: String,
    /// The default workspace's configured hosts (`--short-domains`, `--public-base-url`).
    configured: Vec<String>,
}

impl WorkspaceDomains {
    pub async fn of(state: &AppState, workspace: WorkspaceId) -> Result<Self> {
        let slugs = state.links.slugs();
        let name = slugs
            .record_workspace(state.links.storage().as_ref(), workspace)
            .await?;
        let mut configured = Vec::new();
        if workspace == WorkspaceId::DEFAULT {
            configured.extend(state.settings.short_domains.iter().cloned());
            let base = (state.settings.public_base_url.as_deref())
                .and_then(|base| url::Url::parse(base).ok());
            configured.extend(base.and_then(|url| url.host_str().map(str::to_ascii_lowercase)));
        }
        Ok(WorkspaceDomains {
            state: state.clone(),
            slug: name.slug().as_str().to_owned(),
            configured,
        })
    }

    /// Keeps `new`'s host when it is one of the workspace's, drops it when no list tells, and
    /// refuses it otherwise (422 `foreign_domain`).
    pub fn admit(&self, new: &mut NewReceipt) -> Result<()> {
        let Some(host) = new.short_domain.as_deref() else {
            return Ok(());
        };
        if self.configured.iter().any(|own| own == host) {
            return Ok(());
        }
        match self.state.domains.names_in(&self.slug, host) {
            Some(true) => Ok(()),
            Some(false) => Err(foreign_domain(host)),
            None => {
                new.short_domain = None;
                Ok(())
            }
        }
    }
}

/// [`WorkspaceDomains::admit`] for one receipt; nothing to look up when it names no host.
pub async fn admit_one(
    state: &AppState,
    workspace: WorkspaceId,
    new: &mut NewReceipt,
) -> Result<()> {
    if new.short_domain.is_none() {
        return Ok(());
    }
    WorkspaceDomains::of(state, workspace).await?.admit(new)
}

pub fn foreign_domain(host: &str) -> Error {
    Error::Request {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "foreign_domain",
        message: format!(
            "`short_url`'s host {host} is not a domain of this workspace: a receipt is only about \
             the workspace's own links on its own domains; nothing stored"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_no_report_can_have_are_the_received_time() {
        let now = Utc::now();
        for good in [now, now - Duration::days(30), now + Duration::minutes(4)] {
            assert_eq!(believable(good, now), good);
        }
        let year_0 = DateTime::parse_from_rfc3339("0000-01-01T00:00:00Z").unwrap();
        let year_2100 = DateTime::parse_from_rfc3339("2100-01-01T00:00:00Z").unwrap();
        for bad in [year_0.into(), year_2100.into(), now + Duration::minutes(6)] {
            assert_eq!(believable(bad, now), now, "{bad}");
        }
        assert_eq!(believable(now - Duration::days(32), now), now);
    }
}

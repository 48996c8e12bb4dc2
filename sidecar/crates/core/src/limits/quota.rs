//! Workspace quotas: links per UTC day, counted in Redis so that every sidecar draws on one
//! count, and reserved for a whole request before any link is issued; recipients per compose and
//! webhook subscriptions, plain checks of a number the caller has.
//!
//! A batch (or compose) that does not fit in what is left of the day is refused whole, with
//! nothing issued: a client then knows that a 429 means "none of these", never "some of these,
//! find out which". The reservation is given back ([`Reservation::release`]) when the create then
//! fails, or in part ([`Reservation::keep`]) when only some of its links were made.
//!
//! Unlike the per-key rate limit, a quota that cannot be read refuses (503, as the create itself
//! would: it needs the same Redis for its write-through).

use super::connection::{LimitsConnection, LimitsUnavailable};
use super::limit::refused;
use chrono::{DateTime, Duration as Days, NaiveTime, Utc};
use shortlink_wire::keys::links_quota_key;
use std::sync::Arc;
use std::time::Duration;

/// `EVALSHA <RESERVE> 1 <day key> <n> <limit> <expire at (unix s)>`: adds `n` to the day's count
/// if the sum stays within `limit`, and sets the key's expiry. The reply: `{1, count after}` when
/// reserved, `{0, count}` when refused (nothing changed).
const RESERVE: &str = r"
local n, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[1]) or 0) or 0
if used + n > limit then return {0, used} end
used = redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIREAT', KEYS[1], ARGV[3])
return {1, used}
";

/// `EVALSHA <RELEASE> 1 <day key> <n>`: takes `n` back off the day's count, never below zero,
/// keeping the expiry; a key gone (expired) stays gone. The reply: the count after.
const RELEASE: &str = r"
local used = tonumber(redis.call('GET', KEYS[1]) or 0) or 0
if used == 0 then return 0 end
local left = math.max(used - tonumber(ARGV[1]), 0)
redis.call('SET', KEYS[1], left, 'KEEPTTL')
return left
";

/// `EVALSHA <USED> 1 <day key>`: the day's count (0 when nothing was counted).
const USED: &str = r"
return tonumber(redis.call('GET', KEYS[1]) or 0) or 0
";

/// Which quota a refusal is about: its name in headers, metrics and docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    LinksPerDay,
    ComposeRecipients,
    Webhooks,
}

impl Quota {
    pub fn name(self) -> &'static str {
        match self {
            Quota::LinksPerDay => "links-per-day",
            Quota::ComposeRecipients => "compose-recipients",
            Quota::Webhooks => "webhooks",
        }
    }

    /// The quota's window in seconds, for `RateLimit-Policy`'s `w` (none for a plain count).
    pub fn window_secs(self) -> Option<u64> {
        match self {
            Quota::LinksPerDay => Some(86_400),
            Quota::ComposeRecipients | Quota::Webhooks => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// The request would take `quota` past `limit` (`used` so far). `retry_after`: when the
    /// request would fit (the next UTC day); `None` when waiting will not help (more links in one
    /// request than a whole day allows, a count that only the client can lower).
    #[error("{} quota exceeded: {used} of {limit} used", .quota.name())]
    Exceeded {
        quota: Quota,
        limit: u64,
        used: u64,
        retry_after: Option<Duration>,
    },
    #[error("quota unavailable: {0}")]
    Unavailable(#[from] LimitsUnavailable),
}

/// The workspace quotas. Cheap to clone.
#[derive(Clone)]
pub struct Quotas {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Arc<LimitsConnection>,
    reserve: redis::Script,
    release: redis::Script,
    used: redis::Script,
}

impl Quotas {
    pub(super) fn new(connection: Arc<LimitsConnection>) -> Self {
        Self {
            inner: Arc::new(Inner {
                connection,
                reserve: redis::Script::new(RESERVE),
                release: redis::Script::new(RELEASE),
                used: redis::Script::new(USED),
            }),
        }
    }

    /// Reserves `n` links of `workspace`'s `per_day` (0: unlimited, nothing counted) for today
    /// (UTC), all or none.
    pub async fn reserve_links(
        &self,
        workspace: i64,
        n: u64,
        per_day: u64,
    ) -> Result<Reservation, QuotaError> {
        self.reserve_links_at(workspace, n, per_day, Utc::now())
            .await
    }

    /// [`Self::reserve_links`] on the day of `now`.
    pub async fn reserve_links_at(
        &self,
        workspace: i64,
        n: u64,
        per_day: u64,
        now: DateTime<Utc>,
    ) -> Result<Reservation, QuotaError> {
        if per_day == 0 || n == 0 {
            return Ok(Reservation::uncounted(n));
        }
        let day = Day::of(now);
        let key = links_quota_key(workspace, &day.name);
        let exceeded = |used| QuotaError::Exceeded {
            quota: Quota::LinksPerDay,
            limit: per_day,
            used,
            retry_after: (n <= per_day).then_some(day.left),
        };
        if n > per_day {
            // Never fits, whatever was used: no need to ask Redis.
            return Err(exceeded(0));
        }
        let mut invocation = self.inner.reserve.prepare_invoke();
        invocation.key(&key).arg(n).arg(per_day).arg(day.expire_at);
        let (reserved, used): (u8, u64) = self.inner.connection.invoke(&invocation).await?;
        if reserved != 1 {
            refused(Quota::LinksPerDay.name());
            return Err(exceeded(used));
        }
        Ok(Reservation {
            held: Some((self.clone(), key)),
            n,
            undrawn: n,
            used,
        })
    }

    /// The links `workspace` has used of today's (UTC) quota: counted only while it has one, so
    /// a workspace without one reads 0. For people (the console's workspace page), not a check.
    pub async fn links_used_today(&self, workspace: i64) -> Result<u64, LimitsUnavailable> {
        let day = Day::of(Utc::now());
        let mut invocation = self.inner.used.prepare_invoke();
        invocation.key(links_quota_key(workspace, &day.name));
        self.inner.connection.invoke(&invocation).await
    }

    async fn give_back(&self, key: &str, n: u64) -> Result<u64, LimitsUnavailable> {
        let mut invocation = self.inner.release.prepare_invoke();
        invocation.key(key).arg(n);
        self.inner.connection.invoke(&invocation).await
    }
}

/// Recipients of one compose against `limit` (0: unlimited): a plain check, nothing counted.
pub fn check_recipients(recipients: u64, limit: u64) -> Result<(), QuotaError> {
    check_count(Quota::ComposeRecipients, recipients, limit)
}

/// One more webhook subscription, when `workspace` has `existing` (the caller's count from SQL),
/// against `limit` (0: unlimited).
pub fn check_webhooks(existing: u64, limit: u64) -> Result<(), QuotaError> {
    check_count(Quota::Webhooks, existing + 1, limit)
}

fn check_count(quota: Quota, wanted: u64, limit: u64) -> Result<(), QuotaError> {
    if limit == 0 || wanted <= limit {
        return Ok(());
    }
    refused(quota.name());
    Err(QuotaError::Exceeded {
        quota,
        limit,
        used: wanted.saturating_sub(1).min(limit),
        retry_after: None,
    })
}

/// Links reserved for one request: counted until given back. Dropping it keeps them counted (a
/// create that ended in doubt may well have issued them).
///
/// Made only by [`super::Budget::reserve_links`]: the service's writes of new links draw on
/// one ([`Self::draw`]), so none is issued outside its workspace's quota.
#[must_use = "release the reservation if the create fails"]
pub struct Reservation {
    /// The quotas and the day's key; `None` when nothing was counted (no quota).
    held: Option<(Quotas, String)>,
    n: u64,
    /// Of `n`, how many links writes may still issue.
    undrawn: u64,
    /// The day's count with this reservation.
    used: u64,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("key", &self.held.as_ref().map(|(_, key)| key))
            .field("n", &self.n)
            .field("undrawn", &self.undrawn)
            .field("used", &self.used)
            .finish()
    }
}

impl Reservation {
    /// `n` links where no quota applies: nothing counted, but writes still draw on it.
    pub(super) fn uncounted(n: u64) -> Self {
        Self {
            held: None,
            n,
            undrawn: n,
            used: 0,
        }
    }

    /// Takes `links` of what is left to issue; `false` (nothing taken) when fewer are left: a
    /// write that would issue more than was reserved issues none.
    pub(crate) fn draw(&mut self, links: u64) -> bool {
        match self.undrawn.checked_sub(links) {
            Some(left) => {
                self.undrawn = left;
                true
            }
            None => false,
        }
    }

    /// Splits `links` (at most what is left) off into a reservation of their own, for a job
    /// that reserved its whole input first and writes it a part at a time.
    pub fn split_off(&mut self, links: u64) -> Reservation {
        let links = links.min(self.undrawn);
        self.n -= links;
        self.undrawn -= links;
        Reservation {
            held: self.held.clone(),
            n: links,
            undrawn: links,
            used: self.used,
        }
    }

    /// The day's count including this reservation (0 without a quota).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Gives the whole reservation back: the create failed, nothing was issued.
    pub async fn release(self) {
        self.keep(0).await;
    }

    /// Keeps `made` of the reserved links (those issued) and gives the rest back.
    pub async fn keep(self, made: u64) {
        let Some((quotas, key)) = self.held else {
            return;
        };
        let unused = self.n.saturating_sub(made);
        if unused == 0 {
            return;
        }
        if let Err(error) = quotas.give_back(&key, unused).await {
            // Counted against the workspace until the day ends: the safe side of a quota.
            tracing::warn!(%error, key, unused, "quota reservation not given back");
        }
    }
}

/// A UTC day: its key suffix, what is left of it, and when its count may go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Day {
    /// `yyyymmdd`.
    name: String,
    left: Duration,
    /// A day after the day ends (unix seconds): a sidecar whose clock is behind still finds
    /// the count, and Redis forgets it without help.
    expire_at: i64,
}

impl Day {
    fn of(now: DateTime<Utc>) -> Self {
        let end = (now.date_naive() + Days::days(1))
            .and_time(NaiveTime::MIN)
            .and_utc();
        let left = (end - now).to_std().unwrap_or_default();
        Day {
            name: now.format("%Y%m%d").to_string(),
            left,
            expire_at: end.timestamp() + 86_400,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_ends_at_utc_midnight_and_its_count_outlives_it() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T23:59:30.250Z")
            .unwrap()
            .to_utc();
        let day = Day::of(now);
        assert_eq!(day.name, "20261126");
        assert_eq!(day.left, Duration::from_millis(29_750));
        let midnight = DateTime::parse_from_rfc3339("2026-11-27T00:00:00Z")
            .unwrap()
            .timestamp();
        assert_eq!(day.expire_at, midnight + 86_400);
        let next = Day::of(now + Days::seconds(30));
        assert_eq!(next.name, "20261127");
        assert_eq!(
            next.left,
            Duration::from_secs(86_400) - Duration::from_millis(250)
        );
    }

    #[test]
    fn counts_are_checked_against_their_limit_or_none() {
        assert!(check_recipients(1000, 1000).is_ok());
        assert!(check_recipients(5_000_000, 0).is_ok());
        match check_recipients(1001, 1000) {
            Err(QuotaError::Exceeded {
                quota: Quota::ComposeRecipients,
                limit: 1000,
                retry_after: None,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(check_webhooks(9, 10).is_ok());
        match check_webhooks(10, 10) {
            Err(QuotaError::Exceeded {
                quota: Quota::Webhooks,
                limit: 10,
                used: 10,
                retry_after: None,
            }) => {}
            other => panic!("{other:?}"),
        }
    }
}

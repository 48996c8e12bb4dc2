//! The Redis projection of SQL that the nginx module reads: key `sl:c:<code>`, value the link
//! record, and beside it a link's preview card ([`card`]), all defined in `shortlink_wire` (the
//! contract with the module).
//!
//! [`RecordWrite`] is the pure part (what to write for a link at a given time); [`Projection`]
//! performs it on Redis, with bounded waits so a dead Redis costs a request at most the timeout.
//! [`marker`] keeps `sl:meta:projection`, which says the projection is whole, and refills Redis
//! from SQL when it lost its data.

mod card;
mod connection;
mod doubt;
pub mod marker;
pub mod not_found;
mod primaries;
mod slots;
pub mod slugs;
mod state;

pub use card::{card_value, preview_key};
pub use slots::missing_marker_slots;
use slots::pick;
pub use slugs::{RecordWorkspace, Slugs};
pub use state::PipelineState;

use crate::primary::Primary;
/// Errors of Redis writes; defined with the connection most of them come from.
pub use crate::primary::ProjectionError;
use chrono::{DateTime, Utc};
use shortlink_model::link::rules;
use shortlink_model::{Link, LinkExtras, LinkState};
use shortlink_wire::click_count;
use shortlink_wire::click_id::{ClickId, ClickIdParam};
use shortlink_wire::keys::{link_key, ISSUED_MARK, LINK_PREFIX};
use shortlink_wire::record::password::Password;
use shortlink_wire::record::{Extras, Record};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

/// The tombstone of a revoked link: answers 410 forever, has no TTL.
pub use shortlink_wire::record::TOMBSTONE;

/// `KEYS[1]` = the mark, `ARGV[1]` = a decimal number: sets the mark to it if it is higher.
/// Compared as decimal strings (length, then text): Lua's numbers are doubles, exact only up to
/// 2^53, and sequence numbers go to 62^10.
const RAISE_MARK: &str = r"
local current = redis.call('GET', KEYS[1]) or '0'
local new = ARGV[1]
if #new > #current or (#new == #current and new > current) then
    redis.call('SET', KEYS[1], new)
end
return 0
";

/// The link record of `link` (encoded by `shortlink_wire::record`, which the module decodes):
/// version 1 text for a plain link, version 2 (binary after the line) with a lifecycle or rules.
/// A workspace other than `default` is named in the record: nginx answers the code only on that
/// workspace's hosts.
pub fn encode_record(link: &Link, workspace: RecordWorkspace) -> Vec<u8> {
    let workspace = workspace.name();
    // A revoke ends a quarantine's warning too: it is for good.
    match (link.revoked_at, link.quarantined_at) {
        (Some(_), _) => Record::revoked(workspace).encode(),
        (None, Some(_)) => Record::Quarantined(workspace).encode(),
        (None, None) => {
            let mut extras = wire_extras(&link.code, &link.extras);
            extras.workspace = workspace;
            // Only sticky splits read it: a link without rules keeps its bytes.
            extras.recipient = (link.recipient_ref.as_deref())
                .filter(|_| !extras.rules.is_empty())
                .map(|r| shortlink_wire::rules::recipient(link.code.as_bytes(), r.as_bytes()));
            encode_live(
                &link.target,
                link.redirect,
                link.flags.0,
                link.expires_at,
                &extras,
            )
        }
    }
}

/// The record of a live link from its parts: what [`encode_record`] writes, and what the API
/// measures against `MAX_RECORD_BYTES` before anything is stored.
pub fn encode_live(
    target: &str,
    status: u16,
    flags: u32,
    expires_at: Option<DateTime<Utc>>,
    extras: &Extras,
) -> Vec<u8> {
    Record::Live {
        status,
        expires_at: expires_at.map_or(0, |at| at.timestamp()),
        flags,
        target,
        extras: Some(extras),
    }
    .encode()
}

/// The wire form of a stored link's extras. Stored rules were checked when written; rules that
/// no longer convert (a hand-edited row) are logged and left out rather than failing every
/// write of the link: the link then answers its own target, as before it had rules.
pub fn wire_extras(code: &str, extras: &LinkExtras) -> Extras {
    let rules = match extras.rules.as_deref().map(rules::parse_stored) {
        None => Vec::new(),
        Some(Ok(specs)) => rules::to_wire(&specs).unwrap_or_else(|error| {
            tracing::error!(%code, %error, "stored rules do not convert; left out of the record");
            Vec::new()
        }),
        Some(Err(error)) => {
            tracing::error!(%code, %error, "stored rules are not JSON; left out of the record");
            Vec::new()
        }
    };
    let url = |url: &Option<String>| url.as_deref().map(|url| url.as_bytes().into());
    Extras {
        valid_since: extras
            .valid_since
            .map_or(0, |at| u64::try_from(at.timestamp()).unwrap_or(0)),
        not_yet_url: url(&extras.not_yet_url),
        expired_url: url(&extras.expired_url),
        rules: rules.into(),
        max_visits: extras
            .max_visits
            .map_or(0, |cap| u64::try_from(cap).unwrap_or(0)),
        password: extras.password_digest.as_deref().map(|hex| {
            Password::from_hex(hex).unwrap_or_else(|| {
                // Closed rather than open to everyone: a hand-edited row must not unlock it.
                tracing::error!(%code, "stored password digest is not hex; the link stays locked");
                Password::unmatchable()
            })
        }),
        has_card: card::has_card(extras),
        // Named by `encode_record`, which knows the link's workspace (and its ref).
        workspace: None,
        // Checked when written; a hand-edited row that is no name sends no id.
        click_id_param: extras
            .click_id_param
            .as_deref()
            .and_then(|name| ClickIdParam::parse(name.as_bytes())),
        recipient: None,
    }
}

/// What Redis must hold for a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordWrite {
    /// `SET key value`, clearing any TTL.
    Set { key: String, value: Vec<u8> },
    /// `SET key value EXAT at`: an expiring link answers 410 until `at`, then the key is gone (404).
    SetUntil {
        key: String,
        value: Vec<u8>,
        at: i64,
    },
    /// The key must not exist: a link past its grace period, or one that was never committed.
    Delete { key: String },
}

impl RecordWrite {
    /// The write that makes Redis agree with `link` at `now`, given the expired-link grace.
    pub fn for_link(
        link: &Link,
        workspace: RecordWorkspace,
        now: DateTime<Utc>,
        grace: Duration,
    ) -> Self {
        let key = link_key(&link.code);
        let value = encode_record(link, workspace);
        // A link with an expired URL keeps answering it after expiry: its record never goes.
        let expires_at = link
            .expires_at
            .filter(|_| link.extras.expired_url.is_none());
        match (link.state(now), expires_at) {
            (LinkState::Revoked, _) | (_, None) => RecordWrite::Set { key, value },
            (LinkState::Live | LinkState::Expired, Some(expires_at)) => {
                let grace = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
                let at = expires_at.timestamp().saturating_add(grace);
                if at <= now.timestamp() {
                    RecordWrite::Delete { key }
                } else {
                    RecordWrite::SetUntil { key, value, at }
                }
            }
        }
    }

    /// The write that puts back what Redis held before a change that was not committed.
    pub fn restore(
        code: &str,
        previous: Option<&Link>,
        workspace: RecordWorkspace,
        now: DateTime<Utc>,
        grace: Duration,
    ) -> Self {
        match previous {
            Some(link) => Self::for_link(link, workspace, now, grace),
            None => RecordWrite::Delete {
                key: link_key(code),
            },
        }
    }

    /// The key written or deleted.
    pub fn key(&self) -> &str {
        match self {
            RecordWrite::Set { key, .. }
            | RecordWrite::SetUntil { key, .. }
            | RecordWrite::Delete { key } => key,
        }
    }

    fn add_to(&self, pipe: &mut redis::Pipeline) {
        match self {
            RecordWrite::Set { key, value } => pipe.cmd("SET").arg(key).arg(value).ignore(),
            RecordWrite::SetUntil { key, value, at } => pipe
                .cmd("SET")
                .arg(key)
                .arg(value)
                .arg("EXAT")
                .arg(*at)
                .ignore(),
            RecordWrite::Delete { key } => pipe.cmd("DEL").arg(key).ignore(),
        };
    }
}

/// Every write of `writes`; whether there was any.
fn add_writes(pipe: &mut redis::Pipeline, writes: &[RecordWrite]) -> bool {
    for write in writes {
        write.add_to(pipe);
    }
    !writes.is_empty()
}

/// `KEYS[1]` deleted if it holds `ARGV[1]`.
const DELETE_IF_VALUE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
";

/// `EVAL` of [`DELETE_IF_VALUE`] for `key` and `value`, its reply ignored.
fn delete_if_value(pipe: &mut redis::Pipeline, (key, value): (&str, &[u8])) {
    pipe.cmd("EVAL")
        .arg(DELETE_IF_VALUE)
        .arg(1)
        .arg(key)
        .arg(value)
        .ignore();
}

/// A batch's allowance: the timeout per thousand writes begun.
fn chunk_allowance(timeout: Duration, writes: usize) -> Duration {
    timeout * u32::try_from(writes / 1000 + 1).unwrap_or(u32::MAX)
}

/// One `SET ... NX` per record write (deletes skipped); whether there was any. In a
/// transaction, the reply is one `OK` or nil per `SET`.
fn add_creates(pipe: &mut redis::Pipeline, writes: &[RecordWrite]) -> bool {
    let mut any = false;
    for write in writes {
        any |= set_if_absent(pipe, write);
    }
    any
}

/// Adds `SET ... NX` (with `EXAT` for an expiring link) for a write that sets a record; returns
/// whether it added one (a delete adds nothing).
pub(crate) fn set_if_absent(pipe: &mut redis::Pipeline, write: &RecordWrite) -> bool {
    match write {
        RecordWrite::Set { key, value } => pipe.cmd("SET").arg(key).arg(value).arg("NX"),
        RecordWrite::SetUntil { key, value, at } => pipe
            .cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("EXAT")
            .arg(*at),
        RecordWrite::Delete { .. } => return false,
    };
    true
}

/// The value a write sets (`None` for a delete).
pub fn written_value(write: &RecordWrite) -> Option<&[u8]> {
    match write {
        RecordWrite::Set { value, .. } | RecordWrite::SetUntil { value, .. } => Some(value),
        RecordWrite::Delete { .. } => None,
    }
}

/// A Redis connection that is made lazily and re-made after failures, so the sidecar starts and
/// keeps serving reads while Redis is down; writes then fail within `timeout`. The connection
/// itself (discovery, retries, `WAIT`) is in [`connection`].
pub struct Projection {
    primary: Primary,
    timeout: Duration,
    /// `--redis-wait-replicas`: the replicas that must hold a write before it is acknowledged.
    wait: Option<Wait>,
    /// The connection, made or being made (see `connection::Projection::connection`).
    connection: RwLock<connection::Slot>,
    connections_made: AtomicU64,
    /// Records whose write-through failed, with Sentinel or `WAIT` (see [`doubt`]).
    in_doubt: std::sync::Mutex<std::collections::HashMap<String, Option<Vec<u8>>>>,
    /// On a cluster, the slot map and a connection per primary for batch writes ([`primaries`]).
    primaries: primaries::Primaries,
    /// When a repair last failed (ms since `epoch`): repairs pause for a while after, so a Redis
    /// outage under fallback load does not pile up background connection attempts.
    repair_failed_at: AtomicU64,
    epoch: Instant,
}

/// How many replicas must acknowledge a write-through (`WAIT numreplicas timeout`) before the
/// API acknowledges it: Redis replicates asynchronously, and a failover promotes a replica, so
/// an acknowledged write that no replica had would be lost (docs/DEPLOYMENT.md, "Sentinel").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub replicas: u32,
    pub timeout: Duration,
}

impl Wait {
    /// `None` (no `WAIT`) for 0 replicas: the one-box default.
    pub fn new(replicas: u32, timeout: Duration) -> Option<Self> {
        (replicas > 0).then_some(Self { replicas, timeout })
    }
}

/// How long repairs pause after one failed.
const REPAIR_PAUSE: Duration = Duration::from_secs(1);

impl std::fmt::Debug for Projection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projection")
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Projection {
    /// The one Redis at `url`, no `WAIT`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, ProjectionError> {
        Ok(Self::with_primary(Primary::fixed(url)?, timeout, None))
    }

    pub fn with_primary(primary: Primary, timeout: Duration, wait: Option<Wait>) -> Self {
        Self {
            primary,
            timeout,
            wait,
            connection: RwLock::new(connection::Slot::Empty),
            connections_made: AtomicU64::new(0),
            in_doubt: std::sync::Mutex::default(),
            primaries: primaries::Primaries::default(),
            repair_failed_at: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    pub fn primary(&self) -> &Primary {
        &self.primary
    }

    /// Performs the writes in one round trip, atomically (`MULTI`/`EXEC`; on a cluster, one
    /// transaction per hash slot: see [`slots`]).
    pub async fn apply(&self, writes: &[RecordWrite]) -> Result<(), ProjectionError> {
        if writes.is_empty() {
            return Ok(());
        }
        let result = self
            .per_slot(writes.iter().map(RecordWrite::key), |group| {
                self.slot_transaction(writes, group, self.timeout, add_writes)
            })
            .await
            .map(drop);
        self.doubt_if_failed(writes, result)
    }

    /// Performs a batch chunk's writes in one round trip, atomically (`MULTI`/`EXEC`; on a
    /// cluster, one transaction per hash slot in one pipeline per primary: see [`primaries`]),
    /// allowing the timeout per thousand writes.
    pub async fn apply_chunk(&self, writes: &[RecordWrite]) -> Result<(), ProjectionError> {
        if writes.is_empty() {
            return Ok(());
        }
        let allowance = chunk_allowance(self.timeout, writes.len());
        let add = |i: usize, pipe: &mut redis::Pipeline| {
            writes[i].add_to(pipe);
            true
        };
        let result = self
            .per_primary(
                writes.iter().map(RecordWrite::key),
                allowance,
                true,
                add,
                |group| self.slot_transaction(writes, group, allowance, add_writes),
            )
            .await
            .map(drop);
        self.doubt_if_failed(writes, result)
    }

    /// One slot's transaction (`group`: the indices of its writes), its commands added by `add`
    /// ([`add_writes`] or [`add_creates`]); nothing is sent when `add` adds none.
    async fn slot_transaction(
        &self,
        writes: &[RecordWrite],
        group: Vec<usize>,
        allowance: Duration,
        add: fn(&mut redis::Pipeline, &[RecordWrite]) -> bool,
    ) -> Result<Vec<redis::Value>, ProjectionError> {
        let part = pick(writes, &group);
        match self.transaction(|pipe| add(pipe, &part)) {
            Some(pipe) => self.run_transaction(&pipe, allowance).await,
            None => Ok(Vec::new()),
        }
    }

    /// Writes a new link's record only where the key is missing (`SET NX`): a create never
    /// overwrites a record. `Ok(None)`: written (or nothing to write). `Ok(Some(value))`: Redis
    /// already holds the key, with this value, and nothing was written.
    pub async fn create(&self, write: &RecordWrite) -> Result<Option<Vec<u8>>, ProjectionError> {
        let writes = std::slice::from_ref(write);
        let Some(pipe) = self.transaction(|pipe| add_creates(pipe, writes)) else {
            return Ok(None);
        };
        let set = self.run_transaction(&pipe, self.timeout).await;
        let set = self.doubt_if_failed(writes, set)?;
        if set.first().is_some_and(|set| *set != redis::Value::Nil) {
            return Ok(None);
        }
        Ok(Some(self.current_values(&[write.key()]).await?.remove(0)))
    }

    /// [`Self::create`] for a batch chunk, atomically (`MULTI`/`EXEC` per hash slot on a
    /// cluster, in one pipeline per primary; the timeout per thousand writes): returns the keys
    /// Redis already held, with their values; the others were written.
    pub async fn create_chunk(
        &self,
        writes: &[RecordWrite],
    ) -> Result<Vec<(String, Vec<u8>)>, ProjectionError> {
        let allowance = chunk_allowance(self.timeout, writes.len());
        let add = |i: usize, pipe: &mut redis::Pipeline| set_if_absent(pipe, &writes[i]);
        let set = self
            .per_primary(
                writes.iter().map(RecordWrite::key),
                allowance,
                true,
                add,
                |group| self.slot_transaction(writes, group, allowance, add_creates),
            )
            .await;
        let set = self.doubt_if_failed(writes, set)?;
        // `OK` or nil per `SET` (deletes send none), read without allocating a string per item.
        let mut refused: Vec<&str> = Vec::new();
        for (group, set) in &set {
            refused.extend(
                group
                    .iter()
                    .map(|&i| &writes[i])
                    .filter(|write| !matches!(write, RecordWrite::Delete { .. }))
                    .zip(set)
                    .filter(|(_, set)| **set == redis::Value::Nil)
                    .map(|(write, _)| write.key()),
            );
        }
        if refused.is_empty() {
            return Ok(Vec::new());
        }
        let values = self.current_values(&refused).await?;
        Ok(refused.into_iter().map(str::to_owned).zip(values).collect())
    }

    /// The values of `keys` (empty for a key gone meanwhile), in their order.
    async fn current_values(&self, keys: &[&str]) -> Result<Vec<Vec<u8>>, ProjectionError> {
        let parts = self
            .per_slot(keys.iter().copied(), |group| async move {
                let mut pipe = redis::pipe();
                pipe.cmd("MGET").arg(&*pick(keys, &group));
                let (values,): (Vec<Option<Vec<u8>>>,) = self.run(&pipe, self.timeout).await?;
                Ok(values)
            })
            .await?;
        let mut values = vec![Vec::new(); keys.len()];
        for (group, part) in parts {
            for (i, value) in group.into_iter().zip(part) {
                values[i] = value.unwrap_or_default();
            }
        }
        Ok(values)
    }

    /// Deletes each key only if it still holds the value given: what a failed create wrote, and
    /// never a record another write put there since.
    pub async fn delete_if_unchanged(
        &self,
        written: &[(&str, &[u8])],
    ) -> Result<(), ProjectionError> {
        if written.is_empty() {
            return Ok(());
        }
        let allowance = chunk_allowance(self.timeout, written.len());
        let add = |i: usize, pipe: &mut redis::Pipeline| {
            delete_if_value(pipe, written[i]);
            true
        };
        // No `WAIT`: an undo vouches for nothing, and a delete a replica missed leaves an
        // orphan (`resync`), never a link that SQL refused reported as created.
        self.per_primary(
            written.iter().map(|(key, _)| *key),
            allowance,
            false,
            add,
            |group| async move {
                let mut pipe = redis::pipe();
                for &i in &group {
                    delete_if_value(&mut pipe, written[i]);
                }
                self.run::<()>(&pipe, allowance).await.map(|()| Vec::new())
            },
        )
        .await
        .map(drop)
    }

    /// Performs a batch of writes in one pipelined round trip, not atomically (for resync).
    pub async fn apply_pipelined(&self, writes: &[RecordWrite]) -> Result<(), ProjectionError> {
        if writes.is_empty() {
            return Ok(());
        }
        // A long pipeline gets a proportionally longer wait.
        let allowance = chunk_allowance(self.timeout, writes.len());
        self.per_slot(writes.iter().map(RecordWrite::key), |group| async move {
            let mut pipe = redis::pipe();
            add_writes(&mut pipe, &pick(writes, &group));
            self.run::<()>(&pipe, allowance).await
        })
        .await
        .map(drop)
    }

    /// Writes the record only if the key is missing (`SET ... NX`), as the fallback resolver does:
    /// it read SQL outside any transaction, so it may hold an older version than a concurrent
    /// update, and must never overwrite what that update wrote. A `Delete` is skipped for the same
    /// reason.
    /// Skipped (`Ok`) for a short while after a failed repair.
    pub async fn repair(&self, write: &RecordWrite) -> Result<(), ProjectionError> {
        let failed_at = self.repair_failed_at.load(Ordering::Relaxed);
        let now = self.millis();
        if failed_at != 0 && now.saturating_sub(failed_at) < REPAIR_PAUSE.as_millis() as u64 {
            return Ok(());
        }
        let result = self.repair_now(write).await;
        if result.is_err() {
            self.repair_failed_at
                .store(self.millis().max(1), Ordering::Relaxed);
        }
        result
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn repair_now(&self, write: &RecordWrite) -> Result<(), ProjectionError> {
        let mut pipe = redis::pipe();
        if !set_if_absent(&mut pipe, write) {
            return Ok(());
        }
        self.run::<(Option<String>,)>(&pipe, self.timeout)
            .await
            .map(drop)
    }

    /// One `SCAN` step over link keys (`MATCH sl:c:*`): the next cursor (0 when done) and the
    /// keys found, about `count` slots' worth (possibly none; a key may come twice).
    pub async fn scan_link_keys(
        &self,
        cursor: u64,
        count: u32,
    ) -> Result<(u64, Vec<String>), ProjectionError> {
        if self.primary.is_cluster() {
            return self.scan_cluster(cursor, count).await;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{LINK_PREFIX}*"))
            .arg("COUNT")
            .arg(count);
        let ((next, keys),): ((u64, Vec<String>),) = self.run(&pipe, self.timeout).await?;
        Ok((next, keys))
    }

    /// Deletes `keys` in one round trip; returns how many existed.
    pub async fn delete_keys(&self, keys: &[String]) -> Result<u64, ProjectionError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let parts = self
            .per_slot(keys.iter().map(String::as_str), |group| async move {
                let mut pipe = redis::pipe();
                pipe.cmd("DEL").arg(&*pick(keys, &group));
                let (deleted,): (u64,) = self.run(&pipe, self.timeout).await?;
                Ok(deleted)
            })
            .await?;
        Ok(parts.into_iter().map(|(_, deleted)| deleted).sum())
    }

    /// How many keys Redis holds (all of them: a progress estimate for the orphan scan).
    pub async fn key_count(&self) -> Result<u64, ProjectionError> {
        if self.primary.is_cluster() {
            return self.cluster_key_count().await;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("DBSIZE");
        let (count,): (u64,) = self.run(&pipe, self.timeout).await?;
        Ok(count)
    }

    /// The high-water mark of leased sequence numbers ([`ISSUED_MARK`]); 0 if none.
    pub async fn issued_mark(&self) -> Result<u64, ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(ISSUED_MARK);
        let (mark,): (Option<u64>,) = self.run(&pipe, self.timeout).await?;
        Ok(mark.unwrap_or(0))
    }

    /// Raises the high-water mark to `next` unless it is higher already.
    pub async fn raise_issued_mark(&self, next: u64) -> Result<(), ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(RAISE_MARK)
            .arg(1)
            .arg(ISSUED_MARK)
            .arg(next.to_string())
            .ignore();
        self.run::<()>(&pipe, self.timeout).await
    }

    /// One click on a link with `max_visits`, counted in `sl:n:<code>` as the module counts it:
    /// `EVAL click_count::COUNT_SCRIPT` with the click's `token`, so the click is counted once
    /// however many tries reach Redis (the module's, this one, its retry after a dropped
    /// connection). The reply is the click's number.
    pub async fn count_click(&self, code: &str, token: ClickId) -> Result<u64, ProjectionError> {
        use shortlink_wire::keys::{click_token_key, visit_count_key};
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(click_count::COUNT_SCRIPT)
            .arg(2)
            .arg(visit_count_key(code))
            .arg(click_token_key(code, token.as_str()))
            .arg(click_count::TOKEN_TTL_ARG);
        let (visits,): (u64,) = self.run(&pipe, self.timeout).await?;
        Ok(visits)
    }

    /// Deletes the click counter of `code` (`sl:n:<code>`): the link is revoked.
    pub async fn delete_visit_count(&self, code: &str) -> Result<(), ProjectionError> {
        self.delete_keys(&[shortlink_wire::keys::visit_count_key(code)])
            .await
            .map(drop)
    }

    /// The clicks counted on `code` so far (`GET sl:n:<code>`; 0 for none).
    pub async fn visit_count(&self, code: &str) -> Result<u64, ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(shortlink_wire::keys::visit_count_key(code));
        let (visits,): (Option<u64>,) = self.run(&pipe, self.timeout).await?;
        Ok(visits.unwrap_or(0))
    }

    pub async fn ping(&self) -> Result<(), ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.cmd("PING");
        self.run::<(String,)>(&pipe, self.timeout).await.map(drop)
    }
}

#[cfg(test)]
mod tests;

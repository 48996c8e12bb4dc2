//! The receipts' counts of every sidecar, judged together (issue 68). Behind N sidecars each
//! takes about 1/N of a domain's receipts; judged alone, a block would need N times the
//! receipts to be seen. So each sidecar adds what it counted since its last judgement to
//! per-second hashes in the Redis the sidecars share (`wire::keys::receipt_counts_key`: one
//! `HINCRBY` per series and count, the keys expiring once out of the window), and reads the
//! window's seconds back in the same pipeline: the rule ([`crate::receipts`]) then judges the
//! installation's receipts. A drain found by several sidecars at once is still one transition
//! and one audit row (`drain::apply`).
//!
//! Why Redis and not a read of the recent receipts from SQL: the ingest's limit is the
//! database (docs/DELIVERIES.md, "Receipts ingest"), and a judgement every second over the
//! window's receipts would read up to a minute of them (a million rows at 20,000/s) from it each
//! time, on every sidecar; the counts here cost a pipeline a second per sidecar whatever the
//! receipt rate (one field per series and count), and nothing on the ingest's path. SQL also
//! lacks the domain of a receipt that named no short URL (the pick of the issuing list, made in
//! memory).
//!
//! Each link counts once per window and series, installation-wide (`receipt_links`): the
//! exchange first claims the links it counted (`SET NX` on `wire::keys::receipt_link_key`,
//! expiring with the window, one pipeline), then adds only those it won. Two round trips a
//! second per sidecar, whatever the receipt rate; on the ingest's path, a hash and an insert.
//!
//! Redis unreachable: the sidecar judges the receipts it took itself, as before, and what it
//! counted meanwhile is not added later (a pipeline cut in the middle may have added part of it;
//! counted twice, a healthy domain could look blocked; left out, a block is found later).

use super::receipts::{Counts, ReceiptRule, ReceiptWindows, Series};
use redis::FromRedisValue;
use shortlink_core::primary::{ConnectOptions, Primary, ProjectionError, RedisConnection};
use shortlink_wire::keys::{
    parse_receipt_count_field, receipt_count_field, receipt_counts_key, receipt_link_key,
};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// The keys outlive the window by this much, so that a sidecar a little behind still reads them.
const KEPT_PAST_WINDOW: u64 = 60;

/// Links counted between two exchanges, at most: a second's receipts at several times the
/// ingest's rate. Past it, new ones are not counted (as series past `MAX_SERIES`).
pub const MAX_PENDING: usize = 200_000;

/// A link's first final receipt this sidecar counted, not yet claimed and added to the shared
/// counts.
#[derive(Debug, Clone, PartialEq)]
pub struct CountedLink {
    pub series: Series,
    pub code: String,
    /// The Unix second it was counted in.
    pub at: u64,
    pub failed: bool,
    pub error_code: Option<String>,
}

/// The links counted since the last exchange.
pub type Pending = Vec<CountedLink>;

/// Adds one link's final receipt to `pending`, within [`MAX_PENDING`].
pub fn count(pending: &mut Pending, link: CountedLink) {
    if pending.len() < MAX_PENDING {
        pending.push(link);
    }
}

/// The counts of the links `won` says this sidecar claimed, by series and second.
fn counts_of(pending: &Pending, won: &[bool]) -> HashMap<(Series, u64), Counts> {
    let mut counts: HashMap<(Series, u64), Counts> = HashMap::new();
    for (link, _) in pending.iter().zip(won).filter(|(_, won)| **won) {
        let counts = counts.entry((link.series.clone(), link.at)).or_default();
        counts.finals += 1;
        if link.failed {
            counts.failures += 1;
            let code = link.error_code.clone().unwrap_or_default();
            *counts.errors.entry(code).or_default() += 1;
        }
    }
    counts
}

/// The job's way to the shared counts: one connection, made again after a failure.
pub struct SharedCounts {
    primary: Primary,
    timeout: Duration,
    connection: Option<RedisConnection>,
    /// Whether the last exchange failed.
    failing: bool,
}

impl SharedCounts {
    pub fn new(primary: Primary, timeout: Duration) -> Self {
        Self {
            primary,
            timeout,
            connection: None,
            failing: false,
        }
    }

    /// An exchange failed: whether the one before had not (an outage starts).
    pub fn failed(&mut self) -> bool {
        !std::mem::replace(&mut self.failing, true)
    }

    /// An exchange succeeded: whether the one before had failed (an outage ends).
    pub fn recovered(&mut self) -> bool {
        std::mem::replace(&mut self.failing, false)
    }

    /// Adds `pending` to the shared counts and reads back every sidecar's counts of the
    /// window ending at `now` (Unix seconds).
    pub async fn exchange(
        &mut self,
        pending: &Pending,
        rule: ReceiptRule,
        now: u64,
    ) -> Result<ReceiptWindows, ProjectionError> {
        let window = rule.window.as_secs().max(1);
        let won = match pending.is_empty() {
            true => Vec::new(),
            false => self.claim(pending, window).await?,
        };
        let mut pipe = redis::pipe();
        let mut seconds = BTreeSet::new();
        for ((series, second), counts) in &counts_of(pending, &won) {
            let key = receipt_counts_key(*second);
            let field = |count: &str| {
                receipt_count_field(&series.workspace, &series.carrier, &series.domain, count)
            };
            pipe.hincr(&key, field("finals"), counts.finals).ignore();
            if counts.failures > 0 {
                pipe.hincr(&key, field("failures"), counts.failures)
                    .ignore();
            }
            for (code, n) in &counts.errors {
                pipe.hincr(&key, field(&format!("error:{code}")), *n)
                    .ignore();
            }
            seconds.insert(*second);
        }
        for second in seconds {
            let ttl = i64::try_from(window + KEPT_PAST_WINDOW).unwrap_or(i64::MAX);
            pipe.expire(receipt_counts_key(second), ttl).ignore();
        }
        let first = now.saturating_sub(window) + 1;
        for second in first..=now {
            pipe.hgetall(receipt_counts_key(second));
        }
        let read: Vec<HashMap<String, u64>> = self.query(&pipe).await?;
        let mut windows = ReceiptWindows::new(rule);
        for (second, hash) in (first..=now).zip(read) {
            let mut by_series: HashMap<Series, Counts> = HashMap::new();
            for (field, n) in hash {
                let Some((workspace, carrier, domain, count)) = parse_receipt_count_field(&field)
                else {
                    continue;
                };
                let series = Series {
                    workspace: workspace.to_owned(),
                    carrier: carrier.to_owned(),
                    domain: domain.to_owned(),
                };
                let counts = by_series.entry(series).or_default();
                match count {
                    "finals" => counts.finals += n,
                    "failures" => counts.failures += n,
                    other => match other.strip_prefix("error:") {
                        Some(code) => *counts.errors.entry(code.to_owned()).or_default() += n,
                        None => continue,
                    },
                }
            }
            for (series, counts) in by_series {
                windows.add(&series, second, &counts);
            }
        }
        Ok(windows)
    }

    /// Claims each pending link for the window (`SET NX`): whether this sidecar is the first to
    /// count it, in order.
    async fn claim(
        &mut self,
        pending: &Pending,
        window: u64,
    ) -> Result<Vec<bool>, ProjectionError> {
        let mut pipe = redis::pipe();
        for link in pending {
            let Series {
                workspace,
                carrier,
                domain,
            } = &link.series;
            let key = receipt_link_key(workspace, carrier, domain, &link.code);
            pipe.cmd("SET")
                .arg(key)
                .arg(1)
                .arg("NX")
                .arg("EX")
                .arg(window);
        }
        let claimed: Vec<Option<String>> = self.query(&pipe).await?;
        Ok(claimed.iter().map(Option::is_some).collect())
    }

    /// Runs `pipe` on the connection (made again after a failure).
    async fn query<T: FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<T, ProjectionError> {
        let answer = self.run(pipe).await;
        if answer.is_err() {
            self.connection = None;
        }
        answer
    }

    async fn run<T: FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<T, ProjectionError> {
        let running = async {
            let connection = match &mut self.connection {
                Some(connection) => connection,
                None => {
                    let options = ConnectOptions {
                        connection_timeout: self.timeout,
                        response_timeout: self.timeout,
                        manager: false,
                    };
                    self.connection.insert(self.primary.connect(options).await?)
                }
            };
            Ok::<_, ProjectionError>(pipe.query_async(connection).await?)
        };
        // Connecting and the pipeline, within twice the Redis timeout at most.
        tokio::time::timeout(self.timeout * 2, running)
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout * 2))?
    }
}

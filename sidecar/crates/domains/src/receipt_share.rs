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
//! Redis unreachable: the sidecar judges the receipts it took itself, as before, and what it
//! counted meanwhile is not added later (a pipeline cut in the middle may have added part of it;
//! counted twice, a healthy domain could look blocked; left out, a block is found later).

use super::receipts::{Counts, ReceiptRule, ReceiptWindows, Series};
use shortlink_core::primary::{ConnectOptions, Primary, ProjectionError, RedisConnection};
use shortlink_wire::keys::{parse_receipt_count_field, receipt_count_field, receipt_counts_key};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// The keys outlive the window by this much, so that a sidecar a little behind still reads them.
const KEPT_PAST_WINDOW: u64 = 60;

/// The counts not yet added to the shared ones, by series and second.
pub type Pending = HashMap<(Series, u64), Counts>;

/// Adds one final receipt to `pending` (bounded as the windows are: past `max` entries, new
/// ones are not counted).
pub fn count(pending: &mut Pending, series: &Series, at: u64, failed: bool, code: Option<&str>) {
    let max = super::receipts::MAX_SERIES;
    let key = (series.clone(), at);
    if pending.len() >= max && !pending.contains_key(&key) {
        return;
    }
    let counts = pending.entry(key).or_default();
    counts.finals += 1;
    if failed {
        counts.failures += 1;
        *(counts.errors)
            .entry(code.unwrap_or_default().to_owned())
            .or_default() += 1;
    }
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
        let mut pipe = redis::pipe();
        let mut seconds = BTreeSet::new();
        for ((series, second), counts) in pending {
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
        let read: Vec<HashMap<String, u64>> = match self.query(&pipe).await {
            Ok(read) => read,
            Err(error) => {
                self.connection = None;
                return Err(error);
            }
        };
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

    async fn query(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<HashMap<String, u64>>, ProjectionError> {
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

//! The Redis side of the consumer: the connection, the group, reads (`XREADGROUP`, `XAUTOCLAIM`)
//! and acknowledgements.

use super::{Consumer, ConsumerCounters, ConsumerError, Phase, RawEntry, GROUP};
use redis::Value;
use shortlink_core::primary::{ConnectOptions, RedisConnection};
use std::time::{Duration, Instant};

impl Consumer {
    async fn connection(&mut self) -> Result<RedisConnection, ConsumerError> {
        if let Some(connection) = &self.connection {
            return Ok(connection.clone());
        }
        // With Sentinel, the primary as it is now: every failed command drops the connection
        // (`query`), so after a failover the next one goes to the new primary; a cluster's
        // connection made again learns the slot map afresh.
        let options = ConnectOptions {
            connection_timeout: Duration::from_secs(5),
            response_timeout: self.settings.block + Duration::from_secs(10),
            manager: false,
        };
        let connection = self.primary.connect(options).await?;
        self.connection = Some(connection.clone());
        Ok(connection)
    }

    /// Runs a command; a failure drops the connection so the next call reconnects.
    pub(super) async fn query(&mut self, cmd: &redis::Cmd) -> Result<Value, ConsumerError> {
        let mut connection = self.connection().await?;
        match cmd.query_async::<Value>(&mut connection).await {
            Ok(value) => Ok(value),
            Err(error) => {
                if !matches!(error.kind(), redis::ErrorKind::ExtensionError) {
                    self.connection = None;
                }
                Err(error.into())
            }
        }
    }

    /// Creates the group (and the stream) if missing. The group starts at the beginning of the
    /// stream, so events queued before the first consumer ever ran are counted too.
    pub async fn ensure_group(&mut self) -> Result<(), ConsumerError> {
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(&self.streams[self.at].key)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        match self.query(&cmd).await {
            Ok(_) => {}
            Err(ConsumerError::Redis(e)) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(e),
        }
        self.streams[self.at].group_ready = true;
        Ok(())
    }

    /// The next batch: this consumer's own pending entries first, then entries idle too long with
    /// other consumers, then new entries (waiting up to `block` for them).
    /// On a cluster, from one stream after the other: each read is of the next stream.
    pub async fn read_batch(&mut self) -> Result<Vec<RawEntry>, ConsumerError> {
        self.read_from = self.at;
        let result = self.read_current().await;
        match &result {
            Ok(entries) if entries.is_empty() => self.idle += 1,
            _ => self.idle = 0,
        }
        self.at = (self.at + 1) % self.streams.len();
        result
    }

    async fn read_current(&mut self) -> Result<Vec<RawEntry>, ConsumerError> {
        if !self.streams[self.at].group_ready {
            self.ensure_group().await?;
        }
        if let Phase::OwnPending(after) = &self.streams[self.at].phase {
            let after = after.clone();
            let entries = self.xreadgroup(&after, None).await?;
            match entries.last() {
                Some(last) => {
                    self.streams[self.at].phase = Phase::OwnPending(last.id.clone());
                    return Ok(entries);
                }
                None => self.streams[self.at].phase = Phase::New,
            }
        }
        let claim_every = (self.settings.claim_after / 2).max(Duration::from_millis(100));
        if self.streams[self.at]
            .last_claim
            .is_none_or(|at| at.elapsed() >= claim_every)
        {
            let claimed = self.claim().await?;
            if !claimed.is_empty() {
                return Ok(claimed);
            }
        }
        // Several streams: the wait is shared among them, so a round takes about `block`.
        let streams = u32::try_from(self.streams.len()).unwrap_or(u32::MAX);
        let block = (self.settings.block / streams).max(Duration::from_millis(10));
        self.xreadgroup(">", Some(block)).await
    }

    async fn xreadgroup(
        &mut self,
        after: &str,
        block: Option<Duration>,
    ) -> Result<Vec<RawEntry>, ConsumerError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(&self.settings.name)
            .arg("COUNT")
            .arg(self.read_count());
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS")
            .arg(&self.streams[self.at].key)
            .arg(after);
        let reply = match self.query(&cmd).await {
            Err(ConsumerError::Redis(e)) if e.code() == Some("NOGROUP") => {
                // The stream or group was deleted behind our back: recreate and start over.
                self.streams[self.at].group_ready = false;
                return Err(ConsumerError::Redis(e));
            }
            other => other?,
        };
        let entries = match reply {
            Value::Nil => Vec::new(),
            Value::Array(streams) => {
                let mut out = Vec::new();
                for stream in streams {
                    let Value::Array(parts) = stream else {
                        return Err(ConsumerError::Reply("XREADGROUP"));
                    };
                    if let Some(entries) = parts.into_iter().nth(1) {
                        out.extend(parse_entries(entries)?);
                    }
                }
                out
            }
            Value::Map(streams) => {
                let mut out = Vec::new();
                for (_, entries) in streams {
                    out.extend(parse_entries(entries)?);
                }
                out
            }
            _ => return Err(ConsumerError::Reply("XREADGROUP")),
        };
        ConsumerCounters::add(&self.counters.read, entries.len() as u64);
        Ok(entries)
    }

    /// One `XAUTOCLAIM` step over the group's pending entries idle longer than `claim_after`.
    async fn claim(&mut self) -> Result<Vec<RawEntry>, ConsumerError> {
        let mut cmd = redis::cmd("XAUTOCLAIM");
        let stream = &self.streams[self.at];
        cmd.arg(&stream.key)
            .arg(GROUP)
            .arg(&self.settings.name)
            .arg(self.settings.claim_after.as_millis() as u64)
            .arg(&stream.claim_cursor)
            .arg("COUNT")
            .arg(self.read_count());
        let reply = self.query(&cmd).await?;
        let Value::Array(parts) = reply else {
            return Err(ConsumerError::Reply("XAUTOCLAIM"));
        };
        let mut parts = parts.into_iter();
        let cursor = parts.next().and_then(|v| text(&v));
        let entries = match parts.next() {
            Some(entries) => parse_entries(entries)?,
            None => Vec::new(),
        };
        match cursor {
            // A full turn over the pending list: rest until the next claim interval.
            Some(cursor) if cursor == "0-0" => {
                self.streams[self.at].claim_cursor = cursor;
                self.streams[self.at].last_claim = Some(Instant::now());
            }
            Some(cursor) => self.streams[self.at].claim_cursor = cursor,
            None => return Err(ConsumerError::Reply("XAUTOCLAIM")),
        }
        if !entries.is_empty() {
            tracing::info!(
                consumer = %self.settings.name,
                entries = entries.len(),
                "claimed visit events left pending by another consumer"
            );
        }
        ConsumerCounters::add(&self.counters.read, entries.len() as u64);
        Ok(entries)
    }

    /// Acknowledges entries of the stream the last read came from.
    pub async fn ack(&mut self, ids: &[String]) -> Result<(), ConsumerError> {
        self.ack_on(self.read_from, ids).await
    }

    pub(super) async fn ack_on(
        &mut self,
        stream: usize,
        ids: &[String],
    ) -> Result<(), ConsumerError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("XACK");
        cmd.arg(&self.streams[stream].key).arg(GROUP).arg(ids);
        self.query(&cmd).await?;
        ConsumerCounters::add(&self.counters.acked, ids.len() as u64);
        Ok(())
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// `[[id, [field, value, ...] | nil], ...]` → entries.
fn parse_entries(value: Value) -> Result<Vec<RawEntry>, ConsumerError> {
    let Value::Array(entries) = value else {
        return Err(ConsumerError::Reply("stream entries"));
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(parts) = entry else {
            return Err(ConsumerError::Reply("stream entry"));
        };
        let mut parts = parts.into_iter();
        let id = parts
            .next()
            .as_ref()
            .and_then(text)
            .ok_or(ConsumerError::Reply("stream entry id"))?;
        let fields = match parts.next() {
            Some(Value::Array(flat)) => {
                let mut pairs = Vec::with_capacity(flat.len() / 2);
                let mut flat = flat.into_iter();
                while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                    if let (Some(k), Some(v)) = (bytes(k), bytes(v)) {
                        pairs.push((k, v));
                    }
                }
                Some(pairs)
            }
            Some(Value::Map(map)) => Some(
                map.into_iter()
                    .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
                    .collect(),
            ),
            _ => None,
        };
        out.push(RawEntry { id, fields });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::write::backoff;
    use super::*;

    #[test]
    fn parses_entries_including_trimmed_ones() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("c"), bulk("abc"), bulk("t"), bulk("5")]),
            ]),
            Value::Array(vec![bulk("2-0"), Value::Nil]),
        ]);
        let entries = parse_entries(reply).unwrap();
        assert_eq!(entries[0].id, "1-0");
        assert_eq!(
            entries[0].fields.as_deref(),
            Some(
                &[
                    (b"c".to_vec(), b"abc".to_vec()),
                    (b"t".to_vec(), b"5".to_vec())
                ][..]
            )
        );
        assert_eq!(entries[1].fields, None);
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(30), Duration::from_secs(5));
    }
}

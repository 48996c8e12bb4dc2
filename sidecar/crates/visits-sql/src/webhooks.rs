//! The feed's and the webhooks' tables in SQL: [`WebhookStore`] for every backend's visit
//! store (same statements everywhere; times are Unix milliseconds in integer columns).

use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value, IN_LIST};
use shortlink_store::{LinkEvent, LinkEventKind, LinkEventReason, StorageError, StorageResult};
use shortlink_webhooks::cursor::Cursor;
use shortlink_webhooks::event::StoredLinkEvent;
use shortlink_webhooks::link_visits::VisitKey;
use shortlink_webhooks::store::{Failure, FeedBatch, FeedRow, Lease, Progress, WebhookStore};
use shortlink_webhooks::subscription::{Subscription, SubscriptionSpec};
use shortlink_wire::agent::Audience;
use sqlx::{Database, Pool};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

const SUBSCRIPTION_COLUMNS: &str =
    "id, workspace_id, name, url, secret, campaigns, tags, include_bots, \
     batch_size, batch_ms, link_events, created_ms, revision, cursor_seq, cursor_index, lease_owner, \
     lease_until_ms, delivered, failing_since_ms, attempts, last_error";

/// The columns of `visits` a feed row is made of (what a day's partition is read for by name).
const FEED_COLUMNS: &str = "event_id, code, visited_at, status, ip, browser, browser_version, \
     os, os_version, device, audience, reasons, agent, isp, country, region, city, referrer_host, \
     short_domain, language, rule";

/// A feed row's select list over `visits` (a table or a day's partition) as `v` and its link as
/// `l`, up to its `FROM` clause: one text for the feed's reads by id and the console's by link.
fn feed_select<V: VisitDialect>(visits: &str) -> String {
    // The link's tags as text (PostgreSQL keeps jsonb); the status as a 64-bit integer.
    let tags = match <V::Sql as Dialect>::BACKEND {
        shortlink_store::Backend::Postgres => "l.tags::text",
        _ => "l.tags",
    };
    format!(
        "SELECT v.event_id, v.code, v.visited_at, CAST(v.status AS {bigint}) AS status, \
           v.ip, v.browser, v.browser_version, v.os, v.os_version, v.device, \
           v.audience, CAST(v.reasons AS {bigint}) AS reasons, v.agent, v.isp, v.country, v.region, \
           v.city, v.referrer_host, v.short_domain, v.language, v.rule, l.campaign, \
           l.recipient_ref, {tags} AS tags, l.target, l.rules, l.not_yet_url, l.expired_url, \
           l.valid_since, l.expires_at, l.workspace_id \
         FROM {visits} AS v",
        bigint = V::Sql::BIGINT,
    )
}

const FAILURE_COLUMNS: &str =
    "id, from_seq, from_index, to_seq, to_index, events, failed_ms, error";

/// Fenced by the lease and the revision the deliverer read.
const SAVE_PROGRESS: &str = "UPDATE webhook_subscriptions SET cursor_seq = ?, cursor_index = ?, \
     delivered = delivered + ?, failing_since_ms = ?, attempts = ?, last_error = ?, \
     lease_until_ms = ? WHERE id = ? AND lease_owner = ? AND revision = ?";

fn progress_values(lease: &Lease, p: &Progress) -> Vec<Value> {
    vec![
        Value::Int(p.cursor.seq),
        Value::Int(p.cursor.index),
        Value::Int(p.delivered),
        Value::OptInt(p.failing_since_ms),
        Value::Int(p.attempts),
        Value::OptText(p.last_error.clone()),
        Value::Int(lease.until_ms),
        Value::Text(lease.id.clone()),
        Value::Text(lease.owner.clone()),
        Value::Int(lease.revision),
    ]
}

fn json_list(values: &[String]) -> Value {
    Value::Text(serde_json::to_string(values).unwrap_or_else(|_| "[]".into()))
}

fn spec_values(spec: &SubscriptionSpec) -> [Value; 8] {
    [
        Value::Text(spec.name.clone()),
        Value::Text(spec.url.to_string()),
        json_list(&spec.campaigns),
        json_list(&spec.tags),
        Value::Int(i64::from(spec.include_bots)),
        Value::Int(i64::from(spec.batch_size)),
        Value::Int(i64::from(spec.batch_ms)),
        Value::Int(i64::from(spec.link_events)),
    ]
}

async fn all<V: VisitDialect>(pool: &Pool<Db<V>>, query: Statement) -> StorageResult<Vec<Row<V>>> {
    let mut connection = pool.acquire().await.map_err(db)?;
    Db::<V>::fetch_all(&mut connection, query).await.map_err(db)
}

async fn write<V: VisitDialect>(store: &SqlVisitStore<V>, query: Statement) -> StorageResult<u64> {
    let mut connection = store.writer.acquire().await.map_err(db)?;
    Db::<V>::execute(&mut connection, query).await.map_err(db)
}

fn text<V: VisitDialect>(row: &Row<V>, column: &str) -> StorageResult<String> {
    V::Sql::read_text(row, column)
}

fn opt_text<V: VisitDialect>(row: &Row<V>, column: &str) -> StorageResult<Option<String>> {
    V::Sql::read_opt_text(row, column)
}

fn int<V: VisitDialect>(row: &Row<V>, column: &str) -> StorageResult<i64> {
    Ok(Db::<V>::int(row, column)?)
}

fn subscription_row<V: VisitDialect>(row: &Row<V>) -> StorageResult<Subscription> {
    let list = |column: &str| -> StorageResult<Vec<String>> {
        let text = text::<V>(row, column)?;
        serde_json::from_str(&text)
            .map_err(|_| StorageError::Corrupt(format!("webhook {column} {text:?}")))
    };
    let url = text::<V>(row, "url")?;
    Ok(Subscription {
        id: text::<V>(row, "id")?,
        workspace: WorkspaceId::from_db(int::<V>(row, "workspace_id")?),
        spec: SubscriptionSpec {
            name: text::<V>(row, "name")?,
            url: url::Url::parse(&url)
                .map_err(|_| StorageError::Corrupt(format!("webhook url {url:?}")))?,
            campaigns: list("campaigns")?,
            tags: list("tags")?,
            include_bots: int::<V>(row, "include_bots")? != 0,
            batch_size: u32::try_from(int::<V>(row, "batch_size")?).unwrap_or(1),
            batch_ms: u32::try_from(int::<V>(row, "batch_ms")?).unwrap_or(0),
            link_events: int::<V>(row, "link_events")? != 0,
        },
        secret: text::<V>(row, "secret")?,
        created_ms: int::<V>(row, "created_ms")?,
        revision: int::<V>(row, "revision")?,
        cursor: Cursor {
            seq: int::<V>(row, "cursor_seq")?,
            index: int::<V>(row, "cursor_index")?,
        },
        lease_owner: opt_text::<V>(row, "lease_owner")?,
        lease_until_ms: int::<V>(row, "lease_until_ms")?,
        delivered: int::<V>(row, "delivered")?,
        failing_since_ms: Db::<V>::opt_int(row, "failing_since_ms")?,
        attempts: int::<V>(row, "attempts")?,
        last_error: opt_text::<V>(row, "last_error")?,
    })
}

fn link_event_row<V: VisitDialect>(row: &Row<V>) -> StorageResult<StoredLinkEvent> {
    let corrupt =
        |column: &str, text: &str| StorageError::Corrupt(format!("link event {column} {text:?}"));
    let kind = text::<V>(row, "kind")?;
    let reason = text::<V>(row, "reason")?;
    let at_ms = int::<V>(row, "at_ms")?;
    Ok(StoredLinkEvent {
        event: LinkEvent {
            id: text::<V>(row, "id")?,
            workspace: WorkspaceId::from_db(int::<V>(row, "workspace_id")?),
            code: text::<V>(row, "code")?,
            kind: LinkEventKind::parse(&kind).ok_or_else(|| corrupt("kind", &kind))?,
            feed: text::<V>(row, "feed")?,
            entry: text::<V>(row, "entry")?,
            reason: LinkEventReason::parse(&reason).ok_or_else(|| corrupt("reason", &reason))?,
            at: chrono::DateTime::from_timestamp_millis(at_ms).unwrap_or_default(),
        },
        // A deleted workspace's events went nowhere: no subscription of it is left.
        workspace_slug: opt_text::<V>(row, "slug")?.unwrap_or_default(),
    })
}

fn failure_row<V: VisitDialect>(row: &Row<V>) -> StorageResult<Failure> {
    Ok(Failure {
        id: int::<V>(row, "id")?,
        from: Cursor {
            seq: int::<V>(row, "from_seq")?,
            index: int::<V>(row, "from_index")?,
        },
        to: Cursor {
            seq: int::<V>(row, "to_seq")?,
            index: int::<V>(row, "to_index")?,
        },
        events: int::<V>(row, "events")?,
        failed_ms: int::<V>(row, "failed_ms")?,
        error: text::<V>(row, "error")?,
    })
}

fn feed_row<V: VisitDialect>(row: &Row<V>) -> StorageResult<FeedRow> {
    let opt = |c: &str| opt_text::<V>(row, c);
    Ok(FeedRow {
        workspace: Db::<V>::opt_int(row, "workspace_id")?.map(WorkspaceId::from_db),
        event_id: text::<V>(row, "event_id")?,
        code: text::<V>(row, "code")?,
        visited_at: V::read_visit_time(row, "visited_at")?,
        status: Db::<V>::opt_int(row, "status")?,
        ip: opt("ip")?,
        browser: opt("browser")?,
        browser_version: opt("browser_version")?,
        os: opt("os")?,
        os_version: opt("os_version")?,
        device: text::<V>(row, "device")?,
        audience: text::<V>(row, "audience")?,
        reasons: Db::<V>::opt_int(row, "reasons")?.unwrap_or(0),
        agent: opt("agent")?,
        isp: opt("isp")?,
        country: opt("country")?,
        region: opt("region")?,
        city: opt("city")?,
        referrer_host: opt("referrer_host")?,
        short_domain: opt("short_domain")?,
        language: opt("language")?,
        rule: opt("rule")?,
        campaign: opt("campaign")?,
        recipient_ref: opt("recipient_ref")?,
        tags: opt("tags")?,
        target: opt("target")?,
        rules: opt("rules")?,
        not_yet_url: opt("not_yet_url")?,
        expired_url: opt("expired_url")?,
        valid_since: V::Sql::read_opt_time(row, "valid_since")?,
        expires_at: V::Sql::read_opt_time(row, "expires_at")?,
    })
}

#[async_trait]
impl<V: VisitDialect> WebhookStore for SqlVisitStore<V> {
    async fn feed_batches(&self, from_seq: i64, limit: u32) -> StorageResult<Vec<FeedBatch>> {
        let query = statement(
            "SELECT seq, committed_ms, event_ids, first_visit_ms, last_visit_ms FROM visit_feed \
             WHERE seq >= ? ORDER BY seq LIMIT ?",
            [Value::Int(from_seq), Value::Int(i64::from(limit))],
        );
        (all::<V>(&self.reader, query).await?.iter())
            .map(|row| {
                Ok(FeedBatch {
                    seq: int::<V>(row, "seq")?,
                    committed_ms: int::<V>(row, "committed_ms")?,
                    event_ids: (text::<V>(row, "event_ids")?.split('\n'))
                        .map(str::to_owned)
                        .collect(),
                    visits_within: Db::<V>::opt_int(row, "first_visit_ms")?
                        .zip(Db::<V>::opt_int(row, "last_visit_ms")?),
                })
            })
            .collect()
    }

    async fn link_events(&self, ids: &[String]) -> StorageResult<Vec<StoredLinkEvent>> {
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IN_LIST) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let query = statement(
                &format!(
                    "SELECT e.id, e.workspace_id, e.code, e.kind, e.feed, e.entry, e.reason, \
                     e.at_ms, w.slug FROM link_events e \
                     LEFT JOIN workspaces w ON w.id = e.workspace_id WHERE e.id IN ({marks})"
                ),
                chunk.iter().map(|id| Value::Text(id.clone())),
            );
            for row in all::<V>(&self.reader, query).await?.iter() {
                found.push(link_event_row::<V>(row)?);
            }
        }
        Ok(found)
    }

    async fn link_tags(&self, code: &str) -> StorageResult<Option<String>> {
        let tags = match <V::Sql as Dialect>::BACKEND {
            shortlink_store::Backend::Postgres => "tags::text",
            _ => "tags",
        };
        let query = statement(
            &format!("SELECT {tags} AS tags FROM links WHERE code = ?"),
            [Value::Text(code.to_owned())],
        );
        match all::<V>(&self.reader, query).await?.first() {
            Some(row) => opt_text::<V>(row, "tags"),
            None => Ok(None),
        }
    }

    async fn feed_rows(
        &self,
        ids: &[String],
        within: Option<(i64, i64)>,
    ) -> StorageResult<Vec<FeedRow>> {
        // PostgreSQL keeps visits partitioned by day (migration 54) and finds an id in each
        // day's index unless told which days hold it: then it reads those days' partitions by
        // name (`rows_between`), one or two for a row of one stored batch.
        let days = match <V::Sql as Dialect>::BACKEND {
            shortlink_store::Backend::Postgres => within.and_then(|(first, last)| {
                let time = chrono::DateTime::from_timestamp_millis;
                time(first).zip(time(last))
            }),
            _ => None,
        };
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IN_LIST) {
            let query = |visits: &str| {
                let mut query = statement(
                    &format!(
                        "{} LEFT JOIN links l ON l.code = v.code WHERE v.event_id IN ({})",
                        feed_select::<V>(visits),
                        vec!["?"; chunk.len()].join(", "),
                    ),
                    chunk.iter().cloned().map(Value::Text),
                );
                if let Some((first, last)) = days {
                    query
                        .push(" AND v.visited_at >= ")
                        .bind(Value::Time(first))
                        .push(" AND v.visited_at <= ")
                        .bind(Value::Time(last));
                }
                query
            };
            let found = match days {
                Some((first, last)) => self.rows_between(first, last, FEED_COLUMNS, query).await?,
                None => all::<V>(&self.reader, query("visits")).await?,
            };
            for row in found {
                rows.push(feed_row::<V>(&row)?);
            }
        }
        Ok(rows)
    }

    async fn link_visits(
        &self,
        workspace: WorkspaceId,
        code: &str,
        before: Option<&VisitKey>,
        audience: Option<Audience>,
        limit: u32,
    ) -> StorageResult<Vec<FeedRow>> {
        // On the (code, visited_at) index, backwards; the link's workspace decides, so another
        // workspace's code of the same name (none can exist) would still answer nothing. A
        // verdict filters the rows that index walks: a link's visits, not the table's.
        let mut query = statement(
            &format!(
                "{} JOIN links l ON l.code = v.code WHERE v.code = ? AND l.workspace_id = ?",
                feed_select::<V>("visits")
            ),
            [Value::Text(code.to_owned()), Value::Int(workspace.get())],
        );
        if let Some(key) = before {
            let at = || V::visit_time(key.at);
            query
                .push(" AND (v.visited_at < ")
                .bind(at())
                .push(" OR (v.visited_at = ")
                .bind(at())
                .push(" AND v.event_id < ")
                .bind(Value::Text(key.event_id.clone()))
                .push("))");
        }
        if let Some(audience) = audience {
            query
                .push(" AND v.audience = ")
                .bind(Value::Text(audience.as_str().to_owned()));
        }
        query.push(&format!(
            " ORDER BY v.visited_at DESC, v.event_id DESC LIMIT {limit}"
        ));
        let rows = all::<V>(&self.reader, query).await?;
        rows.iter().map(feed_row::<V>).collect()
    }

    async fn feed_head(&self) -> StorageResult<i64> {
        let query = Statement::new("SELECT COALESCE(MAX(seq), 0) AS seq FROM visit_feed");
        match all::<V>(&self.reader, query).await?.first() {
            Some(row) => int::<V>(row, "seq"),
            None => Ok(0),
        }
    }

    async fn feed_seq_since(&self, at_ms: i64) -> StorageResult<Option<i64>> {
        let query = statement(
            "SELECT seq FROM visit_feed WHERE committed_ms >= ? ORDER BY committed_ms, seq LIMIT 1",
            [Value::Int(at_ms)],
        );
        match all::<V>(&self.reader, query).await?.first() {
            Some(row) => Ok(Some(int::<V>(row, "seq")?)),
            None => Ok(None),
        }
    }

    async fn insert_subscription(&self, s: &Subscription) -> StorageResult<()> {
        let mut values = vec![Value::Text(s.id.clone()), Value::Text(s.secret.clone())];
        values.extend(spec_values(&s.spec));
        let numbers = [
            s.created_ms,
            s.cursor.seq,
            s.cursor.index,
            s.workspace.get(),
        ];
        values.extend(numbers.map(Value::Int));
        write(
            self,
            statement(
                "INSERT INTO webhook_subscriptions (id, secret, name, url, campaigns, tags, \
               include_bots, batch_size, batch_ms, link_events, created_ms, cursor_seq, \
               cursor_index, workspace_id) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            ),
        )
        .await?;
        Ok(())
    }

    async fn subscriptions(&self) -> StorageResult<Vec<Subscription>> {
        let query = Statement::new(format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_ms, id"
        ));
        (all::<V>(&self.reader, query).await?.iter())
            .map(subscription_row::<V>)
            .collect()
    }

    async fn subscription(&self, id: &str) -> StorageResult<Option<Subscription>> {
        let query = statement(
            &format!("SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE id = ?"),
            [Value::Text(id.to_owned())],
        );
        // From the writer: a deliverer reloading after a refused write must see that write's cause.
        (all::<V>(&self.writer, query).await?.first())
            .map(subscription_row::<V>)
            .transpose()
    }

    async fn update_subscription(
        &self,
        id: &str,
        spec: &SubscriptionSpec,
        secret: &str,
    ) -> StorageResult<bool> {
        let mut values = spec_values(spec).to_vec();
        values.push(Value::Text(secret.to_owned()));
        values.push(Value::Text(id.to_owned()));
        let changed = write(
            self,
            statement(
                "UPDATE webhook_subscriptions SET name = ?, url = ?, campaigns = ?, tags = ?, \
                   include_bots = ?, batch_size = ?, batch_ms = ?, link_events = ?, \
                   secret = ?, revision = revision + 1 WHERE id = ?",
                values,
            ),
        )
        .await?;
        Ok(changed > 0)
    }

    async fn delete_subscription(&self, id: &str) -> StorageResult<bool> {
        let mut tx = self.writer.begin().await.map_err(db)?;
        let id = || [Value::Text(id.to_owned())];
        // Explicitly, not by the foreign key: SQLite enforces it only per connection setting.
        let failures = statement(
            "DELETE FROM webhook_failures WHERE subscription_id = ?",
            id(),
        );
        Db::<V>::execute(&mut tx, failures).await.map_err(db)?;
        let gone = statement("DELETE FROM webhook_subscriptions WHERE id = ?", id());
        let deleted = Db::<V>::execute(&mut tx, gone).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(deleted > 0)
    }

    async fn rewind(&self, id: &str, cursor: Cursor) -> StorageResult<bool> {
        let changed = write(
            self,
            statement(
                "UPDATE webhook_subscriptions SET cursor_seq = ?, cursor_index = ?, \
                   failing_since_ms = NULL, attempts = 0, last_error = NULL, \
                   revision = revision + 1 WHERE id = ?",
                [
                    Value::Int(cursor.seq),
                    Value::Int(cursor.index),
                    Value::Text(id.to_owned()),
                ],
            ),
        )
        .await?;
        Ok(changed > 0)
    }

    async fn claim(&self, lease: &Lease, now_ms: i64) -> StorageResult<bool> {
        let claimed = write(
            self,
            statement(
                "UPDATE webhook_subscriptions SET lease_owner = ?, lease_until_ms = ? \
                 WHERE id = ? AND (lease_owner = ? OR lease_owner IS NULL OR lease_until_ms < ?)",
                [
                    Value::Text(lease.owner.clone()),
                    Value::Int(lease.until_ms),
                    Value::Text(lease.id.clone()),
                    Value::Text(lease.owner.clone()),
                    Value::Int(now_ms),
                ],
            ),
        )
        .await?;
        Ok(claimed > 0)
    }

    async fn advance(&self, lease: &Lease, progress: &Progress) -> StorageResult<bool> {
        let saved = write(
            self,
            statement(SAVE_PROGRESS, progress_values(lease, progress)),
        )
        .await?;
        Ok(saved > 0)
    }

    async fn give_up(
        &self,
        lease: &Lease,
        progress: &Progress,
        failure: &Failure,
    ) -> StorageResult<bool> {
        let mut tx = self.writer.begin().await.map_err(db)?;
        let save = statement(SAVE_PROGRESS, progress_values(lease, progress));
        if Db::<V>::execute(&mut tx, save).await.map_err(db)? == 0 {
            return Ok(false);
        }
        let record = statement(
            "INSERT INTO webhook_failures (subscription_id, from_seq, from_index, to_seq, \
               to_index, events, failed_ms, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                Value::Text(lease.id.clone()),
                Value::Int(failure.from.seq),
                Value::Int(failure.from.index),
                Value::Int(failure.to.seq),
                Value::Int(failure.to.index),
                Value::Int(failure.events),
                Value::Int(failure.failed_ms),
                Value::Text(failure.error.clone()),
            ],
        );
        Db::<V>::execute(&mut tx, record).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn failures(&self, id: &str, limit: u32) -> StorageResult<Vec<Failure>> {
        let query = statement(
            &format!(
                "SELECT {FAILURE_COLUMNS} FROM webhook_failures WHERE subscription_id = ? \
                 ORDER BY id DESC LIMIT ?"
            ),
            [Value::Text(id.to_owned()), Value::Int(i64::from(limit))],
        );
        (all::<V>(&self.reader, query).await?.iter())
            .map(failure_row::<V>)
            .collect()
    }

    async fn failure(&self, id: &str, failure: i64) -> StorageResult<Option<Failure>> {
        let query = statement(
            &format!(
                "SELECT {FAILURE_COLUMNS} FROM webhook_failures \
                 WHERE subscription_id = ? AND id = ?"
            ),
            [Value::Text(id.to_owned()), Value::Int(failure)],
        );
        (all::<V>(&self.reader, query).await?.first())
            .map(failure_row::<V>)
            .transpose()
    }
}

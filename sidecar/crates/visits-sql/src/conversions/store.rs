//! Conversions in SQL, written once for every backend's visit store (the same database as the
//! visits they name): [`ConversionStore`], implemented for [`SqlVisitStore`]. Times are Unix ms.
//!
//! A conversion is written in one transaction with its feed row (`feed.rs`), so the feed
//! hands it out in commit order among the visits. Idempotency is the unique index on
//! `(workspace_id, event_id)`: an insert that loses the race to a concurrent retry fails on it,
//! rolls back (nothing half-written), and reads the winner's row.

use crate::sql::db;
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value, IN_LIST};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::conversions::input::{Click, Money, NewConversion, Refusal};
use shortlink_visits::conversions::{ArmCounts, Conversion, ConversionStore, Recorded, Scope};
use sqlx::{Database, Pool};

fn arm_of(
    arms: &mut std::collections::BTreeMap<Option<String>, ArmCounts>,
    rule: Option<String>,
) -> &mut ArmCounts {
    arms.entry(rule.clone()).or_insert_with(|| ArmCounts {
        rule,
        ..ArmCounts::default()
    })
}

/// `cv_`, the time in Unix ms (12 hex digits), 64 random bits (16): ids grow with time, so a
/// batch's rows go to the right edge of the primary key's B-tree instead of 1,000 random leaves
/// (2.3 µs of PostgreSQL CPU less per conversion, bench/results/conversions-2026-11-26.md run 5);
/// two ids of one millisecond still differ by 64 random bits.
pub(super) fn new_id() -> StorageResult<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| StorageError::Corrupt(format!("no randomness: {error}")))?;
    let ms = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
    Ok(format!("cv_{ms:012x}{:016x}", u64::from_be_bytes(bytes)))
}

pub(super) const COLUMNS: &str =
    "id, workspace_id, event_id, visit_id, code, campaign, recipient_ref, rule, \
     short_domain, device, country, clicked_ms, name, value_minor, currency, exponent, \
     converted_ms";

/// The click as read for a conversion: the visit joined to its link.
struct ClickRow {
    visit_id: String,
    visited_at: DateTime<Utc>,
    campaign: Option<String>,
    recipient_ref: Option<String>,
}

pub(super) fn ms(at: DateTime<Utc>) -> Value {
    Value::Int(at.timestamp_millis())
}

pub(super) fn at_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

impl<V: VisitDialect> SqlVisitStore<V> {
    pub(super) async fn all(
        &self,
        pool: &Pool<Db<V>>,
        query: Statement,
    ) -> StorageResult<Vec<Row<V>>> {
        let mut connection = pool.acquire().await.map_err(db)?;
        Db::<V>::fetch_all(&mut connection, query).await.map_err(db)
    }

    pub(super) fn conversion(row: &Row<V>) -> StorageResult<Conversion> {
        let text = |c| V::Sql::read_text(row, c);
        let opt = |c| V::Sql::read_opt_text(row, c);
        let int = |c| Db::<V>::int(row, c).map_err(db);
        let value = match (Db::<V>::opt_int(row, "value_minor")?, opt("currency")?) {
            (Some(minor), Some(currency)) => {
                let exponent = Db::<V>::opt_int(row, "exponent")?.unwrap_or(0);
                Some((minor, currency, u8::try_from(exponent).unwrap_or(0)))
            }
            _ => None,
        };
        Ok(Conversion {
            id: text("id")?,
            workspace: WorkspaceId::from_db(int("workspace_id")?),
            event_id: text("event_id")?,
            click_id: text("visit_id")?,
            code: text("code")?,
            campaign: opt("campaign")?,
            recipient_ref: opt("recipient_ref")?,
            rule: opt("rule")?,
            short_domain: opt("short_domain")?,
            device: opt("device")?,
            country: opt("country")?,
            clicked_at: at_ms(int("clicked_ms")?),
            name: text("name")?,
            value,
            converted_at: at_ms(int("converted_ms")?),
        })
    }

    async fn by_event_id(
        &self,
        workspace: WorkspaceId,
        event_id: &str,
    ) -> StorageResult<Option<Conversion>> {
        let query = statement(
            &format!("SELECT {COLUMNS} FROM conversions WHERE workspace_id = ? AND event_id = ?"),
            [
                Value::Int(workspace.get()),
                Value::Text(event_id.to_owned()),
            ],
        );
        let rows = self.all(&self.writer, query).await?;
        rows.first().map(Self::conversion).transpose()
    }

    /// The click `click` names in `workspace`: by id, or the latest human visit of a
    /// per-recipient link at or before `before` (when there is none, any later one, so that the
    /// refusal says `before_click`).
    async fn click(
        &self,
        workspace: WorkspaceId,
        click: &Click,
        before: DateTime<Utc>,
    ) -> StorageResult<Option<ClickRow>> {
        const SELECT: &str = "SELECT v.event_id, v.visited_at, l.campaign, l.recipient_ref \
             FROM visits v JOIN links l ON l.code = v.code WHERE l.workspace_id = ?";
        let workspace = Value::Int(workspace.get());
        let queries = match click {
            Click::Id(id) => vec![statement(
                &format!("{SELECT} AND v.event_id = ?"),
                [workspace, Value::Text(id.clone())],
            )],
            Click::Recipient {
                code,
                recipient_ref,
            } => {
                let values = || {
                    [
                        workspace.clone(),
                        Value::Text(code.clone()),
                        Value::Text(recipient_ref.clone()),
                        Value::Text(code.clone()),
                    ]
                };
                let recipient = "AND l.code = ? AND l.recipient_ref = ? AND v.code = ? \
                     AND v.audience = 'human'";
                vec![
                    statement(
                        &format!(
                            "{SELECT} {recipient} AND v.visited_at <= ? \
                             ORDER BY v.visited_at DESC LIMIT 1"
                        ),
                        values().into_iter().chain([V::visit_time(before)]),
                    ),
                    statement(
                        &format!("{SELECT} {recipient} ORDER BY v.visited_at LIMIT 1"),
                        values(),
                    ),
                ]
            }
        };
        for query in queries {
            if let Some(row) = self.all(&self.reader, query).await?.first() {
                return Ok(Some(ClickRow {
                    visit_id: V::Sql::read_text(row, "event_id")?,
                    visited_at: V::read_visit_time(row, "visited_at")?,
                    campaign: V::Sql::read_opt_text(row, "campaign")?,
                    recipient_ref: V::Sql::read_opt_text(row, "recipient_ref")?,
                }));
            }
        }
        Ok(None)
    }

    /// Inserts the conversion copied from its visit, and its feed row, in one transaction.
    /// `Ok(false)`: the visit is gone (retention ran between the read and this write).
    async fn insert(
        &self,
        conversion: &Conversion,
        money: Option<Money>,
        now: DateTime<Utc>,
    ) -> StorageResult<bool> {
        let insert = statement(
            "INSERT INTO conversions (id, workspace_id, event_id, visit_id, code, campaign, \
               recipient_ref, rule, short_domain, device, country, visitor, clicked_ms, name, \
               value_minor, currency, exponent, converted_ms, received_ms) \
             SELECT ?, ?, ?, v.event_id, v.code, ?, ?, v.rule, v.short_domain, v.device, \
               v.country, v.visitor, ?, ?, ?, ?, ?, ?, ? FROM visits v WHERE v.event_id = ?",
            [
                Value::Text(conversion.id.clone()),
                Value::Int(conversion.workspace.get()),
                Value::Text(conversion.event_id.clone()),
                Value::OptText(conversion.campaign.clone()),
                Value::OptText(conversion.recipient_ref.clone()),
                ms(conversion.clicked_at),
                Value::Text(conversion.name.clone()),
                Value::OptInt(money.map(|m| m.minor)),
                Value::OptText(money.map(|m| m.currency.to_owned())),
                Value::OptInt(money.map(|m| i64::from(m.exponent))),
                ms(conversion.converted_at),
                ms(now),
                Value::Text(conversion.click_id.clone()),
            ],
        );
        let mut tx = self.writer.begin().await.map_err(db)?;
        if Db::<V>::execute(&mut *tx, insert).await.map_err(db)? != 1 {
            return Ok(false);
        }
        // As stored: the code, rule and value the insert copied.
        let query = statement(
            &format!(
                "SELECT {COLUMNS}, {} AS visitor_hex FROM conversions WHERE id = ?",
                super::rollup::visitor_hex::<V>()
            ),
            [Value::Text(conversion.id.clone())],
        );
        if let Some(row) = Db::<V>::fetch_optional(&mut *tx, query).await.map_err(db)? {
            let stored = Self::conversion(&row)?;
            let visitor = V::Sql::read_text(&row, "visitor_hex")?;
            Self::add_to_rollups(&mut *tx, &[(&stored, visitor.as_str())]).await?;
        }
        crate::feed::append_ids::<V::Sql>(&mut *tx, &[conversion.id.as_str()], None).await?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }
}

#[async_trait]
impl<V: VisitDialect> ConversionStore for SqlVisitStore<V> {
    async fn record(
        &self,
        workspace: WorkspaceId,
        new: &NewConversion,
        window: Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<Result<Recorded, Refusal>> {
        let first = |conversion| {
            Ok(Ok(Recorded {
                conversion,
                duplicate: true,
            }))
        };
        if let Some(conversion) = self.by_event_id(workspace, &new.event_id).await? {
            return first(conversion);
        }
        let Some(click) = self.click(workspace, &new.click, new.converted_at).await? else {
            return Ok(Err(Refusal::UnknownClick));
        };
        if new.converted_at < click.visited_at {
            return Ok(Err(Refusal::BeforeClick));
        }
        if new.converted_at > click.visited_at + window {
            return Ok(Err(Refusal::OutsideWindow));
        }
        let mut conversion = Conversion {
            id: new_id()?,
            workspace,
            event_id: new.event_id.clone(),
            click_id: click.visit_id,
            code: String::new(),
            campaign: click.campaign,
            recipient_ref: click.recipient_ref,
            rule: None,
            short_domain: None,
            device: None,
            country: None,
            // Stored to the millisecond, answered as stored.
            clicked_at: at_ms(click.visited_at.timestamp_millis()),
            name: new.name.clone(),
            value: None,
            converted_at: at_ms(new.converted_at.timestamp_millis()),
        };
        match self.insert(&conversion, new.money, now).await {
            Ok(true) => {}
            Ok(false) => return Ok(Err(Refusal::UnknownClick)),
            // A concurrent request with the same event id committed first.
            Err(StorageError::Conflict) => {
                return match self.by_event_id(workspace, &new.event_id).await? {
                    Some(conversion) => first(conversion),
                    None => Err(StorageError::Conflict),
                };
            }
            Err(error) => return Err(error),
        }
        // What the insert copied from the visit, read back as stored.
        conversion = self
            .by_event_id(workspace, &new.event_id)
            .await?
            .ok_or_else(|| StorageError::Corrupt("conversion vanished after insert".into()))?;
        Ok(Ok(Recorded {
            conversion,
            duplicate: false,
        }))
    }

    async fn record_batch(
        &self,
        workspace: WorkspaceId,
        news: &[NewConversion],
        window: Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        self.record_many(workspace, news, window, now).await
    }

    async fn conversions(&self, ids: &[String]) -> StorageResult<Vec<Conversion>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT {COLUMNS} FROM conversions WHERE id IN ({})",
                    vec!["?"; chunk.len()].join(", ")
                ),
                chunk.iter().cloned().map(Value::Text),
            );
            for row in self.all(&self.reader, query).await? {
                out.push(Self::conversion(&row)?);
            }
        }
        Ok(out)
    }

    async fn arm_counts(
        &self,
        workspace: WorkspaceId,
        scope: &Scope,
        name: Option<&str>,
    ) -> StorageResult<Vec<ArmCounts>> {
        // The rollups of migration 20261126000053 (`conversions/rollup.rs`, `rollup.rs`), summed
        // over the scope's links: a few rows per link, whatever the visits and conversions.
        let bigint = V::Sql::BIGINT;
        let (column, key) = match scope {
            Scope::Link(code) => ("code", code),
            Scope::Campaign(campaign) => ("campaign", campaign),
        };
        let links = format!(
            "FROM links l JOIN {{}} ON r.code = l.code WHERE l.workspace_id = ? AND l.{column} = ?"
        );
        let from = |table: &str| links.replace("{}", &format!("{table} r"));
        // "" is every name together.
        let name_key = name.unwrap_or_default();
        let values = |name: bool| {
            [Value::Int(workspace.get()), Value::Text(key.clone())]
                .into_iter()
                .chain(name.then(|| Value::Text(name_key.to_owned())))
        };
        let clicks = statement(
            &format!(
                "SELECT r.rule, CAST(SUM(r.humans) AS {bigint}) AS clicks, \
                 CAST(SUM(r.visitors) AS {bigint}) AS visitors {} GROUP BY r.rule",
                from("ab_arms")
            ),
            values(false),
        );
        let conversions = statement(
            &format!(
                "SELECT r.rule, CAST(SUM(r.conversions) AS {bigint}) AS conversions, \
                 CAST(SUM(r.converting) AS {bigint}) AS converting {} AND r.name = ? \
                 GROUP BY r.rule",
                from("ab_conversions")
            ),
            values(true),
        );
        let sums = statement(
            &format!(
                "SELECT r.rule, r.currency, CAST(MAX(r.exponent) AS {bigint}) AS exponent, \
                 CAST(SUM(r.total) AS {bigint}) AS total {} AND r.name = ? \
                 GROUP BY r.rule, r.currency",
                from("ab_values")
            ),
            values(true),
        );
        let (clicks, conversions, sums) = tokio::try_join!(
            self.all(&self.reader, clicks),
            self.all(&self.reader, conversions),
            self.all(&self.reader, sums)
        )?;
        let mut arms: std::collections::BTreeMap<Option<String>, ArmCounts> = Default::default();
        // The own target's rows are under the rule "".
        let rule = |row: &Row<V>| {
            V::Sql::read_text(row, "rule").map(|rule| Some(rule).filter(|r| !r.is_empty()))
        };
        for row in &clicks {
            let entry = arm_of(&mut arms, rule(row)?);
            entry.clicks = Db::<V>::int(row, "clicks")?;
            entry.visitors = Db::<V>::int(row, "visitors")?;
        }
        for row in &conversions {
            let entry = arm_of(&mut arms, rule(row)?);
            entry.conversions = Db::<V>::int(row, "conversions")?;
            entry.converting_visitors = Db::<V>::int(row, "converting")?;
        }
        for row in &sums {
            let entry = arm_of(&mut arms, rule(row)?);
            let exponent = u8::try_from(Db::<V>::int(row, "exponent")?).unwrap_or(0);
            let total = Db::<V>::int(row, "total")?;
            entry
                .values
                .push((V::Sql::read_text(row, "currency")?, exponent, total));
        }
        let mut arms: Vec<ArmCounts> = arms.into_values().collect();
        for arm in &mut arms {
            arm.values.sort();
        }
        // The own target first, then rules and variants in their order.
        arms.sort_by_key(|arm| {
            (arm.rule.as_deref())
                .and_then(|text| shortlink_wire::event::parse_chosen(text.as_bytes()))
                .map(|c| (c.rule, c.variant))
        });
        Ok(arms)
    }
}

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

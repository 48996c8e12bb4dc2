//! PostgreSQL visit store: raw visits go in by binary `COPY` ([`copy`]); every
//! other multi-row write is one statement over `UNNEST` of array parameters. Several consumers may
//! write at once: rows are upserted in key order, and link rows are locked in code order first, so
//! two batches never wait on each other in a cycle.

mod copy;
mod corrections;
mod days;
mod insert;
mod named;
mod partitions;
mod receipts;
mod rollup;
mod young;
use crate::sql::{SqlVisitStore, VisitDialect};
use crate::write::{distinct, first_rules, first_seen, outcome, user_agents};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use copy::at_ms;
use insert::{insert_visits, Inserted};
use shortlink_model::WorkspaceId;
use shortlink_store::{Pg, StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::deliveries::model::{DeliveryState, MessageRow, Receipt, UpsertedMessage};
use shortlink_visits::hindsight::Correction;
use shortlink_visits::rollup::{AllLinks, Deltas, Folding};
use shortlink_visits::store::BatchOutcome;
use shortlink_visits::store::DayPartitions;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};
use std::collections::HashSet;
use std::str::FromStr;
use std::time::Duration;

pub struct PgVisits {
    /// The days that have their own partition: a read of a day or two of raw visits names them
    /// instead of `visits` ([`named`]).
    days: named::DayList,
    /// Whether the delivery tables have had their first statistics ([`young`]).
    young: young::YoungTables,
}

pub type PgVisitStore = SqlVisitStore<PgVisits>;

impl PgVisitStore {
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> StorageResult<Self> {
        let connect = PgConnectOptions::from_str(url)?
            .application_name("shortlink-sidecar-analytics")
            .options([
                ("statement_timeout", "30s"),
                ("idle_in_transaction_session_timeout", "60s"),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.clamp(1, 8))
            .acquire_timeout(acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(connect)
            .await
            .map_err(StorageError::classify)?;
        Ok(Self {
            dialect: PgVisits {
                days: named::DayList::default(),
                young: young::YoungTables::default(),
            },
            writer: pool.clone(),
            reader: pool,
        })
    }
}

#[async_trait]
impl VisitDialect for PgVisits {
    type Sql = Pg;

    fn day_partitions(store: &PgVisitStore) -> Option<&dyn DayPartitions> {
        Some(store)
    }

    // A visit's key is (event_id, visited_at): the table is partitioned by day (migration 54).
    // The time bound again outside (`$1` is the first `?`): PostgreSQL then reads only the days
    // before it; without it the plan was a hash join over every partition.
    const DELETE_VISITS_BEFORE: &'static str =
        "DELETE FROM visits WHERE visited_at < ? AND (event_id, visited_at) IN \
         (SELECT event_id, visited_at FROM visits WHERE visited_at < $1 LIMIT ?)";

    async fn visits_between(
        &self,
        reader: &PgPool,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        columns: &str,
    ) -> StorageResult<Option<String>> {
        self.days.source(reader, first, last, columns).await
    }

    fn forget_days(&self) {
        self.days.forget();
    }

    async fn receipts_stored(&self, writer: &PgPool, count: usize) {
        self.young.receipts_stored(writer, count).await;
    }

    async fn insert_receipts(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        workspace: WorkspaceId,
        receipts: &[Receipt],
    ) -> StorageResult<Option<HashSet<(String, DeliveryState)>>> {
        receipts::insert_receipts(tx, workspace, receipts)
            .await
            .map(Some)
    }

    async fn upsert_messages(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        workspace: WorkspaceId,
        messages: &[MessageRow],
    ) -> StorageResult<Vec<UpsertedMessage>> {
        receipts::upsert_messages(tx, workspace, messages).await
    }

    async fn store_batch(
        &self,
        pool: &PgPool,
        visits: &[Visit],
        corrections: &[Correction],
        all_links: &AllLinks,
        count_bots: bool,
    ) -> StorageResult<BatchOutcome> {
        let mut tx = pool.begin().await.map_err(StorageError::classify)?;
        let applied = self::corrections::apply(&mut tx, corrections).await?;
        let Inserted {
            visits: inserted,
            deltas: mut d,
        } = insert_visits(&mut tx, &distinct(visits), all_links, count_bots).await?;
        insert_user_agents(&mut tx, &inserted).await?;
        credit_new_visitors(&mut tx, &inserted, &mut d).await?;
        crate::corrections::fold(&mut d, &applied);
        let d = d.finish();
        add_to_links(&mut tx, &d).await?;
        rollup::upsert(&mut tx, &d).await?;
        let reclassified = crate::corrections::reclassified(&applied);
        super::feed::append::<Pg>(&mut tx, &inserted, &reclassified).await?;
        tx.commit().await.map_err(StorageError::classify)?;
        let mut outcome = outcome(visits.len(), inserted.len());
        outcome.reclassified = applied.len() as u64;
        Ok(outcome)
    }
}

/// Stores the user agents the visits refer to that are not stored yet, in id order (two
/// consumers storing the same new agent wait on each other's row, never in a cycle).
async fn insert_user_agents(
    tx: &mut Transaction<'static, Postgres>,
    inserted: &[&Visit],
) -> StorageResult<()> {
    let (ids, agents): (Vec<i64>, Vec<&str>) = user_agents(inserted).into_iter().unzip();
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO user_agents (id, agent) SELECT * FROM UNNEST($1::int8[], $2::text[]) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&ids)
    .bind(&agents)
    .execute(&mut **tx)
    .await
    .map_err(StorageError::classify)?;
    Ok(())
}

/// Records each human visitor's first visit to a link, and credits a new visitor to the rollups
/// for the pairs that were not known yet.
async fn credit_new_visitors<'v>(
    tx: &mut Transaction<'static, Postgres>,
    inserted: &[&'v Visit],
    d: &mut Folding<'v>,
) -> StorageResult<()> {
    let pairs = first_seen(inserted);
    let (mut codes, mut visitors, mut times) = (Vec::new(), Vec::new(), Vec::new());
    for (code, visitor, at) in &pairs {
        codes.push(*code);
        visitors.push(visitor.as_slice());
        times.push(at_ms(*at));
    }
    let rows = sqlx::query(
        "INSERT INTO link_visitors (code, visitor, first_seen) \
         SELECT * FROM UNNEST($1::text[], $2::bytea[], $3::timestamptz[]) \
         ON CONFLICT (code, visitor) DO NOTHING RETURNING code, visitor",
    )
    .bind(&codes)
    .bind(&visitors)
    .bind(&times)
    .fetch_all(&mut **tx)
    .await
    .map_err(StorageError::classify)?;
    let rules = if rows.is_empty() {
        Default::default()
    } else {
        first_rules(inserted)
    };
    for row in &rows {
        let code: &str = row.try_get(0)?;
        let visitor: &[u8] = row.try_get(1)?;
        if let Ok(i) = pairs.binary_search_by(|(c, v, _)| (*c, v.as_slice()).cmp(&(code, visitor)))
        {
            let (code, visitor, at) = &pairs[i];
            let rule = rules.get(&(*code, *visitor)).copied().unwrap_or_default();
            d.credit_new_visitor(code, rule, *at);
        }
    }
    Ok(())
}

/// Adds the visits to their links' counters: the link rows locked first, in code order.
async fn add_to_links(
    tx: &mut Transaction<'static, Postgres>,
    d: &Deltas<'_>,
) -> StorageResult<()> {
    let (mut link_codes, mut link_n, mut link_at) = (Vec::new(), Vec::new(), Vec::new());
    for (code, (n, at)) in &d.links {
        link_codes.push(*code);
        link_n.push(*n);
        link_at.push(at_ms(*at));
    }
    if link_codes.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT 1 FROM links WHERE code = ANY($1::text[]) ORDER BY code FOR NO KEY UPDATE")
        .bind(&link_codes)
        .execute(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    sqlx::query(
        "UPDATE links AS l SET visit_count = l.visit_count + v.n, \
           last_visit_at = GREATEST(l.last_visit_at, v.at) \
         FROM UNNEST($1::text[], $2::int8[], $3::timestamptz[]) AS v (code, n, at) \
         WHERE l.code = v.code",
    )
    .bind(&link_codes)
    .bind(&link_n)
    .bind(&link_at)
    .execute(&mut **tx)
    .await
    .map_err(StorageError::classify)?;
    Ok(())
}

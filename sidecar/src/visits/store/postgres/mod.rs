//! PostgreSQL visit store: raw visits go in by binary `COPY` ([`copy`]); every
//! other multi-row write is one statement over `UNNEST` of array parameters. Several consumers may
//! write at once: rows are upserted in key order, and link rows are locked in code order first, so
//! two batches never wait on each other in a cycle.

mod copy;
mod insert;

use super::sql::{SqlVisitStore, VisitDialect};
use super::write::{distinct, first_seen, outcome};
use super::BatchOutcome;
use crate::storage::{Pg, StorageError, StorageResult};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use insert::{insert_visits, Inserted};
use shortlink_visit_enrich::Visit;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Row;
use std::str::FromStr;
use std::time::Duration;

pub(crate) struct PgVisits;

pub(crate) type PgVisitStore = SqlVisitStore<PgVisits>;

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
            dialect: PgVisits,
            writer: pool.clone(),
            reader: pool,
        })
    }
}

fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

pub(super) fn at_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// `(humans, bots, previews)` arrays of a breakdown's rows.
fn audience_arrays<'a, K: 'a>(
    rows: impl Iterator<Item = (&'a K, &'a super::super::rollup::Audiences)>,
    mut key: impl FnMut(&'a K),
) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let (mut h, mut b, mut p) = (Vec::new(), Vec::new(), Vec::new());
    for (k, a) in rows {
        key(k);
        h.push(a.humans);
        b.push(a.bots);
        p.push(a.previews);
    }
    (h, b, p)
}

#[async_trait]
impl VisitDialect for PgVisits {
    type Sql = Pg;

    const DELETE_VISITS_BEFORE: &'static str = "DELETE FROM visits WHERE event_id IN \
         (SELECT event_id FROM visits WHERE visited_at < ? LIMIT ?)";

    async fn store_batch(
        &self,
        pool: &PgPool,
        visits: &[Visit],
        count_bots: bool,
    ) -> StorageResult<BatchOutcome> {
        let mut tx = pool.begin().await.map_err(db)?;
        let Inserted {
            visits: inserted,
            deltas: mut d,
        } = insert_visits(&mut tx, &distinct(visits), count_bots).await?;

        let pairs = first_seen(&inserted);
        let (mut codes, mut visitors, mut times) = (Vec::new(), Vec::new(), Vec::new());
        for (code, visitor, at) in &pairs {
            codes.push(*code);
            visitors.push(visitor.clone());
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
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        for row in &rows {
            let code: &str = row.try_get(0)?;
            let visitor: &[u8] = row.try_get(1)?;
            if let Ok(i) =
                pairs.binary_search_by(|(c, v, _)| (*c, v.as_slice()).cmp(&(code, visitor)))
            {
                let (code, _, at) = &pairs[i];
                d.credit_new_visitor(code, *at);
            }
        }

        // Links first, locked in code order.
        let (mut link_codes, mut link_n, mut link_at) = (Vec::new(), Vec::new(), Vec::new());
        for (code, (n, at)) in &d.links {
            link_codes.push(*code);
            link_n.push(*n);
            link_at.push(at_ms(*at));
        }
        if !link_codes.is_empty() {
            sqlx::query(
                "SELECT 1 FROM links WHERE code = ANY($1::text[]) ORDER BY code FOR NO KEY UPDATE",
            )
            .bind(&link_codes)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            sqlx::query(
                "UPDATE links AS l SET visit_count = l.visit_count + v.n, \
                   last_visit_at = GREATEST(l.last_visit_at, v.at) \
                 FROM UNNEST($1::text[], $2::int8[], $3::timestamptz[]) AS v (code, n, at) \
                 WHERE l.code = v.code",
            )
            .bind(&link_codes)
            .bind(&link_n)
            .bind(&link_at)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }

        let (mut bc, mut bs, mut bb) = (Vec::new(), Vec::new(), Vec::new());
        let (mut bh, mut bbo, mut bp, mut bn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((code, span, bucket), c) in &d.buckets {
            bc.push(*code);
            bs.push(i32::try_from(*span).unwrap_or(i32::MAX));
            bb.push(*bucket);
            bh.push(c.humans);
            bbo.push(c.bots);
            bp.push(c.previews);
            bn.push(c.new_visitors);
        }
        sqlx::query(
            "INSERT INTO visit_buckets (code, span, bucket, humans, bots, previews, new_visitors) \
             SELECT * FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::int8[], $5::int8[], \
               $6::int8[], $7::int8[]) \
             ON CONFLICT (code, span, bucket) DO UPDATE SET \
               humans = visit_buckets.humans + EXCLUDED.humans, \
               bots = visit_buckets.bots + EXCLUDED.bots, \
               previews = visit_buckets.previews + EXCLUDED.previews, \
               new_visitors = visit_buckets.new_visitors + EXCLUDED.new_visitors",
        )
        .bind(&bc)
        .bind(&bs)
        .bind(&bb)
        .bind(&bh)
        .bind(&bbo)
        .bind(&bp)
        .bind(&bn)
        .execute(&mut *tx)
        .await
        .map_err(db)?;

        let counters = "humans = {t}.humans + EXCLUDED.humans, bots = {t}.bots + EXCLUDED.bots, \
                        previews = {t}.previews + EXCLUDED.previews";
        let (mut k0, mut k1, mut k2, mut k3, mut k4, mut k5) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (h, b, p) = audience_arrays(
            d.agents.iter(),
            |(code, day, browser, os, device, agent)| {
                k0.push(*code);
                k1.push(*day);
                k2.push(*browser);
                k3.push(*os);
                k4.push(*device);
                k5.push(*agent);
            },
        );
        sqlx::query(&format!(
            "INSERT INTO visit_agents (code, day, browser, os, device, agent, humans, bots, previews) \
             SELECT * FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], \
               $6::text[], $7::int8[], $8::int8[], $9::int8[]) \
             ON CONFLICT (code, day, browser, os, device, agent) DO UPDATE SET {}",
            counters.replace("{t}", "visit_agents")
        ))
        .bind(&k0)
        .bind(&k1)
        .bind(&k2)
        .bind(&k3)
        .bind(&k4)
        .bind(&k5)
        .bind(&h)
        .bind(&b)
        .bind(&p)
        .execute(&mut *tx)
        .await
        .map_err(db)?;

        let (mut k0, mut k1, mut k2, mut k3, mut k4) = (vec![], vec![], vec![], vec![], vec![]);
        let (h, b, p) = audience_arrays(d.places.iter(), |(code, day, country, region, city)| {
            k0.push(*code);
            k1.push(*day);
            k2.push(*country);
            k3.push(*region);
            k4.push(*city);
        });
        sqlx::query(&format!(
            "INSERT INTO visit_places (code, day, country, region, city, humans, bots, previews) \
             SELECT * FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], \
               $6::int8[], $7::int8[], $8::int8[]) \
             ON CONFLICT (code, day, country, region, city) DO UPDATE SET {}",
            counters.replace("{t}", "visit_places")
        ))
        .bind(&k0)
        .bind(&k1)
        .bind(&k2)
        .bind(&k3)
        .bind(&k4)
        .bind(&h)
        .bind(&b)
        .bind(&p)
        .execute(&mut *tx)
        .await
        .map_err(db)?;

        let (mut k0, mut k1, mut k2, mut k3) = (vec![], vec![], vec![], vec![]);
        let (h, b, p) = audience_arrays(d.sources.iter(), |(code, day, referrer, domain)| {
            k0.push(*code);
            k1.push(*day);
            k2.push(*referrer);
            k3.push(*domain);
        });
        sqlx::query(&format!(
            "INSERT INTO visit_sources (code, day, referrer_host, short_domain, humans, bots, \
               previews) \
             SELECT * FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::text[], $5::int8[], \
               $6::int8[], $7::int8[]) \
             ON CONFLICT (code, day, referrer_host, short_domain) DO UPDATE SET {}",
            counters.replace("{t}", "visit_sources")
        ))
        .bind(&k0)
        .bind(&k1)
        .bind(&k2)
        .bind(&k3)
        .bind(&h)
        .bind(&b)
        .bind(&p)
        .execute(&mut *tx)
        .await
        .map_err(db)?;

        tx.commit().await.map_err(db)?;
        Ok(outcome(visits.len(), inserted.len()))
    }
}

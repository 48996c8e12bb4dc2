//! Inserting a batch of raw visits: binary `COPY` into a temporary table, or one `INSERT` over
//! `UNNEST` of column arrays, returning the rows actually inserted.

use super::copy::{self, at_ms, COPY_VISITS};
use chrono::{DateTime, Utc};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::rollup::{AllLinks, Folding};
use sqlx::{Postgres, Row, Transaction};
use std::collections::HashSet;

/// Columns of one batch of visits, as arrays borrowing the visits' text (no copy per string).
#[derive(Default)]
pub(super) struct VisitColumns<'a> {
    event_id: Vec<&'a str>,
    code: Vec<&'a str>,
    visited_at: Vec<DateTime<Utc>>,
    status: Vec<Option<i16>>,
    ip: Vec<Option<&'a str>>,
    visitor: Vec<&'a [u8]>,
    agent_id: Vec<Option<i64>>,
    browser: Vec<Option<&'a str>>,
    browser_version: Vec<Option<&'a str>>,
    os: Vec<Option<&'a str>>,
    os_version: Vec<Option<&'a str>>,
    device: Vec<&'static str>,
    audience: Vec<&'static str>,
    agent: Vec<Option<&'a str>>,
    country: Vec<Option<&'a str>>,
    region: Vec<Option<&'a str>>,
    city: Vec<Option<&'a str>>,
    isp: Vec<Option<&'a str>>,
    referrer_host: Vec<Option<&'a str>>,
    short_domain: Vec<Option<&'a str>>,
    language: Vec<Option<&'a str>>,
    rule: Vec<Option<&'a str>>,
    reasons: Vec<i16>,
}

impl<'a> VisitColumns<'a> {
    fn of(visits: &[&'a Visit]) -> Self {
        let mut c = VisitColumns::default();
        for v in visits {
            c.event_id.push(&v.event_id);
            c.code.push(&v.code);
            c.visited_at.push(at_ms(v.time_ms));
            c.status.push(v.status.and_then(|s| i16::try_from(s).ok()));
            c.ip.push(v.ip.as_deref());
            c.visitor.push(&v.visitor);
            c.agent_id.push(v.user_agent_id);
            c.browser.push(v.agent.browser.as_deref());
            c.browser_version.push(v.agent.browser_version.as_deref());
            c.os.push(v.agent.os.as_deref());
            c.os_version.push(v.agent.os_version.as_deref());
            c.device.push(v.agent.device.as_str());
            c.audience.push(v.agent.audience.as_str());
            c.agent.push(v.agent.agent_label);
            c.country.push(v.country.as_deref());
            c.region.push(v.region.as_deref());
            c.city.push(v.city.as_deref());
            c.isp.push(v.isp.as_deref());
            c.referrer_host.push(v.referrer_host.as_deref());
            c.short_domain.push(v.short_domain.as_deref());
            c.language.push(v.language.as_deref());
            c.rule.push(v.rule.as_deref());
            // Eight bits in use: a SMALLINT holds them.
            c.reasons.push(v.reasons.0 as i16);
        }
        c
    }
}

pub(super) const INSERT_VISITS: &str =
    "INSERT INTO visits (event_id, code, visited_at, status, ip, visitor, \
       agent_id, browser, browser_version, os, os_version, device, audience, agent, country, \
       region, city, isp, referrer_host, short_domain, language, rule, reasons) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::int2[], \
       $5::text[], $6::bytea[], $7::int8[], $8::text[], $9::text[], $10::text[], \
       $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], \
       $17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::text[], $23::int2[]) \
     ON CONFLICT (event_id, visited_at) DO NOTHING";

/// The insert of `c` into `visits` (`sql`: [`INSERT_VISITS`], perhaps with `RETURNING`).
pub(super) fn visits_insert<'q>(
    sql: &'q str,
    c: &'q VisitColumns<'q>,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sql)
        .bind(&c.event_id)
        .bind(&c.code)
        .bind(&c.visited_at)
        .bind(&c.status)
        .bind(&c.ip)
        .bind(&c.visitor)
        .bind(&c.agent_id)
        .bind(&c.browser)
        .bind(&c.browser_version)
        .bind(&c.os)
        .bind(&c.os_version)
        .bind(&c.device)
        .bind(&c.audience)
        .bind(&c.agent)
        .bind(&c.country)
        .bind(&c.region)
        .bind(&c.city)
        .bind(&c.isp)
        .bind(&c.referrer_host)
        .bind(&c.short_domain)
        .bind(&c.language)
        .bind(&c.rule)
        .bind(&c.reasons)
}

/// A batch's visits once inserted: those that went in (all of them unless some were stored by an
/// earlier delivery) and their rollup deltas, new visitors not yet credited.
pub(super) struct Inserted<'v> {
    pub(super) visits: Vec<&'v Visit>,
    pub(super) deltas: Folding<'v>,
}

/// Inserts visits (ids distinct within `visits`) unless already stored. First with binary `COPY`
/// inside a savepoint, folding the rollups while the server inserts (the rule: redelivery is
/// rare, and every row goes in). When one is already there the copy fails on the primary key,
/// is rolled back to the savepoint, and the visits go in again with `INSERT ... ON CONFLICT DO
/// NOTHING RETURNING event_id`, which says which ones were new.
pub(super) async fn insert_visits<'v>(
    tx: &mut Transaction<'static, Postgres>,
    visits: &[&'v Visit],
    all_links: &'v AllLinks,
    count_bots: bool,
) -> StorageResult<Inserted<'v>> {
    let data = copy::encode(visits);
    sqlx::query("SAVEPOINT visits_batch")
        .execute(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    let mut copy = tx
        .copy_in_raw(COPY_VISITS)
        .await
        .map_err(StorageError::classify)?;
    copy.send(data).await.map_err(StorageError::classify)?;
    // The server is inserting the rows now, the answer comes after CopyDone: fold meanwhile.
    let deltas = folded(visits, all_links, count_bots);
    match copy.finish().await {
        Ok(_) => {
            sqlx::query("RELEASE SAVEPOINT visits_batch")
                .execute(&mut **tx)
                .await
                .map_err(StorageError::classify)?;
            return Ok(Inserted {
                visits: visits.to_vec(),
                deltas,
            });
        }
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {}
        Err(e) => return Err(StorageError::classify(e)),
    }
    sqlx::query("ROLLBACK TO SAVEPOINT visits_batch")
        .execute(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    let c = VisitColumns::of(visits);
    let returning = format!("{INSERT_VISITS} RETURNING event_id");
    let ids: HashSet<String> = visits_insert(&returning, &c)
        .fetch_all(&mut **tx)
        .await
        .map_err(StorageError::classify)?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    let visits: Vec<&Visit> = visits
        .iter()
        .filter(|v| ids.contains(&v.event_id))
        .copied()
        .collect();
    let deltas = folded(&visits, all_links, count_bots);
    Ok(Inserted { visits, deltas })
}

/// `visits` folded, no visitor credited yet (the server says which are new after).
fn folded<'v>(visits: &[&'v Visit], all_links: &'v AllLinks, count_bots: bool) -> Folding<'v> {
    let mut deltas = Folding::new(all_links, count_bots);
    deltas.add(visits, Default::default());
    deltas
}

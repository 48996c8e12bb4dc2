//! Hindsight's corrections on MariaDB/MySQL (`crate::corrections`). Neither has
//! `UPDATE ... RETURNING` (MySQL no `DELETE ... RETURNING` either), so which visits a statement
//! changes is read first, by a locking read that holds those rows until the transaction ends:
//! per verdict transition (a batch has few: a sweep's visits all go from people to scanners),
//! one read of the visits still counted as the correction starts from and one `UPDATE` of
//! exactly those; then one read of the visitors whose first visit one of them was, and one
//! `DELETE` of exactly those.

use super::convert::{at_ms, db};
use crate::corrections::{leaves_people, rounds, Applied};
use shortlink_store::sql::IN_LIST;
use shortlink_store::StorageResult;
use shortlink_visits::hindsight::Correction;
use sqlx::{MySql, Row, Transaction};
use std::collections::{BTreeMap, HashSet};

/// Where a correction's visit goes from and to: (was, audience, device, reasons).
type Transition<'c> = (&'c str, &'c str, &'c str, u16);

/// Applies `corrections` in the batch's transaction; answers those that changed a visit.
pub(super) async fn apply<'c>(
    tx: &mut Transaction<'static, MySql>,
    corrections: &'c [Correction],
) -> StorageResult<Vec<Applied<'c>>> {
    let mut applied = Vec::with_capacity(corrections.len());
    for round in rounds(corrections) {
        let mut transitions: BTreeMap<Transition<'c>, Vec<&'c Correction>> = BTreeMap::new();
        for c in round {
            let to = (
                c.after.agent.audience.as_str(),
                c.after.agent.device.as_str(),
            );
            let key = (
                c.before.agent.audience.as_str(),
                to.0,
                to.1,
                c.after.reasons.0,
            );
            transitions.entry(key).or_default().push(c);
        }
        let mut changed = Vec::new();
        for (transition, corrections) in &transitions {
            for chunk in corrections.chunks(IN_LIST) {
                changed.extend(change(tx, *transition, chunk).await?);
            }
        }
        let leaving: Vec<&Correction> = (changed.iter().copied())
            .filter(|c| leaves_people(c))
            .collect();
        let mut forgotten = HashSet::new();
        for chunk in leaving.chunks(IN_LIST) {
            forgotten.extend(forget(tx, chunk).await?);
        }
        applied.extend(changed.into_iter().map(|correction| Applied {
            correction,
            first_visit: forgotten.contains(&correction.before.event_id.as_str()),
        }));
    }
    Ok(applied)
}

/// Changes those of `chunk` (all of one `transition`) still counted as they were; answers them.
async fn change<'c>(
    tx: &mut Transaction<'static, MySql>,
    (was, audience, device, reasons): Transition<'_>,
    chunk: &[&'c Correction],
) -> StorageResult<Vec<&'c Correction>> {
    let ids = vec!["?"; chunk.len()].join(", ");
    let lock = format!(
        "SELECT event_id FROM visits WHERE event_id IN ({ids}) AND audience = ? FOR UPDATE"
    );
    let found = (chunk.iter())
        .fold(sqlx::query(&lock), |q, c| {
            q.bind(c.before.event_id.as_str())
        })
        .bind(was)
        .fetch_all(&mut **tx)
        .await
        .map_err(db)?;
    let found: HashSet<Vec<u8>> = (found.iter().map(|row| row.try_get(0)))
        .collect::<Result<_, _>>()
        .map_err(db)?;
    let changed: Vec<&Correction> = (chunk.iter().copied())
        .filter(|c| found.contains(c.before.event_id.as_bytes()))
        .collect();
    if changed.is_empty() {
        return Ok(changed);
    }
    let update = format!(
        "UPDATE visits SET audience = ?, device = ?, reasons = ? WHERE event_id IN ({})",
        vec!["?"; changed.len()].join(", ")
    );
    let query = sqlx::query(&update)
        .bind(audience)
        .bind(device)
        .bind(i64::from(reasons));
    (changed.iter())
        .fold(query, |q, c| q.bind(c.before.event_id.as_str()))
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    Ok(changed)
}

/// Takes the visitors of `leaving` whose first visit it was out of their links' sets; answers
/// the event ids of those visits.
async fn forget<'c>(
    tx: &mut Transaction<'static, MySql>,
    leaving: &[&'c Correction],
) -> StorageResult<Vec<&'c str>> {
    // An OR of primary-key points, which the range optimizer reads as such. The time comes back
    // as Unix ms (DATETIME holds UTC here): two visits of one visitor in a round are told apart.
    let lock = format!(
        "SELECT code, visitor, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', first_seen) DIV 1000 \
         FROM link_visitors WHERE {} FOR UPDATE",
        vec!["(code = ? AND visitor = ? AND first_seen = ?)"; leaving.len()].join(" OR ")
    );
    let found = (leaving.iter())
        .fold(sqlx::query(&lock), |q, c| {
            let v = &c.before;
            q.bind(v.code.as_str())
                .bind(v.visitor.as_slice())
                .bind(at_ms(v.time_ms))
        })
        .fetch_all(&mut **tx)
        .await
        .map_err(db)?;
    let mut keys: HashSet<(Vec<u8>, Vec<u8>, i64)> = HashSet::new();
    for row in &found {
        keys.insert((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
    }
    let mut first: Vec<&'c Correction> = Vec::new();
    for &c in leaving {
        let v = &c.before;
        let key = (v.code.as_bytes().to_vec(), v.visitor.to_vec(), v.time_ms);
        // Each row once: of two visits with one visitor and time, the first leaves it.
        if keys.remove(&key) {
            first.push(c);
        }
    }
    if first.is_empty() {
        return Ok(Vec::new());
    }
    let delete = format!(
        "DELETE FROM link_visitors WHERE {}",
        vec!["(code = ? AND visitor = ?)"; first.len()].join(" OR ")
    );
    (first.iter())
        .fold(sqlx::query(&delete), |q, c| {
            q.bind(c.before.code.as_str())
                .bind(c.before.visitor.as_slice())
        })
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    Ok(first
        .into_iter()
        .map(|c| c.before.event_id.as_str())
        .collect())
}

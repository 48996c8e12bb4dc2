//! Hindsight's corrections on PostgreSQL (`crate::corrections`): a round's visits change in one
//! `UPDATE ... FROM UNNEST(...)` and their visitors leave in one `DELETE ... USING UNNEST(...)`,
//! the keys bound as arrays (one statement text for any number of them, prepared once). Each
//! statement answers the ordinals of the rows it changed, so the counts move for exactly those.

use super::copy::at_ms;
use crate::corrections::{leaves_people, rounds, Applied};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::hindsight::Correction;
use sqlx::{Postgres, Transaction};

/// Changes each visit still counted as `was`; answers the ordinals (from 1) of those changed.
const UPDATE_VISITS: &str = "UPDATE visits v \
     SET audience = c.audience, device = c.device, reasons = c.reasons \
     FROM UNNEST($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::int2[]) \
     WITH ORDINALITY AS c(event_id, visited_at, was, audience, device, reasons, i) \
     WHERE v.event_id = c.event_id AND v.visited_at = c.visited_at AND v.audience = c.was \
     RETURNING c.i";

/// Takes each visitor out of its link's set where the visit given was its first; answers the
/// ordinals (from 1) of those taken out.
const FORGET_VISITORS: &str = "DELETE FROM link_visitors l \
     USING UNNEST($1::text[], $2::bytea[], $3::timestamptz[]) \
     WITH ORDINALITY AS c(code, visitor, first_seen, i) \
     WHERE l.code = c.code AND l.visitor = c.visitor AND l.first_seen = c.first_seen \
     RETURNING c.i";

/// Applies `corrections` in the batch's transaction; answers those that changed a visit.
pub(super) async fn apply<'c>(
    tx: &mut Transaction<'static, Postgres>,
    corrections: &'c [Correction],
) -> StorageResult<Vec<Applied<'c>>> {
    let mut applied = Vec::with_capacity(corrections.len());
    for round in rounds(corrections) {
        let changed = picked(&round, update(tx, &round).await?);
        let leaving: Vec<usize> = (0..changed.len())
            .filter(|&k| leaves_people(changed[k]))
            .collect();
        let visits: Vec<&Correction> = leaving.iter().map(|&k| changed[k]).collect();
        let mut first_visit = vec![false; changed.len()];
        for k in picked(&leaving, forget(tx, &visits).await?) {
            first_visit[k] = true;
        }
        applied.extend(
            (changed.into_iter().zip(first_visit)).map(|(correction, first_visit)| Applied {
                correction,
                first_visit,
            }),
        );
    }
    Ok(applied)
}

/// The members of `round` named by 1-based `ordinals`, in round order.
fn picked<T: Copy>(round: &[T], mut ordinals: Vec<i64>) -> Vec<T> {
    ordinals.sort_unstable();
    (ordinals.into_iter())
        .filter_map(|i| round.get(usize::try_from(i - 1).ok()?).copied())
        .collect()
}

async fn update(
    tx: &mut Transaction<'static, Postgres>,
    round: &[&Correction],
) -> StorageResult<Vec<i64>> {
    let (mut ids, mut times, mut was) = (Vec::new(), Vec::new(), Vec::new());
    let (mut audiences, mut devices, mut reasons) = (Vec::new(), Vec::new(), Vec::new());
    for Correction { before, after } in round.iter().copied() {
        ids.push(before.event_id.as_str());
        times.push(at_ms(before.time_ms));
        was.push(before.agent.audience.as_str());
        audiences.push(after.agent.audience.as_str());
        devices.push(after.agent.device.as_str());
        reasons.push(after.reasons.0 as i16);
    }
    sqlx::query_scalar(UPDATE_VISITS)
        .bind(&ids)
        .bind(&times)
        .bind(&was)
        .bind(&audiences)
        .bind(&devices)
        .bind(&reasons)
        .fetch_all(&mut **tx)
        .await
        .map_err(StorageError::classify)
}

async fn forget(
    tx: &mut Transaction<'static, Postgres>,
    leaving: &[&Correction],
) -> StorageResult<Vec<i64>> {
    if leaving.is_empty() {
        return Ok(Vec::new());
    }
    let (mut codes, mut visitors, mut times) = (Vec::new(), Vec::new(), Vec::new());
    for c in leaving {
        codes.push(c.before.code.as_str());
        visitors.push(c.before.visitor.as_slice());
        times.push(at_ms(c.before.time_ms));
    }
    sqlx::query_scalar(FORGET_VISITORS)
        .bind(&codes)
        .bind(&visitors)
        .bind(&times)
        .fetch_all(&mut **tx)
        .await
        .map_err(StorageError::classify)
}

//! A chunk of delivery receipts in two statements over `UNNEST` of column arrays, each
//! answering what it wrote: the receipts `ON CONFLICT DO NOTHING RETURNING` (those not
//! returned were stored before: the duplicates), then the messages' rows in one upsert whose
//! `DO UPDATE` applies the rule of a later final state ([`supersedes`]) to the row under its
//! lock. This replaces a read of each table by its keys before the writes: PostgreSQL planned
//! those 500-key reads as sequential scans once the tables were analyzed (a hashed `IN` list is
//! cheaper by its estimate than 500 index probes), time growing with the table
//! (bench/results/deliveries-2026-11-28b.md). Fixed statement texts: one plan for any chunk.
//!
//! [`supersedes`]: shortlink_visits::deliveries::model::supersedes

use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::model::{DeliveryState, MessageRow, Receipt, UpsertedMessage};
use sqlx::{Postgres, Row, Transaction};
use std::collections::HashSet;

const INSERT_RECEIPTS: &str = "INSERT INTO delivery_receipts (workspace_id, message_id, code, \
    state, error_code, error_text, carrier, at_ms, received_ms, gateway) \
    SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
    $7::text[], $8::bigint[], $9::bigint[], $10::text[]) \
    ON CONFLICT (workspace_id, message_id, state) DO NOTHING RETURNING message_id, state";

/// `$10` is the final states: `excluded` wins over `m` as in `supersedes`.
const UPSERT_MESSAGES: &str = "INSERT INTO delivery_messages AS m (workspace_id, message_id, \
    code, short_domain, state, error_code, carrier, at_ms, received_ms) \
    SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
    $7::text[], $8::bigint[], $9::bigint[]) \
    ON CONFLICT (workspace_id, message_id) DO UPDATE SET \
    carrier = COALESCE(excluded.carrier, m.carrier), \
    short_domain = COALESCE(m.short_domain, excluded.short_domain), \
    received_ms = excluded.received_ms, \
    state = CASE WHEN {WINS} THEN excluded.state ELSE m.state END, \
    error_code = CASE WHEN {WINS} THEN excluded.error_code ELSE m.error_code END, \
    at_ms = CASE WHEN {WINS} THEN excluded.at_ms ELSE m.at_ms END \
    RETURNING message_id, state, at_ms, xmax = 0 AS inserted";

/// A final state supersedes a non-final one, never the reverse; of the same kind the later.
const WINS: &str = "(CASE WHEN (excluded.state = ANY($10)) = (m.state = ANY($10)) \
    THEN excluded.at_ms > m.at_ms ELSE excluded.state = ANY($10) END)";

fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn state_of(text: &str) -> StorageResult<DeliveryState> {
    DeliveryState::parse(text)
        .ok_or_else(|| StorageError::Corrupt(format!("unknown delivery state {text:?}")))
}

/// Inserts the receipts not stored yet (their keys must be distinct): the keys that went in.
pub(super) async fn insert_receipts(
    tx: &mut Transaction<'static, Postgres>,
    workspace: WorkspaceId,
    receipts: &[Receipt],
) -> StorageResult<HashSet<(String, DeliveryState)>> {
    let column =
        |f: fn(&Receipt) -> Option<&str>| -> Vec<Option<&str>> { receipts.iter().map(f).collect() };
    let rows = sqlx::query(INSERT_RECEIPTS)
        .bind(workspace.get())
        .bind(column(|r| Some(&r.message_id)))
        .bind(column(|r| Some(&r.code)))
        .bind(column(|r| Some(r.state.as_str())))
        .bind(column(|r| r.error_code.as_deref()))
        .bind(column(|r| r.error_text.as_deref()))
        .bind(column(|r| r.carrier.as_deref()))
        .bind(receipts.iter().map(|r| ms(r.at)).collect::<Vec<_>>())
        .bind(
            receipts
                .iter()
                .map(|r| ms(r.received_at))
                .collect::<Vec<_>>(),
        )
        .bind(column(|r| Some(r.gateway.as_str())))
        .fetch_all(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    rows.iter()
        .map(|row| {
            let state: &str = row.try_get("state").map_err(StorageError::classify)?;
            Ok((
                row.try_get("message_id").map_err(StorageError::classify)?,
                state_of(state)?,
            ))
        })
        .collect()
}

/// Inserts or supersedes the messages' rows (their ids must be distinct): each row after.
pub(super) async fn upsert_messages(
    tx: &mut Transaction<'static, Postgres>,
    workspace: WorkspaceId,
    messages: &[MessageRow],
) -> StorageResult<Vec<UpsertedMessage>> {
    let column = |f: fn(&MessageRow) -> Option<&str>| -> Vec<Option<&str>> {
        messages.iter().map(f).collect()
    };
    let finals: Vec<&str> = (DeliveryState::ALL.into_iter())
        .filter(|state| state.is_final())
        .map(DeliveryState::as_str)
        .collect();
    let rows = sqlx::query(&UPSERT_MESSAGES.replace("{WINS}", WINS))
        .bind(workspace.get())
        .bind(column(|m| Some(&m.message_id)))
        .bind(column(|m| Some(&m.code)))
        .bind(column(|m| m.short_domain.as_deref()))
        .bind(column(|m| Some(m.state.as_str())))
        .bind(column(|m| m.error_code.as_deref()))
        .bind(column(|m| m.carrier.as_deref()))
        .bind(messages.iter().map(|m| ms(m.at)).collect::<Vec<_>>())
        .bind(messages.iter().map(|m| ms(m.received)).collect::<Vec<_>>())
        .bind(finals)
        .fetch_all(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    rows.iter()
        .map(|row| {
            let get = |e| StorageError::classify(e);
            let state: &str = row.try_get("state").map_err(get)?;
            Ok(UpsertedMessage {
                message_id: row.try_get("message_id").map_err(get)?,
                state: state_of(state)?,
                at: DateTime::from_timestamp_millis(row.try_get("at_ms").map_err(get)?)
                    .unwrap_or_default(),
                inserted: row.try_get("inserted").map_err(get)?,
            })
        })
        .collect()
}

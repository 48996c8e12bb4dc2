//! A chunk of receipts where the backend's writes answer what they wrote (PostgreSQL,
//! `store/postgres/receipts.rs`): the chunk's distinct receipts are inserted first, `ON
//! CONFLICT DO NOTHING`, and the ones that did not go in are the duplicates; then every message
//! the chunk touched is upserted in one statement that supersedes the stored row by the rule of
//! [`supersedes`](super::model::supersedes) under its lock, answering the row after.
//!
//! The answers stay those of one receipt after another. A message with one new receipt in the
//! chunk and no duplicate answers the row its upsert returns (the stored row, if any, played
//! before the receipt, as one by one). A message the chunk says more of (two new receipts, or a
//! duplicate, whose answer needs the state before the chunk) is "played": its row is read and
//! locked first, the chunk is played on it in memory, and the upsert must give back exactly the
//! row played; anything else (a row another writer inserted meanwhile) is a lost race, and the
//! caller redoes the chunk one receipt at a time (`store.rs`).

use super::chunk::{key, Message};
use crate::{SqlVisitStore, VisitDialect};
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::Dialect;
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::model::{
    DeliveryState, MessageRow, NewReceipt, Receipt, Recorded, Refusal,
};
use sqlx::Transaction;
use std::collections::{HashMap, HashSet};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// What inserting the chunk's receipts first found.
pub(super) struct InsertedFirst {
    inserted: HashSet<(String, DeliveryState)>,
    /// Messages with a receipt already stored (before the chunk, or earlier in it).
    duplicates: HashSet<String>,
    /// Messages whose rows are read before the chunk is played: see the module's comment.
    played: HashSet<String>,
}

impl InsertedFirst {
    pub(super) fn duplicate_ids(&self) -> Vec<&str> {
        self.duplicates.iter().map(String::as_str).collect()
    }

    pub(super) fn played_ids(&self) -> Vec<&str> {
        self.played.iter().map(String::as_str).collect()
    }

    /// The stored receipts read of the duplicates' messages, less those this chunk inserted
    /// (played as new, in their order).
    pub(super) fn forget_inserted(&self, stored: &mut HashMap<(String, DeliveryState), Receipt>) {
        stored.retain(|_, receipt| {
            !(self.inserted).contains(&(receipt.message_id.clone(), receipt.state))
        });
    }

    /// A receipt the chunk plays as new must be one its insert wrote.
    pub(super) fn check_inserted(&self, receipt: &Receipt) -> StorageResult<()> {
        match (self.inserted).contains(&(receipt.message_id.clone(), receipt.state)) {
            true => Ok(()),
            false => Err(StorageError::Conflict),
        }
    }
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// Inserts the chunk's distinct receipts of known links, if the backend answers which went
    /// in (`None` otherwise: nothing was written).
    pub(super) async fn insert_first(
        dialect: &V,
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        chunk: &[NewReceipt],
        resolved: &[Option<String>],
        now: DateTime<Utc>,
    ) -> StorageResult<Option<InsertedFirst>> {
        let known = || {
            (chunk.iter().zip(resolved))
                .filter_map(|(new, code)| code.as_ref().map(|code| (new, code)))
        };
        let mut seen = HashSet::new();
        let mut distinct: Vec<Receipt> = known()
            .filter(|(new, _)| seen.insert((key::<V>(&new.message_id), new.state)))
            .map(|(new, code)| new.stored(code.clone(), now))
            .collect();
        // In key order, as the messages' upsert: see there.
        distinct.sort_unstable_by(|a, b| (&a.message_id, a.state).cmp(&(&b.message_id, b.state)));
        let Some(inserted) = dialect.insert_receipts(tx, workspace, &distinct).await? else {
            return Ok(None);
        };
        let mut new_receipts: HashMap<&str, usize> = HashMap::new();
        let mut duplicates = HashSet::new();
        seen.clear();
        for (new, _) in known() {
            let id = key::<V>(&new.message_id);
            let first_in_chunk = seen.insert((id, new.state));
            if first_in_chunk && inserted.contains(&(new.message_id.clone(), new.state)) {
                *new_receipts.entry(id).or_default() += 1;
            } else {
                duplicates.insert(id.to_owned());
            }
        }
        let played = (new_receipts.into_iter())
            .filter(|(_, count)| *count > 1)
            .map(|(id, _)| id.to_owned())
            .chain(duplicates.iter().cloned())
            .collect();
        Ok(Some(InsertedFirst {
            inserted,
            duplicates,
            played,
        }))
    }

    /// Upserts the messages the chunk changed and completes the answers of those not played
    /// with the rows the upsert returned.
    pub(super) async fn upsert_played(
        dialect: &V,
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        first: &InsertedFirst,
        messages: HashMap<String, (String, Message)>,
        chunk: &[NewReceipt],
        answers: &mut [Result<Recorded, Refusal>],
    ) -> StorageResult<()> {
        let mut expected = HashMap::new();
        let mut rows = Vec::new();
        for (id, (message_id, message)) in messages {
            if !message.changed {
                continue;
            }
            if first.played.contains(&id) {
                expected.insert(
                    message_id.clone(),
                    (message.state, message.at, message.stored),
                );
            }
            rows.push(MessageRow {
                message_id,
                code: message.code,
                short_domain: message.short_domain,
                state: message.state,
                error_code: message.error_code,
                carrier: message.carrier,
                at: message.at,
                received: message.received,
            });
        }
        if rows.is_empty() {
            return Ok(());
        }
        // Rows locked in key order: two requests' chunks of the same messages then wait for
        // each other instead of deadlocking.
        rows.sort_unstable_by(|a, b| a.message_id.cmp(&b.message_id));
        let upserted = dialect.upsert_messages(tx, workspace, &rows).await?;
        let mut after = HashMap::with_capacity(upserted.len());
        for row in upserted {
            if let Some(&(state, at, stored)) = expected.get(&row.message_id) {
                if (row.state, row.at, row.inserted) != (state, at, !stored) {
                    return Err(StorageError::Conflict);
                }
            }
            after.insert(row.message_id, row.state);
        }
        if after.len() != rows.len() {
            return Err(StorageError::Corrupt(
                "the messages' upsert did not return every row".into(),
            ));
        }
        for (new, answer) in chunk.iter().zip(answers) {
            let Ok(recorded) = answer else { continue };
            if !recorded.duplicate && !first.played.contains(key::<V>(&new.message_id)) {
                recorded.current = after[&new.message_id];
            }
        }
        Ok(())
    }
}

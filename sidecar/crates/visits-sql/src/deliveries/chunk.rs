//! A chunk of receipts in set statements, inside the chunk's one transaction: the links the
//! chunk names in one or two reads, the receipts already stored in one, the messages' current
//! rows in one locking read; then the chunk is played in order in memory, by the same rule as
//! one receipt alone ([`supersedes`]), and written back in one multi-row insert of the new
//! receipts, one of the new messages and one upsert of the messages already there. A handful
//! of round trips per chunk instead of five per receipt.
//!
//! A concurrent writer of the same keys makes an insert fail with a unique violation (or the
//! locking reads deadlock): the caller then rolls the chunk back and redoes it one receipt at a
//! time, as before. An existing message row is only ever overwritten while this transaction
//! holds its lock, so no other writer's state is lost.

use super::store::{ms, receipt_values, state_of, COLUMNS};
use crate::sql::{db, marks};
use crate::{SqlVisitStore, VisitDialect};
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{Backend, StorageResult};
use shortlink_visits::deliveries::model::at_ms;
use shortlink_visits::deliveries::model::{
    supersedes, DeliveryState, LinkRef, NewReceipt, Receipt, Recorded, Refusal,
};
use sqlx::Transaction;
use std::collections::HashMap;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

const MESSAGE_COLUMNS: &str =
    "message_id, code, short_domain, state, error_code, carrier, at_ms, received_ms";

/// A key as the database compares it: MariaDB's `utf8mb4_bin` pads (trailing spaces do not
/// count), the others compare bytes.
pub(super) fn key<V: VisitDialect>(text: &str) -> &str {
    match V::Sql::BACKEND {
        Backend::Mysql => text.trim_end_matches(' '),
        _ => text,
    }
}

/// A message's row as the chunk leaves it.
pub(super) struct Message {
    pub(super) code: String,
    pub(super) short_domain: Option<String>,
    pub(super) state: DeliveryState,
    pub(super) error_code: Option<String>,
    pub(super) carrier: Option<String>,
    pub(super) at: DateTime<Utc>,
    pub(super) received: DateTime<Utc>,
    /// Read from the database (then upserted under its lock), or new (then inserted).
    pub(super) stored: bool,
    pub(super) changed: bool,
}

impl Message {
    fn values(&self, workspace: WorkspaceId, message_id: &str) -> [Value; 9] {
        [
            Value::Int(workspace.get()),
            Value::Text(message_id.to_owned()),
            Value::Text(self.code.clone()),
            Value::OptText(self.short_domain.clone()),
            Value::Text(self.state.as_str().into()),
            Value::OptText(self.error_code.clone()),
            Value::OptText(self.carrier.clone()),
            ms(self.at),
            ms(self.received),
        ]
    }

    /// What one more (new) receipt does to the row: the same as the one-by-one update.
    fn apply(&mut self, receipt: &Receipt, short_domain: &Option<String>) {
        if receipt.carrier.is_some() {
            self.carrier.clone_from(&receipt.carrier);
        }
        // The first domain known stays (store.rs, `write_message`).
        if self.short_domain.is_none() {
            self.short_domain.clone_from(short_domain);
        }
        self.received = receipt.received_at;
        if supersedes(receipt.state, receipt.at, self.state, self.at) {
            self.state = receipt.state;
            self.error_code.clone_from(&receipt.error_code);
            self.at = receipt.at;
        }
        self.changed = true;
    }
}

/// `VALUES (?, …), (?, …)` of `rows` rows of `width` values each, appended to `head`.
fn multi_row(head: &str, width: usize, values: Vec<Value>) -> Statement {
    let row = format!("({})", marks(width));
    let rows = vec![row.as_str(); values.len() / width].join(", ");
    statement(&format!("{head} VALUES {rows}"), values)
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// The code each of `links` names in `workspace`, in one read per kind of reference.
    async fn chunk_links(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        links: &[&LinkRef],
    ) -> StorageResult<(HashMap<String, String>, HashMap<(String, String), String>)> {
        let ws = Value::Int(workspace.get());
        let mut codes: Vec<&str> = Vec::new();
        let mut recipients: Vec<(&str, &str)> = Vec::new();
        for link in links {
            match link {
                LinkRef::Code(code) => codes.push(code),
                LinkRef::Recipient {
                    campaign,
                    recipient_ref,
                } => recipients.push((campaign, recipient_ref)),
            }
        }
        codes.sort_unstable();
        codes.dedup();
        recipients.sort_unstable();
        recipients.dedup();
        let mut found = HashMap::new();
        if !codes.is_empty() {
            let query = statement(
                &format!(
                    "SELECT code FROM links WHERE workspace_id = ? AND code IN ({})",
                    marks(codes.len())
                ),
                std::iter::once(ws.clone()).chain(codes.iter().map(|c| Value::Text(c.to_string()))),
            );
            for row in Db::<V>::fetch_all(&mut **tx, query).await.map_err(db)? {
                let code = V::Sql::read_text(&row, "code")?;
                found.insert(key::<V>(&code).to_owned(), code);
            }
        }
        let mut newest = HashMap::new();
        if !recipients.is_empty() {
            let pairs = vec!["(campaign = ? AND recipient_ref = ?)"; recipients.len()].join(" OR ");
            // Oldest first, so that the newest of a recipient's links (the one-by-one read's
            // `ORDER BY created_at DESC, code DESC LIMIT 1`) is the one kept.
            let query = statement(
                &format!(
                    "SELECT code, campaign, recipient_ref FROM links WHERE workspace_id = ? \
                     AND ({pairs}) ORDER BY created_at, code"
                ),
                std::iter::once(ws).chain(recipients.iter().flat_map(|(campaign, recipient)| {
                    [
                        Value::Text(campaign.to_string()),
                        Value::Text(recipient.to_string()),
                    ]
                })),
            );
            for row in Db::<V>::fetch_all(&mut **tx, query).await.map_err(db)? {
                let campaign = V::Sql::read_text(&row, "campaign")?;
                let recipient = V::Sql::read_text(&row, "recipient_ref")?;
                newest.insert(
                    (
                        key::<V>(&campaign).to_owned(),
                        key::<V>(&recipient).to_owned(),
                    ),
                    V::Sql::read_text(&row, "code")?,
                );
            }
        }
        Ok((found, newest))
    }

    /// The receipts of `message_ids` already stored, by (message id, state).
    async fn chunk_receipts(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        message_ids: &[&str],
    ) -> StorageResult<HashMap<(String, DeliveryState), Receipt>> {
        let query = statement(
            &format!(
                "SELECT {COLUMNS} FROM delivery_receipts WHERE workspace_id = ? \
                 AND message_id IN ({})",
                marks(message_ids.len())
            ),
            std::iter::once(Value::Int(workspace.get()))
                .chain(message_ids.iter().map(|m| Value::Text(m.to_string()))),
        );
        let mut out = HashMap::new();
        for row in Db::<V>::fetch_all(&mut **tx, query).await.map_err(db)? {
            let receipt = Self::receipt(&row)?;
            out.insert(
                (key::<V>(&receipt.message_id).to_owned(), receipt.state),
                receipt,
            );
        }
        Ok(out)
    }

    /// The current rows of `message_ids`, locked until the chunk commits.
    async fn chunk_messages(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        message_ids: &[&str],
    ) -> StorageResult<HashMap<String, (String, Message)>> {
        let query = statement(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM delivery_messages WHERE workspace_id = ? \
                 AND message_id IN ({}){}",
                marks(message_ids.len()),
                V::Sql::FOR_UPDATE
            ),
            std::iter::once(Value::Int(workspace.get()))
                .chain(message_ids.iter().map(|m| Value::Text(m.to_string()))),
        );
        let mut out = HashMap::new();
        for row in Db::<V>::fetch_all(&mut **tx, query).await.map_err(db)? {
            let int = |c| Db::<V>::int(&row, c).map_err(db);
            let message_id = V::Sql::read_text(&row, "message_id")?;
            let message = Message {
                code: V::Sql::read_text(&row, "code")?,
                short_domain: V::Sql::read_opt_text(&row, "short_domain")?,
                state: state_of(&V::Sql::read_text(&row, "state")?)?,
                error_code: V::Sql::read_opt_text(&row, "error_code")?,
                carrier: V::Sql::read_opt_text(&row, "carrier")?,
                at: at_ms(int("at_ms")?),
                received: at_ms(int("received_ms")?),
                stored: true,
                changed: false,
            };
            out.insert(key::<V>(&message_id).to_owned(), (message_id, message));
        }
        Ok(out)
    }

    /// Each receipt's link code in the workspace, `None` for a link it does not hold.
    async fn resolve_codes(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        chunk: &[NewReceipt],
    ) -> StorageResult<Vec<Option<String>>> {
        let links: Vec<&LinkRef> = chunk.iter().map(|new| &new.link).collect();
        let (codes, recipients) = Self::chunk_links(tx, workspace, &links).await?;
        let code_of = |link: &LinkRef| match link {
            LinkRef::Code(code) => codes.get(key::<V>(code)).cloned(),
            LinkRef::Recipient {
                campaign,
                recipient_ref,
            } => recipients
                .get(&(
                    key::<V>(campaign).to_owned(),
                    key::<V>(recipient_ref).to_owned(),
                ))
                .cloned(),
        };
        Ok(chunk.iter().map(|new| code_of(&new.link)).collect())
    }

    /// A chunk of receipts inside `tx`, answered as [`Self::apply`] would answer each in turn.
    pub(super) async fn apply_chunk(
        dialect: &V,
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        chunk: &[NewReceipt],
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        let resolved = Self::resolve_codes(tx, workspace, chunk).await?;
        let mut message_ids: Vec<&str> = (chunk.iter().zip(&resolved))
            .filter(|(_, code)| code.is_some())
            .map(|(new, _)| new.message_id.as_str())
            .collect();
        message_ids.sort_unstable();
        message_ids.dedup();
        if message_ids.is_empty() {
            return Ok(vec![Err(Refusal::UnknownLink); chunk.len()]);
        }
        // PostgreSQL: the new receipts are inserted first, and only what that leaves unknown is
        // read: the stored duplicates, and the rows of messages the chunk plays more than one
        // receipt of (`returning.rs`). The others read every key first.
        let first = Self::insert_first(dialect, tx, workspace, chunk, &resolved, now).await?;
        let (duplicates, played) = match &first {
            Some(first) => (first.duplicate_ids(), first.played_ids()),
            None => (message_ids.clone(), message_ids),
        };
        let mut receipts = match duplicates.is_empty() {
            true => HashMap::new(),
            false => Self::chunk_receipts(tx, workspace, &duplicates).await?,
        };
        if let Some(first) = &first {
            first.forget_inserted(&mut receipts);
        }
        let mut messages = match played.is_empty() {
            true => HashMap::new(),
            false => Self::chunk_messages(tx, workspace, &played).await?,
        };
        let mut inserts = Vec::new();
        let mut out = Vec::with_capacity(chunk.len());
        for (new, code) in chunk.iter().zip(resolved) {
            let Some(code) = code else {
                out.push(Err(Refusal::UnknownLink));
                continue;
            };
            let message_key = key::<V>(&new.message_id).to_owned();
            if let Some(stored) = receipts.get(&(message_key.clone(), new.state)) {
                let current = messages
                    .get(&message_key)
                    .map_or(stored.state, |(_, message)| message.state);
                out.push(Ok(Recorded {
                    receipt: stored.clone(),
                    duplicate: true,
                    current,
                }));
                continue;
            }
            let receipt = new.stored(code, now);
            if let Some(first) = &first {
                // Stored before this chunk, yet not found by the read: a concurrent writer.
                first.check_inserted(&receipt)?;
            }
            let current = match messages.get_mut(&message_key) {
                Some((_, message)) => {
                    message.apply(&receipt, &new.short_domain);
                    message.state
                }
                None => {
                    let message = Message {
                        code: receipt.code.clone(),
                        short_domain: new.short_domain.clone(),
                        state: receipt.state,
                        error_code: receipt.error_code.clone(),
                        carrier: receipt.carrier.clone(),
                        at: receipt.at,
                        received: receipt.received_at,
                        stored: false,
                        changed: true,
                    };
                    messages.insert(message_key.clone(), (new.message_id.clone(), message));
                    receipt.state
                }
            };
            inserts.push(receipt.clone());
            receipts.insert((message_key, new.state), receipt.clone());
            out.push(Ok(Recorded {
                receipt,
                duplicate: false,
                current,
            }));
        }
        match first {
            Some(first) => {
                Self::upsert_played(dialect, tx, workspace, &first, messages, chunk, &mut out)
                    .await?
            }
            None => Self::write_chunk(tx, workspace, &inserts, messages.into_values()).await?,
        }
        Ok(out)
    }

    /// The chunk's new receipts, new messages and changed messages, a statement each.
    async fn write_chunk(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        receipts: &[Receipt],
        messages: impl Iterator<Item = (String, Message)>,
    ) -> StorageResult<()> {
        let ws = Value::Int(workspace.get());
        if !receipts.is_empty() {
            let values = receipts
                .iter()
                .flat_map(|receipt| receipt_values(&ws, receipt));
            let head = format!("INSERT INTO delivery_receipts (workspace_id, {COLUMNS})");
            let query = multi_row(&head, 10, values.collect());
            Db::<V>::execute(&mut **tx, query).await.map_err(db)?;
        }
        let (mut new, mut changed) = (Vec::new(), Vec::new());
        for (message_id, message) in messages.filter(|(_, message)| message.changed) {
            let values = message.values(workspace, &message_id);
            if message.stored {
                changed.extend(values);
            } else {
                new.extend(values);
            }
        }
        let head = format!("INSERT INTO delivery_messages (workspace_id, {MESSAGE_COLUMNS})");
        // A plain insert: a row another writer inserted meanwhile fails it (the chunk is then
        // redone one by one) rather than being overwritten.
        if !new.is_empty() {
            let query = multi_row(&head, 9, new);
            Db::<V>::execute(&mut **tx, query).await.map_err(db)?;
        }
        // Rows read under this transaction's lock: written over as the chunk left them.
        if !changed.is_empty() {
            let mut query = multi_row(&head, 9, changed);
            query.push(match V::Sql::BACKEND {
                Backend::Mysql => {
                    " ON DUPLICATE KEY UPDATE short_domain = VALUES(short_domain), \
                     state = VALUES(state), error_code = VALUES(error_code), \
                     carrier = VALUES(carrier), at_ms = VALUES(at_ms), \
                     received_ms = VALUES(received_ms)"
                }
                _ => {
                    " ON CONFLICT (workspace_id, message_id) DO UPDATE SET \
                     short_domain = excluded.short_domain, state = excluded.state, \
                     error_code = excluded.error_code, carrier = excluded.carrier, \
                     at_ms = excluded.at_ms, received_ms = excluded.received_ms"
                }
            });
            Db::<V>::execute(&mut **tx, query).await.map_err(db)?;
        }
        Ok(())
    }
}

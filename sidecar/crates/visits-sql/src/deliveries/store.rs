//! Receipts in SQL, written once for every backend's visit store (the same database as the
//! links they name): [`DeliveryStore`], implemented for [`SqlVisitStore`]. Times are Unix ms.
//!
//! A receipt is written in one transaction with its message's current state: the link is read,
//! the receipt inserted unless its (workspace, message id, state) is there already (then it is a
//! duplicate and nothing is written), and the message's row inserted or, when the receipt
//! supersedes it ([`supersedes`]), updated under its row lock. A batch goes a chunk per
//! transaction, in set statements (`chunk.rs`: the same answers, a few round trips a chunk; on
//! PostgreSQL several chunks at once, cut by message: `parallel.rs`); a
//! chunk that loses a race to a concurrent writer of the same rows (a unique violation, a
//! deadlock) is rolled back whole and its receipts redone one by one, each finding the other's
//! row: nothing is ever half-written.

use crate::sql::{db, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::{Backend, StorageError, StorageResult};
use shortlink_visits::deliveries::model::{
    at_ms, supersedes, DeliveryState, Gateway, LinkRef, NewReceipt, Receipt, Recorded, Refusal,
};
use shortlink_visits::deliveries::store::DeliveryStore;
use sqlx::{Database, Transaction};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

type Row<V> = <Db<V> as Database>::Row;

/// Receipts per transaction: short locks, few round trips.
const CHUNK: usize = 500;

/// Tries of one receipt that keeps losing races to concurrent writers of its message.
const RETRIES: usize = 4;

/// Whether a transaction failed for a concurrent writer of the same rows, so that running it
/// again succeeds: a unique key another transaction took first, or a deadlock (SQLSTATE 40001,
/// PostgreSQL 40P01: MariaDB's locking read of a message not there yet locks the gap, and two
/// such readers then wait for each other's insert).
fn lost_race(error: &StorageError) -> bool {
    match error {
        StorageError::Conflict => true,
        StorageError::Unavailable(sqlx::Error::Database(db))
        | StorageError::Other(sqlx::Error::Database(db)) => {
            matches!(db.code().as_deref(), Some("40001" | "40P01"))
        }
        _ => false,
    }
}

pub(super) const COLUMNS: &str =
    "message_id, code, state, error_code, error_text, carrier, at_ms, received_ms, gateway";

/// A receipt's row after its `workspace_id`: [`COLUMNS`]' values, in their order.
pub(super) fn receipt_values(workspace: &Value, receipt: &Receipt) -> [Value; 10] {
    [
        workspace.clone(),
        Value::Text(receipt.message_id.clone()),
        Value::Text(receipt.code.clone()),
        Value::Text(receipt.state.as_str().into()),
        Value::OptText(receipt.error_code.clone()),
        Value::OptText(receipt.error_text.clone()),
        Value::OptText(receipt.carrier.clone()),
        ms(receipt.at),
        ms(receipt.received_at),
        Value::Text(receipt.gateway.as_str().into()),
    ]
}

pub(super) fn ms(at: DateTime<Utc>) -> Value {
    Value::Int(at.timestamp_millis())
}

/// A message's current state as stored.
struct Current {
    state: DeliveryState,
    at: DateTime<Utc>,
}

pub(super) fn state_of(text: &str) -> StorageResult<DeliveryState> {
    DeliveryState::parse(text)
        .ok_or_else(|| StorageError::Corrupt(format!("unknown delivery state {text:?}")))
}

impl<V: VisitDialect> SqlVisitStore<V> {
    pub(super) fn receipt(row: &Row<V>) -> StorageResult<Receipt> {
        let text = |c| V::Sql::read_text(row, c);
        let opt = |c| V::Sql::read_opt_text(row, c);
        let int = |c| Db::<V>::int(row, c).map_err(db);
        let gateway = text("gateway")?;
        Ok(Receipt {
            message_id: text("message_id")?,
            code: text("code")?,
            state: state_of(&text("state")?)?,
            error_code: opt("error_code")?,
            error_text: opt("error_text")?,
            carrier: opt("carrier")?,
            at: at_ms(int("at_ms")?),
            received_at: at_ms(int("received_ms")?),
            gateway: Gateway::parse(&gateway)
                .ok_or_else(|| StorageError::Corrupt(format!("unknown gateway {gateway:?}")))?,
        })
    }

    /// The code of the link `link` names in `workspace`, if any.
    async fn link_code(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        link: &LinkRef,
    ) -> StorageResult<Option<String>> {
        let ws = Value::Int(workspace.get());
        let query = match link {
            LinkRef::Code(code) => statement(
                "SELECT code FROM links WHERE workspace_id = ? AND code = ?",
                [ws, Value::Text(code.clone())],
            ),
            // The newest, should a recipient have had several links of one campaign.
            LinkRef::Recipient {
                campaign,
                recipient_ref,
            } => statement(
                "SELECT code FROM links WHERE workspace_id = ? AND campaign = ? \
                 AND recipient_ref = ? ORDER BY created_at DESC, code DESC LIMIT 1",
                [
                    ws,
                    Value::Text(campaign.clone()),
                    Value::Text(recipient_ref.clone()),
                ],
            ),
        };
        let row = Db::<V>::fetch_optional(&mut **tx, query)
            .await
            .map_err(db)?;
        row.map(|row| V::Sql::read_text(&row, "code")).transpose()
    }

    async fn current(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        message_id: &str,
        lock: bool,
    ) -> StorageResult<Option<Current>> {
        let query = statement(
            &format!(
                "SELECT state, at_ms FROM delivery_messages WHERE workspace_id = ? \
                 AND message_id = ?{}",
                if lock { V::Sql::FOR_UPDATE } else { "" }
            ),
            [Value::Int(workspace.get()), Value::Text(message_id.into())],
        );
        let row = Db::<V>::fetch_optional(&mut **tx, query)
            .await
            .map_err(db)?;
        row.map(|row| {
            Ok(Current {
                state: state_of(&V::Sql::read_text(&row, "state")?)?,
                at: at_ms(Db::<V>::int(&row, "at_ms").map_err(db)?),
            })
        })
        .transpose()
    }

    /// One receipt, inside `tx`.
    async fn apply(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        new: &NewReceipt,
        now: DateTime<Utc>,
    ) -> StorageResult<Result<Recorded, Refusal>> {
        let Some(code) = Self::link_code(tx, workspace, &new.link).await? else {
            return Ok(Err(Refusal::UnknownLink));
        };
        if let Some(duplicate) = Self::recorded_before(tx, workspace, new).await? {
            return Ok(Ok(duplicate));
        }
        let ws = Value::Int(workspace.get());
        let receipt = new.stored(code.clone(), now);
        let insert = statement(
            &format!(
                "INSERT INTO delivery_receipts (workspace_id, {COLUMNS}) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            receipt_values(&ws, &receipt),
        );
        Db::<V>::execute(&mut **tx, insert).await.map_err(db)?;
        let current = Self::write_message(tx, workspace, new, &receipt, code).await?;
        Ok(Ok(Recorded {
            receipt,
            duplicate: false,
            current,
        }))
    }

    /// The receipt of `new`'s message and state stored already, answered as a duplicate with
    /// its message's current state.
    async fn recorded_before(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        new: &NewReceipt,
    ) -> StorageResult<Option<Recorded>> {
        let existing = statement(
            &format!(
                "SELECT {COLUMNS} FROM delivery_receipts WHERE workspace_id = ? \
                 AND message_id = ? AND state = ?"
            ),
            [
                Value::Int(workspace.get()),
                Value::Text(new.message_id.clone()),
                Value::Text(new.state.as_str().into()),
            ],
        );
        let Some(row) = Db::<V>::fetch_optional(&mut **tx, existing)
            .await
            .map_err(db)?
        else {
            return Ok(None);
        };
        let receipt = Self::receipt(&row)?;
        let current = (Self::current(tx, workspace, &new.message_id, false).await?)
            .map_or(receipt.state, |current| current.state);
        Ok(Some(Recorded {
            receipt,
            duplicate: true,
            current,
        }))
    }

    /// The message's row after a new `receipt` (inserted, or updated under its row lock);
    /// answers the message's current state.
    async fn write_message(
        tx: &mut Transaction<'static, Db<V>>,
        workspace: WorkspaceId,
        new: &NewReceipt,
        receipt: &Receipt,
        code: String,
    ) -> StorageResult<DeliveryState> {
        let ws = Value::Int(workspace.get());
        let Some(current) = Self::current(tx, workspace, &new.message_id, true).await? else {
            let insert = statement(
                "INSERT INTO delivery_messages (workspace_id, message_id, code, \
                 short_domain, state, error_code, carrier, at_ms, received_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    ws,
                    Value::Text(receipt.message_id.clone()),
                    Value::Text(code),
                    Value::OptText(new.short_domain.clone()),
                    Value::Text(receipt.state.as_str().into()),
                    Value::OptText(receipt.error_code.clone()),
                    Value::OptText(receipt.carrier.clone()),
                    ms(receipt.at),
                    ms(receipt.received_at),
                ],
            );
            Db::<V>::execute(&mut **tx, insert).await.map_err(db)?;
            return Ok(receipt.state);
        };
        let wins = supersedes(receipt.state, receipt.at, current.state, current.at);
        // What any receipt adds (where the message went), the domain only when none is known
        // (the first report's, the send job's for a message it sent, stays: a later report
        // does not move a message to another domain), and the state with its error and time
        // only when this receipt wins.
        let mut query = statement(
            "UPDATE delivery_messages SET carrier = COALESCE(?, carrier), \
             short_domain = COALESCE(short_domain, ?), received_ms = ?",
            [
                Value::OptText(receipt.carrier.clone()),
                Value::OptText(new.short_domain.clone()),
                ms(receipt.received_at),
            ],
        );
        if wins {
            query
                .push(", state = ")
                .bind(Value::Text(receipt.state.as_str().into()))
                .push(", error_code = ")
                .bind(Value::OptText(receipt.error_code.clone()))
                .push(", at_ms = ")
                .bind(ms(receipt.at));
        }
        query
            .push(" WHERE workspace_id = ")
            .bind(ws)
            .push(" AND message_id = ")
            .bind(Value::Text(receipt.message_id.clone()));
        Db::<V>::execute(&mut **tx, query).await.map_err(db)?;
        Ok(if wins { receipt.state } else { current.state })
    }

    /// Receipts in one transaction, committed only if every one went in.
    async fn apply_all(
        &self,
        workspace: WorkspaceId,
        receipts: &[NewReceipt],
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        let mut tx = V::Sql::begin(&self.writer).await?;
        let out = match receipts {
            [one] => vec![Self::apply(&mut tx, workspace, one, now).await?],
            _ => Self::apply_chunk(&self.dialect, &mut tx, workspace, receipts, now).await?,
        };
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    /// One chunk in its transaction; if it loses a race to a concurrent writer of the same
    /// messages, its receipts one by one.
    pub(super) async fn record_receipt_chunk(
        &self,
        workspace: WorkspaceId,
        chunk: &[NewReceipt],
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        match self.apply_all(workspace, chunk, now).await {
            Ok(answers) => {
                self.dialect
                    .receipts_stored(&self.writer, chunk.len())
                    .await;
                Ok(answers)
            }
            // A concurrent report of the same message committed first, or the two locked
            // each other: one by one, each then finds the other's rows.
            Err(error) if lost_race(&error) => {
                let mut out = Vec::with_capacity(chunk.len());
                for receipt in chunk {
                    let one = std::slice::from_ref(receipt);
                    let mut answer = self.apply_all(workspace, one, now).await;
                    for _ in 1..RETRIES {
                        match &answer {
                            Err(error) if lost_race(error) => {
                                answer = self.apply_all(workspace, one, now).await
                            }
                            _ => break,
                        }
                    }
                    out.extend(answer?);
                }
                Ok(out)
            }
            Err(error) => Err(error),
        }
    }
}

#[async_trait]
impl<V: VisitDialect> DeliveryStore for SqlVisitStore<V> {
    async fn record_receipts(
        &self,
        workspace: WorkspaceId,
        receipts: &[NewReceipt],
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        if V::Sql::BACKEND == Backend::Postgres {
            return self
                .record_in_parallel(workspace, receipts, CHUNK, now)
                .await;
        }
        let mut out = Vec::with_capacity(receipts.len());
        for chunk in receipts.chunks(CHUNK) {
            out.extend(self.record_receipt_chunk(workspace, chunk, now).await?);
        }
        Ok(out)
    }

    async fn receipts_of(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<Receipt>> {
        let mut out = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT {COLUMNS} FROM delivery_receipts WHERE workspace_id = ? \
                     AND code IN ({}) ORDER BY at_ms, message_id, state",
                    marks(chunk.len())
                ),
                std::iter::once(Value::Int(workspace.get()))
                    .chain(chunk.iter().cloned().map(Value::Text)),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                out.push(Self::receipt(&row)?);
            }
        }
        out.sort_by(|a, b| (a.at, &a.message_id).cmp(&(b.at, &b.message_id)));
        Ok(out)
    }
}

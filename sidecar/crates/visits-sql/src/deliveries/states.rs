//! The current state of each message of some links (`delivery_messages`) in SQL: the re-send
//! list's reasons ([`MessageStateStore`]).

use crate::sql::{db, fetch_all, marks};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::model::at_ms;
use shortlink_visits::deliveries::model::DeliveryState;
use shortlink_visits::deliveries::states::{MessageState, MessageStateStore};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

#[async_trait]
impl<V: VisitDialect> MessageStateStore for SqlVisitStore<V> {
    async fn message_states(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<MessageState>> {
        let mut out = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT code, state, error_code, at_ms FROM delivery_messages \
                     WHERE workspace_id = ? AND code IN ({})",
                    marks(chunk.len())
                ),
                std::iter::once(Value::Int(workspace.get()))
                    .chain(chunk.iter().cloned().map(Value::Text)),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                let state = V::Sql::read_text(&row, "state")?;
                out.push(MessageState {
                    code: V::Sql::read_text(&row, "code")?,
                    state: DeliveryState::parse(&state).ok_or_else(|| {
                        StorageError::Corrupt(format!("unknown delivery state {state:?}"))
                    })?,
                    error_code: V::Sql::read_opt_text(&row, "error_code")?,
                    at: at_ms(Db::<V>::int(&row, "at_ms").map_err(db)?),
                });
            }
        }
        Ok(out)
    }
}

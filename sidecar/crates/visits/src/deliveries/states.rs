//! The current state of each message of some links (`delivery_messages`): what the re-send
//! list says of each recipient (not delivered, delivered but not clicked, no receipt).

use super::model::DeliveryState;
use super::store::at_ms;
use crate::store::sql::{db, fetch_all, marks};
use crate::store::{SqlBackendStore, SqlVisitStore, VisitDialect, VisitStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::{StorageError, StorageResult, WorkspaceId};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// One message's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageState {
    pub code: String,
    pub state: DeliveryState,
    pub error_code: Option<String>,
    /// The gateway's time of that state.
    pub at: DateTime<Utc>,
}

#[async_trait]
pub trait MessageStateStore: Send + Sync {
    /// The current state of every message of the workspace's links `codes` (none for a link no
    /// gateway reported anything of).
    async fn message_states(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<MessageState>>;
}

/// The message states of the database a visit store writes to.
pub trait MessageStates {
    fn message_states(&self) -> &dyn MessageStateStore;
}

impl MessageStates for dyn VisitStore {
    fn message_states(&self) -> &dyn MessageStateStore {
        match self.sql_backend() {
            SqlBackendStore::Sqlite(store) => store,
            SqlBackendStore::Postgres(store) => store,
            SqlBackendStore::Mysql(store) => store,
        }
    }
}

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

//! The current state of each message of some links (`delivery_messages`): what the re-send
//! list says of each recipient (not delivered, delivered but not clicked, no receipt).

use super::model::DeliveryState;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

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

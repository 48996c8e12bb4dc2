//! Why a recipient of the re-send list got no click (issue 68): its link's message was not
//! delivered (the gateway's state and error code say how), was delivered and not tapped, no
//! gateway said anything of it, or its hand-off to the gateway has an unknown outcome (it may
//! have it: never sent again by shortlink, the operator decides). Read from the messages'
//! current states (`delivery_messages`, docs/DELIVERIES.md) and the send jobs' records.

use crate::{AppState, Result};
use serde::Serialize;
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{DeliveryState, MessageState};
use std::collections::HashMap;

/// Why a link of the re-send list has no click.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A gateway reported its message, never as delivered.
    NotDelivered,
    DeliveredNotClicked,
    NoReceipt,
    /// No receipt, and shortlink's hand-off of its message ended without an answer (`unknown`
    /// or `interrupted` in its send job): the gateway may have it.
    HandoffUnknown,
}

/// A link's reason, with the state and error code of its message when it was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    pub reason: Reason,
    pub state: Option<DeliveryState>,
    pub error_code: Option<String>,
}

const NO_RECEIPT: Why = Why {
    reason: Reason::NoReceipt,
    state: None,
    error_code: None,
};

/// The reason of a link from its messages' current states: one delivered is enough (it reached
/// the phone); else the message that says most, a final state before a pending one, the later
/// one among equals.
pub fn why(messages: &[&MessageState]) -> Why {
    if messages.iter().any(|m| m.state == DeliveryState::Delivered) {
        return Why {
            reason: Reason::DeliveredNotClicked,
            state: None,
            error_code: None,
        };
    }
    match (messages.iter()).max_by_key(|m| (m.state.is_final(), m.at)) {
        Some(message) => Why {
            reason: Reason::NotDelivered,
            state: Some(message.state),
            error_code: message.error_code.clone(),
        },
        None => NO_RECEIPT,
    }
}

/// The reasons of the workspace's links `codes`, by code (every code has one).
pub async fn of_codes(
    state: &AppState,
    workspace: WorkspaceId,
    codes: &[String],
) -> Result<HashMap<String, Why>> {
    let states = (state.analytics.store.message_states())
        .message_states(workspace, codes)
        .await?;
    let mut by_code: HashMap<&str, Vec<&MessageState>> = HashMap::new();
    for message in &states {
        by_code.entry(&message.code).or_default().push(message);
    }
    let mut reasons: HashMap<String, Why> = (codes.iter())
        .map(|code| {
            let messages = by_code.get(code.as_str()).map_or(&[][..], Vec::as_slice);
            (code.clone(), why(messages))
        })
        .collect();
    let silent: Vec<String> = (reasons.iter())
        .filter(|(_, why)| why.reason == Reason::NoReceipt)
        .map(|(code, _)| code.clone())
        .collect();
    let gateways = state.analytics.store.gateways();
    for code in gateways.unknown_handoffs(workspace, &silent).await? {
        if let Some(why) = reasons.get_mut(&code) {
            why.reason = Reason::HandoffUnknown;
        }
    }
    Ok(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn message(state: DeliveryState, error: Option<&str>, second: u32) -> MessageState {
        MessageState {
            code: "c".into(),
            state,
            error_code: error.map(str::to_owned),
            at: Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, second).unwrap(),
        }
    }

    #[test]
    fn a_delivered_message_wins_then_a_final_state_then_the_latest() {
        let rejected = message(DeliveryState::Rejected, Some("88"), 1);
        let delivered = message(DeliveryState::Delivered, None, 0);
        let submitted = message(DeliveryState::Submitted, None, 5);
        assert_eq!(
            why(&[&rejected, &delivered]).reason,
            Reason::DeliveredNotClicked
        );
        let not = why(&[&submitted, &rejected]);
        assert_eq!(
            (not.reason, not.state, not.error_code.as_deref()),
            (
                Reason::NotDelivered,
                Some(DeliveryState::Rejected),
                Some("88")
            )
        );
        assert_eq!(why(&[&submitted]).state, Some(DeliveryState::Submitted));
        assert_eq!(why(&[]), NO_RECEIPT);
    }
}

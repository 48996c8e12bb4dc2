//! What a delivery receipt is, checked: its state and gateway, the link it names, and bounded
//! texts. Pure: the store and the API's gateways build these, then hand them over.

use chrono::{DateTime, Utc};

/// Longest gateway message id (the idempotency key with the state).
pub const MAX_MESSAGE_ID: usize = 128;
/// Longest error code and carrier kept; longer ones are refused, not cut (they are keys).
pub const MAX_ERROR_CODE: usize = 32;
pub const MAX_CARRIER: usize = 64;
/// Longest error text kept: a gateway's free text is cut here (on a character boundary).
pub const MAX_ERROR_TEXT: usize = 256;

/// Where a message is, as a gateway reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeliveryState {
    Submitted,
    Buffered,
    Unknown,
    Delivered,
    Failed,
    Rejected,
    Expired,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 7] = [
        DeliveryState::Submitted,
        DeliveryState::Delivered,
        DeliveryState::Failed,
        DeliveryState::Rejected,
        DeliveryState::Expired,
        DeliveryState::Buffered,
        DeliveryState::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Submitted => "submitted",
            DeliveryState::Buffered => "buffered",
            DeliveryState::Unknown => "unknown",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
            DeliveryState::Rejected => "rejected",
            DeliveryState::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == text)
    }

    /// A final state: the gateway will say nothing more of the message.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            DeliveryState::Delivered
                | DeliveryState::Failed
                | DeliveryState::Rejected
                | DeliveryState::Expired
        )
    }
}

/// Whether a receipt (`new`, at `new_at`) replaces a message's current state (`current`, at
/// `current_at`): a final state supersedes a non-final one and never the other way round; among
/// states of the same kind the later gateway time wins (a tie keeps what is there, so a retried
/// or reordered report changes nothing).
pub fn supersedes(
    new: DeliveryState,
    new_at: DateTime<Utc>,
    current: DeliveryState,
    current_at: DateTime<Utc>,
) -> bool {
    match (new.is_final(), current.is_final()) {
        (true, false) => true,
        (false, true) => false,
        _ => new_at > current_at,
    }
}

/// Who sent a receipt: the API (a sender's own glue) or a gateway's native callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gateway {
    Api,
    Kannel,
    Twilio,
    Vonage,
}

impl Gateway {
    pub fn as_str(self) -> &'static str {
        match self {
            Gateway::Api => "api",
            Gateway::Kannel => "kannel",
            Gateway::Twilio => "twilio",
            Gateway::Vonage => "vonage",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            Gateway::Api,
            Gateway::Kannel,
            Gateway::Twilio,
            Gateway::Vonage,
        ]
        .into_iter()
        .find(|gateway| gateway.as_str() == text)
    }
}

/// How a receipt names its link, within the caller's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRef {
    Code(String),
    /// A per-recipient link by its campaign and `ref`.
    Recipient {
        campaign: String,
        recipient_ref: String,
    },
}

/// A receipt checked, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReceipt {
    pub link: LinkRef,
    /// The host of the short URL the receipt named, if it named one.
    pub short_domain: Option<String>,
    pub message_id: String,
    pub state: DeliveryState,
    pub error_code: Option<String>,
    pub error_text: Option<String>,
    pub carrier: Option<String>,
    pub at: DateTime<Utc>,
    pub gateway: Gateway,
}

impl NewReceipt {
    /// The receipt as it is stored for the link `code`, received `now`: both times to the
    /// millisecond, as the columns keep them, so that an answer equals what a read gives back.
    pub fn stored(&self, code: String, now: DateTime<Utc>) -> Receipt {
        let to_ms = |at: DateTime<Utc>| {
            DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or_default()
        };
        Receipt {
            message_id: self.message_id.clone(),
            code,
            state: self.state,
            error_code: self.error_code.clone(),
            error_text: self.error_text.clone(),
            carrier: self.carrier.clone(),
            at: to_ms(self.at),
            received_at: to_ms(now),
            gateway: self.gateway,
        }
    }
}

/// A stored receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub message_id: String,
    pub code: String,
    pub state: DeliveryState,
    pub error_code: Option<String>,
    pub error_text: Option<String>,
    pub carrier: Option<String>,
    pub at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub gateway: Gateway,
}

/// What recording one receipt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub receipt: Receipt,
    /// An earlier report stored this message id and state already (this one stored nothing).
    pub duplicate: bool,
    /// The message's current state after this receipt (the funnel's).
    pub current: DeliveryState,
}

/// Why a receipt was refused before anything was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no link in this workspace has this code (or campaign and ref)")]
    UnknownLink,
}

/// Why a receipt's fields were not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    /// The field at fault (`message_id`, `state`, …), for the API's error code.
    pub field: &'static str,
    pub message: String,
}

impl Invalid {
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        Invalid {
            field,
            message: message.into(),
        }
    }
}

fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// A required key-like text: 1 to `max` characters, no control characters (taken as given:
/// an id is not trimmed).
pub fn key_text(field: &'static str, text: &str, max: usize) -> Result<String, Invalid> {
    if text.is_empty() || text.chars().count() > max || has_control(text) {
        return Err(Invalid::new(
            field,
            format!("`{field}` is 1 to {max} characters without control characters"),
        ));
    }
    Ok(text.to_owned())
}

/// An optional key-like text; empty counts as absent (gateways send `ErrorCode=` for none).
pub fn opt_key_text(
    field: &'static str,
    text: Option<&str>,
    max: usize,
) -> Result<Option<String>, Invalid> {
    match text.filter(|text| !text.is_empty()) {
        None => Ok(None),
        Some(text) => key_text(field, text, max).map(Some),
    }
}

/// A gateway's free text, cut to [`MAX_ERROR_TEXT`] characters, control characters as spaces.
pub fn bounded_text(text: Option<&str>) -> Option<String> {
    let text = text.map(str::trim).filter(|text| !text.is_empty())?;
    let cleaned: String = (text.chars())
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_ERROR_TEXT)
        .collect();
    Some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_final_state_is_never_replaced_by_a_non_final_one() {
        let early = Utc.timestamp_opt(1_000, 0).unwrap();
        let late = Utc.timestamp_opt(2_000, 0).unwrap();
        use DeliveryState::*;
        assert!(supersedes(Delivered, early, Submitted, late));
        assert!(!supersedes(Submitted, late, Delivered, early));
        assert!(!supersedes(Buffered, late, Failed, early));
        assert!(supersedes(Failed, late, Delivered, early));
        assert!(!supersedes(Failed, early, Delivered, late));
        assert!(supersedes(Buffered, late, Submitted, early));
        // A tie keeps what is there: the same report twice changes nothing.
        assert!(!supersedes(Delivered, early, Expired, early));
    }

    #[test]
    fn states_and_gateways_read_back() {
        for state in DeliveryState::ALL {
            assert_eq!(DeliveryState::parse(state.as_str()), Some(state));
        }
        assert_eq!(DeliveryState::parse("sent"), None);
        assert_eq!(Gateway::parse("twilio"), Some(Gateway::Twilio));
    }

    #[test]
    fn texts_are_bounded() {
        assert!(key_text("message_id", "", 8).is_err());
        assert!(key_text("message_id", "a\u{7}b", 8).is_err());
        assert!(key_text("message_id", &"x".repeat(9), 8).is_err());
        assert_eq!(opt_key_text("error_code", Some(""), 8), Ok(None));
        let long = "é".repeat(MAX_ERROR_TEXT + 10);
        assert_eq!(
            bounded_text(Some(&long)).unwrap().chars().count(),
            MAX_ERROR_TEXT
        );
        assert_eq!(bounded_text(Some("a\nb")).as_deref(), Some("a b"));
    }
}

/// A message's row as a chunk of receipts leaves it, for a backend that upserts it in a set
/// statement (`VisitDialect::upsert_messages`): the stored row is superseded by this one's
/// state as by a receipt of it ([`supersedes`]); its carrier and domain replace the stored ones
/// where given.
#[derive(Debug, Clone)]
pub struct MessageRow {
    pub message_id: String,
    pub code: String,
    pub short_domain: Option<String>,
    pub state: DeliveryState,
    pub error_code: Option<String>,
    pub carrier: Option<String>,
    pub at: DateTime<Utc>,
    pub received: DateTime<Utc>,
}

/// A message's row after its upsert.
#[derive(Debug, Clone)]
pub struct UpsertedMessage {
    pub message_id: String,
    pub state: DeliveryState,
    pub at: DateTime<Utc>,
    /// No row was there: this statement inserted it.
    pub inserted: bool,
}

/// A time stored as Unix milliseconds (the deliveries' tables keep every time so).
pub fn at_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

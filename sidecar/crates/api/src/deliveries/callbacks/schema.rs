//! What each gateway sends, as the OpenAPI document states it (the contract test sends exactly
//! what these allow, and every such request must be taken). The handlers read the raw query or
//! form ([`super::Params`]): Twilio's signature covers every field, named or not, and a gateway
//! adds fields without notice. So these types are never built, only described.
#![allow(dead_code)]

use utoipa::{IntoParams, ToSchema};

/// Kannel's `dlr-url` query (the sender's own `code` and `mid`, and Kannel's escapes).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KannelQuery {
    /// The link's code.
    #[param(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    code: String,
    /// The sender's id of the message (default: the code).
    #[param(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    mid: Option<String>,
    /// `%d`: 1 delivered, 2 failed, 4 buffered, 8 submitted, 16 rejected.
    #[param(rename = "type", pattern = "^(1|2|4|8|16)$")]
    kind: String,
    /// `%A`: `ACK/`, `NACK/<reason>` or the SMSC's receipt text.
    answer: Option<String>,
    /// `%i`: the route, kept as the carrier.
    #[param(max_length = 64, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$")]
    smsc: Option<String>,
    /// `%T`: the report's Unix time in seconds.
    #[param(minimum = 0, maximum = 32503680000_i64)]
    ts: Option<i64>,
}

/// The link a Twilio or Vonage callback URL names.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CodeQuery {
    /// The link's code (Vonage: when the message's `client-ref` is not).
    #[param(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    code: Option<String>,
}

/// Twilio's status callback form (Twilio sends more fields; all are signed, none is stored but
/// these).
#[derive(ToSchema)]
pub struct TwilioForm {
    #[schema(
        rename = "MessageSid",
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    message_sid: String,
    #[schema(
        rename = "MessageStatus",
        pattern = "^(queued|accepted|scheduled|sending|sent|delivered|read|undelivered|failed|canceled)$"
    )]
    message_status: String,
    #[schema(
        rename = "ErrorCode",
        max_length = 32,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    error_code: Option<String>,
}

/// Vonage's delivery receipt, as JSON fields or query parameters (`msisdn`, the recipient,
/// is dropped unread; a `message-timestamp` that cannot be read is taken as now).
#[derive(ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VonageReceipt {
    #[schema(
        rename = "messageId",
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    #[param(
        rename = "messageId",
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    message_id: String,
    #[schema(pattern = "^(delivered|expired|failed|rejected|accepted|buffered|unknown)$")]
    #[param(pattern = "^(delivered|expired|failed|rejected|accepted|buffered|unknown)$")]
    status: String,
    #[schema(
        rename = "err-code",
        max_length = 32,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    #[param(
        rename = "err-code",
        max_length = 32,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    err_code: Option<String>,
    #[schema(
        rename = "network-code",
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    #[param(
        rename = "network-code",
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    network_code: Option<String>,
    /// `YYYY-MM-DD HH:MM:SS`, UTC.
    #[schema(rename = "message-timestamp")]
    #[param(rename = "message-timestamp")]
    message_timestamp: Option<String>,
    /// The link's code, when the sender set it as the message's client reference.
    #[schema(
        rename = "client-ref",
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    #[param(
        rename = "client-ref",
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    client_ref: Option<String>,
}

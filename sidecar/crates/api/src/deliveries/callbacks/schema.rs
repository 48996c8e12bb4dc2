//! What each gateway sends, as the OpenAPI document states it (the contract test sends exactly
//! what these allow, and every such request must be taken). The handlers read the raw query or
//! form (`shortlink_messaging::receipts::params::Params`): Twilio's signature covers every field,
//! named or not, and a gateway adds fields without notice. So these types are never built, only
//! described, and each description is written from the limits and the status tables the
//! gateways' readers use (`shortlink_messaging::receipts`), never from copies of them.

use shortcode::ALIAS_MAX_LEN;
use shortlink_messaging::receipts::{kannel, twilio, vonage};
use shortlink_model::schema::{integer, printable};
use shortlink_visits::deliveries::model::{MAX_CARRIER, MAX_ERROR_CODE, MAX_MESSAGE_ID};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, Required};
use utoipa::{IntoParams, PartialSchema, ToSchema};

/// The latest `ts` described (the year 3000): any later one is not believed anyway.
const LATEST_TS: u64 = 32_503_680_000;

/// One field a gateway sends: a query parameter or a form's or a JSON body's field.
struct Field {
    name: &'static str,
    required: bool,
    schema: ObjectBuilder,
}

fn field(name: &'static str, required: bool, schema: ObjectBuilder) -> Field {
    Field {
        name,
        required,
        schema,
    }
}

/// One of `values` (a gateway's statuses as its reader maps them).
fn one_of<T: ToString>(values: impl IntoIterator<Item = T>, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.into_iter().map(|value| value.to_string())))
        .description(Some(description))
}

fn code(description: &str) -> ObjectBuilder {
    printable(1, ALIAS_MAX_LEN, description)
}

fn message_id(description: &str) -> ObjectBuilder {
    printable(1, MAX_MESSAGE_ID, description)
}

fn error_code(description: &str) -> ObjectBuilder {
    printable(0, MAX_ERROR_CODE, description)
}

fn carrier(description: &str) -> ObjectBuilder {
    printable(0, MAX_CARRIER, description)
}

fn query_params(fields: Vec<Field>) -> Vec<Parameter> {
    (fields.into_iter())
        .map(|field| {
            let schema: Schema = field.schema.into();
            let description = match &schema {
                Schema::Object(object) => object.description.clone(),
                _ => None,
            };
            ParameterBuilder::new()
                .name(field.name)
                .parameter_in(ParameterIn::Query)
                .required(match field.required {
                    true => Required::True,
                    false => Required::False,
                })
                .description(description)
                .schema(Some(schema))
                .build()
        })
        .collect()
}

fn object(fields: Vec<Field>, description: &str) -> RefOr<Schema> {
    let mut object = ObjectBuilder::new().description(Some(description));
    for field in fields {
        if field.required {
            object = object.required(field.name);
        }
        object = object.property(field.name, field.schema);
    }
    object.into()
}

/// Kannel's `dlr-url` query (the sender's own `code` and `mid`, and Kannel's escapes).
pub struct KannelQuery;

impl IntoParams for KannelQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let types = (kannel::TYPES.iter()).map(|(bit, state)| format!("{bit} {}", state.as_str()));
        let types = format!("`%d`: {}.", types.collect::<Vec<_>>().join(", "));
        query_params(vec![
            field("code", true, code("The link's code.")),
            field(
                "mid",
                false,
                message_id("The sender's id of the message (default: the code)."),
            ),
            field(
                "type",
                true,
                one_of(kannel::TYPES.iter().map(|(bit, _)| bit), &types),
            ),
            field(
                "answer",
                false,
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(
                        "`%A`: `ACK/`, `NACK/<reason>` or the SMSC's receipt text.",
                    )),
            ),
            field(
                "smsc",
                false,
                carrier("`%i`: the route, kept as the carrier."),
            ),
            field(
                "ts",
                false,
                integer(0, LATEST_TS, "`%T`: the report's Unix time in seconds."),
            ),
        ])
    }
}

/// The link a Twilio or Vonage callback URL names.
pub struct CodeQuery;

impl IntoParams for CodeQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let description = "The link's code (Vonage: when the message's `client-ref` is not).";
        query_params(vec![field("code", false, code(description))])
    }
}

/// Twilio's status callback form (Twilio sends more fields; all are signed, none is stored but
/// these).
pub struct TwilioForm;

impl PartialSchema for TwilioForm {
    fn schema() -> RefOr<Schema> {
        let statuses = twilio::STATUSES.iter().map(|(name, _)| name);
        object(
            vec![
                field("MessageSid", true, message_id("The message's id.")),
                field("MessageStatus", true, one_of(statuses, "Its status.")),
                field("ErrorCode", false, error_code("Twilio's error code.")),
            ],
            "Twilio's status callback form (Twilio sends more fields; all are signed, none is \
             stored but these).",
        )
    }
}

impl ToSchema for TwilioForm {}

/// Vonage's delivery receipt, as JSON fields or query parameters (`msisdn`, the recipient,
/// is dropped unread; a `message-timestamp` that cannot be read is taken as now).
pub struct VonageReceipt;

impl VonageReceipt {
    fn fields() -> Vec<Field> {
        let statuses = vonage::STATUSES.iter().map(|(name, _)| name);
        let timestamp = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("`YYYY-MM-DD HH:MM:SS`, UTC."));
        let client_ref =
            "The link's code, when the sender set it as the message's client reference.";
        vec![
            field("messageId", true, message_id("The message's id.")),
            field("status", true, one_of(statuses, "Its status.")),
            field(
                "err-code",
                false,
                error_code("Vonage's error code (`0`: none)."),
            ),
            field("network-code", false, carrier("The carrier's MCC-MNC.")),
            field("message-timestamp", false, timestamp),
            field("client-ref", false, code(client_ref)),
        ]
    }
}

impl IntoParams for VonageReceipt {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        query_params(Self::fields())
    }
}

impl PartialSchema for VonageReceipt {
    fn schema() -> RefOr<Schema> {
        object(
            Self::fields(),
            "Vonage's delivery receipt (`msisdn`, the recipient, is dropped unread; a \
             `message-timestamp` that cannot be read is taken as now).",
        )
    }
}

impl ToSchema for VonageReceipt {}

//! What the OpenAPI document must say that the derives cannot: with it, every request the
//! document calls valid is one the API can accept (`tests/tests/e2e/contract.rs` checks it).

use shortlink_wire::status::REDIRECT_STATUSES;
use utoipa::openapi::extensions::{Extensions, ExtensionsBuilder};
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat,
    SchemaType, Type,
};
use utoipa::openapi::RefOr;

/// The largest integer every JSON reader keeps exact (2^53 - 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER`): the bound of the API's counts, such as `max_visits`.
pub const MAX_JSON_INTEGER: i64 = (1 << 53) - 1;

/// Longest campaign and recipient reference, in bytes (`meta`, `campaign`).
pub const MAX_META_LEN: usize = 200;
/// Most tags on a link, and longest tag in bytes (`tags`).
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_LEN: usize = 64;
/// Longest `click_id_param`: the module appends it as it is.
pub const MAX_CLICK_ID_PARAM_LEN: usize = shortlink_wire::click_id::PARAM_MAX_LEN;

/// `redirect` of a create or an update: one of [`REDIRECT_STATUSES`], or null (the default 302
/// on a create, unchanged on an update). An enum, not an integer: the schema must not call
/// 2147483646 valid.
pub fn redirect() -> Schema {
    let mut values: Vec<serde_json::Value> =
        REDIRECT_STATUSES.iter().map(|s| (*s).into()).collect();
    values.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .enum_values(Some(values))
        .description(Some("301, 302 (default on a create), 307 or 308."))
        .examples([serde_json::json!(302)])
        .into()
}

/// A target URL the API accepts, as far as a pattern can say it: `http://` or `https://`, a host
/// of the characters the URL parser takes in a domain (letters, digits and
/// ``!"$&'()*+,;=_~{}`-``, no `%`), whose last label does not start with a digit (a numeric one
/// is read as an IPv4 address), an optional port, then visible ASCII; at most 5000 bytes
/// (`--max-url-length`'s default). The rest is 422: a host that is one of our short domains
/// (`own_domain`) or not allowed, an `xn--` label that is not punycode, and international
/// names (allowed, but not by this pattern).
pub const URL_PATTERN: &str = concat!(
    "^[Hh][Tt][Tt][Pp][Ss]?://",
    "([A-Za-z0-9!\"$&'()*+,;=_~{}`-]*\\.)*",
    "[A-Za-z!\"$&'()*+,;=_~{}`-][A-Za-z0-9!\"$&'()*+,;=_~{}`-]*\\.?",
    "(:[0-9]{1,4})?([/?#][!-~]*)?$"
);
pub const MAX_URL_LENGTH: usize = shortlink_wire::limits::TARGET_BYTES;
/// No control character (Unicode Cc), as campaigns, references and tags must be. The one
/// spelling of the rule in the document: every field that has it reads it through [`printable`]
/// or [`name`] (the `rules_once` test finds a copy elsewhere).
pub const PRINTABLE: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// [`PRINTABLE`], and not only spaces: what people's names of things are (a workspace, a key, a
/// callback token), trimmed of their ASCII spaces when read.
pub const NAME_PATTERN: &str = concat!(
    "^[^\\u0000-\\u001f\\u007f-\\u009f]*",
    "[^\\u0000-\\u0020\\u007f-\\u009f]",
    "[^\\u0000-\\u001f\\u007f-\\u009f]*$"
);

/// A string of `min` to `max` characters, none a control character; `description` as the
/// field's doc would say it (a `schema_with` function replaces the field's doc comment).
pub fn printable(min: usize, max: usize, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length((min > 0).then_some(min))
        .max_length(Some(max))
        .pattern(Some(PRINTABLE))
        .description(Some(description))
}

/// [`printable`], or `null`: an optional field.
pub fn optional_printable(min: usize, max: usize, description: &str) -> ObjectBuilder {
    printable(min, max, description).schema_type(SchemaType::from_iter([Type::String, Type::Null]))
}

/// A name people give a thing: 1 to `max` characters, printable and not blank
/// ([`NAME_PATTERN`]).
pub fn name(max: usize, description: &str) -> ObjectBuilder {
    printable(1, max, description).pattern(Some(NAME_PATTERN))
}

/// An integer from `min` to `max`.
pub fn integer(min: u64, max: u64, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(min))
        .maximum(Some(max))
        .description(Some(description))
}

/// `x-max-bytes`: the bound in UTF-8 bytes of a string whose `maxLength` (characters) says the
/// same number. A schema cannot count bytes; the contract test's hooks read this to keep a
/// generated value within it, so that the number is written here once.
pub fn max_bytes(limit: usize) -> Option<Extensions> {
    Some(ExtensionsBuilder::new().add("x-max-bytes", limit).build())
}

/// `x-max-normalised-bytes`: the bound of a URL as stored, once normalised ([`LIMIT`] says how
/// it grows), for the contract test's hooks as [`max_bytes`].
pub fn max_normalised_bytes(limit: usize) -> Option<Extensions> {
    Some(
        ExtensionsBuilder::new()
            .add("x-max-normalised-bytes", limit)
            .build(),
    )
}

fn nullable_string(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(description))
}

/// What `--max-url-length` bounds is the URL as sent and as normalised. A schema can say one of
/// the two ways it grows: a bare host gets a `/` (`https://a.example?x` is stored as
/// `https://a.example/?x`), so a URL without that `/` must be a byte shorter. The other,
/// percent-encoding, it cannot count: it is in the description.
const LIMIT: &str = "At most 5000 bytes by default (`--max-url-length`) as sent and once \
     normalised: a `/` is added after a bare host (the schema says that one), and `\"`, `<`, `>` \
     anywhere, `{`, `}` and `` ` `` in the path, `` ` `` in the fragment and `'` in the query are \
     percent-encoded, 3 bytes each (else 422 `url_too_long`).";

/// A target URL: [`URL_PATTERN`], at most [`MAX_URL_LENGTH`] bytes, and a byte less without a
/// path (see [`LIMIT`]); `kind` says whether null is allowed too.
fn target_url(kind: SchemaType, description: String) -> Schema {
    // Each part names the type too: generators (hypothesis-jsonschema) refuse to merge a typed
    // schema with untyped alternatives.
    let url = ObjectBuilder::new()
        .schema_type(kind.clone())
        .pattern(Some(URL_PATTERN))
        .max_length(Some(MAX_URL_LENGTH));
    let normalised = AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(kind.clone())
                .max_length(Some(MAX_URL_LENGTH - 1)),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(kind)
                .pattern(Some("^[A-Za-z]+://[^/?#]*/")),
        );
    AllOfBuilder::new()
        .item(url)
        .item(normalised)
        .description(Some(description))
        .extensions(max_normalised_bytes(MAX_URL_LENGTH))
        .into()
}

/// `url` of a create (and of a rule's target, a webhook).
pub fn url() -> Schema {
    let Schema::AllOf(mut url) = target_url(
        Type::String.into(),
        format!("Absolute http(s) URL; IDN hosts are stored as punycode. {LIMIT}"),
    ) else {
        unreachable!("target_url builds an allOf")
    };
    url.examples = vec![serde_json::json!(
        "https://shop.example/spring?utm_source=sms"
    )];
    Schema::AllOf(url)
}

/// `url` of an update: the same, or null (unchanged).
pub fn new_url() -> Schema {
    target_url(
        SchemaType::from_iter([Type::String, Type::Null]),
        format!("The new target, as `url` of a create; null: unchanged. {LIMIT}"),
    )
}

/// `not_yet_url` and `expired_url`: a URL as `url`, or null.
pub fn optional_url() -> Schema {
    target_url(
        SchemaType::from_iter([Type::String, Type::Null]),
        format!("An absolute http(s) URL, validated like `url`; null for none. {LIMIT}"),
    )
}

/// `max_visits`: 1 to 2^53 - 1, or null (none; on an update, removes the cap).
pub fn max_visits() -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(MAX_JSON_INTEGER))
        .description(Some(
            "At most this many clicks are redirected, 1 to 2^53 - 1; null for none (on an \
             update, removes the cap; the clicks counted so far stay counted).",
        ))
        .examples([serde_json::json!(1000)])
        .into()
}

/// `password`: at least `MIN_PASSWORD_CHARS` characters and at most `MAX_PASSWORD_BYTES` bytes
/// (at most that many characters, and bytes in UTF-8, which no schema can say: else 422
/// `invalid_password`), or null.
pub fn password() -> Schema {
    use shortlink_wire::limits::{
        PASSWORD_BYTES as MAX_PASSWORD_BYTES, PASSWORD_MIN_CHARS as MIN_PASSWORD_CHARS,
    };
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(format!(
            "Write-only: the link's password, at least {MIN_PASSWORD_CHARS} characters and at \
             most {MAX_PASSWORD_BYTES} bytes (UTF-8); stored only as a salted digest. Null for \
             none (on an update, removes it)."
        )))
        .min_length(Some(MIN_PASSWORD_CHARS))
        .max_length(Some(MAX_PASSWORD_BYTES))
        .extensions(max_bytes(MAX_PASSWORD_BYTES))
        .into()
}

/// `code` of a create: an alias. Not expressible here: an alias of the generated codes' shape
/// (as many letters and digits as they have) is 422 `invalid_code`, as is `batch`.
pub fn alias() -> Schema {
    use shortcode::ALIAS_PATTERN;
    nullable_string(&format!(
        "Custom alias `{ALIAS_PATTERN}`, not of the generated-code shape (letters and digits \
         only, as long as a generated code) and not `batch`; generated if absent."
    ))
    .pattern(Some(format!("^{ALIAS_PATTERN}$")))
    .into()
}

/// `campaign` and `ref`: 1 to [`MAX_META_LEN`] characters without control characters (and at most
/// that many bytes in UTF-8, which no schema can say: else 422 `invalid_campaign`, `invalid_ref`).
pub fn meta() -> Schema {
    nullable_string(&format!(
        "1 to {MAX_META_LEN} bytes (UTF-8) without control characters; on an update, null \
         removes it."
    ))
    .min_length(Some(1))
    .max_length(Some(MAX_META_LEN))
    .extensions(max_bytes(MAX_META_LEN))
    .pattern(Some(PRINTABLE))
    .into()
}

/// `click_id_param`: a query parameter name nginx appends as it is (else 422
/// `invalid_click_id_param`).
pub fn click_id_param() -> Schema {
    nullable_string(&format!(
        "1 to {MAX_CLICK_ID_PARAM_LEN} of A-Z a-z 0-9 _ . -; on an update, null removes it."
    ))
    .min_length(Some(1))
    .max_length(Some(MAX_CLICK_ID_PARAM_LEN))
    .pattern(Some(format!(
        "^[A-Za-z0-9_.-]{{1,{MAX_CLICK_ID_PARAM_LEN}}}$"
    )))
    .into()
}

/// A compose's `campaign` query parameter: as a link's `campaign`, never null.
pub fn campaign() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(format!(
            "1 to {MAX_META_LEN} bytes (UTF-8) without control characters."
        )))
        .min_length(Some(1))
        .max_length(Some(MAX_META_LEN))
        .extensions(max_bytes(MAX_META_LEN))
        .pattern(Some(PRINTABLE))
        .into()
}

/// `tags`: at most [`MAX_TAGS`] tags of 1 to [`MAX_TAG_LEN`] characters without control characters
/// (and at most that many bytes each: else 422 `invalid_tags`).
pub fn tags() -> Schema {
    let tag = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_TAG_LEN))
        .extensions(max_bytes(MAX_TAG_LEN))
        .pattern(Some(PRINTABLE));
    utoipa::openapi::schema::ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(tag)
        .max_items(Some(MAX_TAGS))
        .description(Some(format!(
            "Free tags: at most {MAX_TAGS}, each 1 to {MAX_TAG_LEN} bytes (UTF-8) without control \
             characters; on an update they replace the tags (`[]` removes them)."
        )))
        .into()
}

/// A list of at most `max` host names (or addresses), each standing for its subdomains too, of
/// at most 253 bytes (DNS's longest name). Which strings are host names (a dot, IDNA, IPv4
/// rules) is the url crate's parser's to say, which no pattern states: else 422 `invalid_host`.
pub fn host_list(max: usize) -> Schema {
    let host = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(253))
        .extensions(max_bytes(253))
        .pattern(Some(PRINTABLE));
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(host)
        .max_items(Some(max))
        .into()
}

/// A preview's `ip`: an IPv4 or IPv6 address (no zone index, no CIDR), or null.
pub fn ip() -> Schema {
    let address = |format| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
    };
    AnyOfBuilder::new()
        .item(address(KnownFormat::Ipv4))
        .item(address(KnownFormat::Ipv6))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "The client address, IPv4 or IPv6 (`192.0.2.7`, `2001:db8::1`); else 422 \
             `invalid_preview`.",
        ))
        .into()
}

/// `schema` that also has exactly one of `fields` present and non-null (each an object or a
/// value of `types`): a rule's `then`/`split`, a replay's `from`/`failure`.
fn exactly_one_of(schema: Schema, fields: &[(&str, Type)]) -> Schema {
    let mut one_of = OneOfBuilder::new();
    for (field, kind) in fields {
        one_of = one_of.item(
            ObjectBuilder::new()
                .property(*field, ObjectBuilder::new().schema_type(kind.clone()))
                .required(*field),
        );
    }
    AllOfBuilder::new().item(schema).item(one_of).into()
}

/// Fixes what utoipa-gen 5.5 gets wrong: it writes `#[schema(min_properties = 1)]` as
/// `maxProperties: 1`, which would call every PATCH of two fields invalid and `{}` (422
/// `empty_patch`) valid.
pub struct SchemaFixes;

impl utoipa::Modify for SchemaFixes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        if let Some(RefOr::T(Schema::Object(update))) =
            components.schemas.get_mut("UpdateLinkRequest")
        {
            update.min_properties = Some(1);
            update.max_properties = None;
        }
        // The rules' counts (wire's MAX_RULES, MAX_VARIANTS, MAX_VALUES; a list condition that
        // is present holds at least one value, a split at least one variant), else 422
        // `invalid_rules`.
        use shortlink_wire::rules::{MAX_RULES, MAX_VALUES, MAX_VARIANTS};
        for request in ["CreateLinkRequest", "UpdateLinkRequest", "PreviewRequest"] {
            bound_array(components, request, "rules", 0, Some(MAX_RULES));
        }
        for list in ["device", "language", "country", "query", "ip"] {
            bound_array(components, "Conditions", list, 1, Some(MAX_VALUES));
        }
        bound_array(components, "SplitSpec", "variants", 1, Some(MAX_VARIANTS));
        // The values rules check one by one (`link/rules/convert.rs`), each case-insensitive
        // where the check is.
        let day = concat!(
            "^([Mm][Oo][Nn]|[Tt][Uu][Ee]|[Ww][Ee][Dd]|[Tt][Hh][Uu]|[Ff][Rr][Ii]|",
            "[Ss][Aa][Tt]|[Ss][Uu][Nn])$"
        );
        let device = concat!(
            "^([Ii][Oo][Ss]|[Aa][Nn][Dd][Rr][Oo][Ii][Dd]|[Dd][Ee][Ss][Kk][Tt][Oo][Pp]|",
            "[Oo][Tt][Hh][Ee][Rr])$"
        );
        for (name, field, pattern, max_length) in [
            ("Conditions", "device", device, None),
            (
                "Conditions",
                "language",
                "^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$",
                Some(35),
            ),
            ("Conditions", "country", "^[A-Za-z]{2}$", None),
            ("WeeklySpec", "days", day, None),
        ] {
            if let Some(item) = array_item(components, name, field) {
                item.pattern = Some(pattern.to_owned());
                item.max_length = max_length;
            }
        }
        bound_array(components, "WeeklySpec", "days", 1, None);
        bound_array(components, "WeeklySpec", "hours", 1, None);
        if let Some(hour) = array_item(components, "WeeklySpec", "hours") {
            hour.maximum = Some(23.into());
        }
        // A query condition's name and value, in bytes (characters here: the schema's count).
        if let Some(RefOr::T(Schema::Object(query))) = components.schemas.get_mut("QuerySpec") {
            for (field, min, max) in [("name", Some(1), 255), ("value", None, 1024)] {
                if let Some(RefOr::T(Schema::Object(text))) = query.properties.get_mut(field) {
                    text.min_length = min;
                    text.max_length = Some(max);
                }
            }
        }
        // serde takes either field as optional; the checks want exactly one (else 422
        // `invalid_rules`, `invalid_replay`), which the derive cannot say.
        for (name, fields) in [
            (
                "RuleSpec",
                [("then", Type::Object), ("split", Type::Object)],
            ),
            (
                "ReplayRequest",
                [("from", Type::String), ("failure", Type::Integer)],
            ),
        ] {
            if let Some(RefOr::T(schema)) = components.schemas.remove(name) {
                let fixed = exactly_one_of(schema, &fields);
                components.schemas.insert(name.to_owned(), RefOr::T(fixed));
            }
        }
    }
}

/// At least `min` (0: any) and at most `max` items for the array property `field` of the component `name`.
fn bound_array(
    components: &mut utoipa::openapi::Components,
    name: &str,
    field: &str,
    min: usize,
    max: Option<usize>,
) {
    let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) else {
        return;
    };
    if let Some(RefOr::T(Schema::Array(array))) = object.properties.get_mut(field) {
        array.min_items = (min > 0).then_some(min);
        array.max_items = max;
    }
}

/// The object schema of the items of the array property `field` of the component `name`.
fn array_item<'a>(
    components: &'a mut utoipa::openapi::Components,
    name: &str,
    field: &str,
) -> Option<&'a mut utoipa::openapi::schema::Object> {
    let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) else {
        return None;
    };
    let Some(RefOr::T(Schema::Array(array))) = object.properties.get_mut(field) else {
        return None;
    };
    match &mut array.items {
        utoipa::openapi::schema::ArrayItems::RefOrSchema(item) => match item.as_mut() {
            RefOr::T(Schema::Object(item)) => Some(item),
            _ => None,
        },
        _ => None,
    }
}

/// An integer as JSON may write it: `3079` or `3079.0` (JSON Schema's `integer` takes both).
/// Whole numbers beyond `i64` saturate, so that validation refuses them with its own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct WholeNumber(pub i64);

impl<'de> serde::Deserialize<'de> for WholeNumber {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = WholeNumber;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a whole number")
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> std::result::Result<WholeNumber, E> {
                Ok(WholeNumber(n))
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> std::result::Result<WholeNumber, E> {
                Ok(WholeNumber(i64::try_from(n).unwrap_or(i64::MAX)))
            }

            fn visit_f64<E: serde::de::Error>(self, n: f64) -> std::result::Result<WholeNumber, E> {
                if n.fract() != 0.0 || n.is_nan() {
                    return Err(E::invalid_value(serde::de::Unexpected::Float(n), &self));
                }
                // `as` saturates at the bounds, which validation then refuses.
                Ok(WholeNumber(n as i64))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

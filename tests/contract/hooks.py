"""schemathesis hooks for tests/tests/e2e/contract.rs (loaded through SCHEMATHESIS_HOOKS).

A few rules hold between values, or against the clock or the server's state, and no JSON Schema
can state them; the OpenAPI document states them in words, with the 422 each one answers. So
that `positive_data_acceptance` stays on for every operation with no status exempted, the
positive cases are made to keep those rules, and only those, before they are sent:

- `expires_at` of a create or an update is in the future (else 422 `invalid_expiry`);
- an `Idempotency-Key` is not reused with another request (else 422 `idempotency_key_reused`):
  each positive case gets a key of its own;
- a stats query's `from` is before its `to`, at most the operation's `x-max-intervals` intervals
  apart (else 422 `invalid_range` or `range_too_large`);
- an alias is not of the generated codes' shape (7 letters and digits under the test's scheme)
  nor `batch` (else 422 `invalid_code`);
- an update changes something: null is "unchanged" for `url`, `redirect`, `forward_query` and
  `tags` but "remove" for the others, so a body of only the former, all null, is 422
  `empty_patch`;
- a string fits its bound in UTF-8 bytes where a schema counts characters (campaign, reference,
  tags, password, a card's texts; else 422 `invalid_campaign`, `invalid_ref`, `invalid_tags`,
  `invalid_password`, `invalid_preview`), and a URL fits its bound once normalised (a `/` added,
  characters percent-encoded), not only as sent (else 422 `url_too_long`, `invalid_preview`): the
  document names each bound beside the field (`x-max-bytes`, `x-max-normalised-bytes`), a value
  past it is cut, a URL that might outgrow it replaced by a short one, in bodies and queries;
- click-time rules hold real CIDRs, IANA zones, language tags and weights that do not sum to 0,
  and the link's record stays within 16 KiB (else 422 `invalid_rules`, `record_too_large`): a
  positive case's non-empty `rules` become a known-good rule set; `valid_since` is put in the
  past, so it is before any expiry (else 422 `invalid_valid_since`);
- a webhook's URL is on a public host (else 422 `private_address`; the pattern admits loopback
  and private addresses, which the deployment refuses): a positive case's URL becomes a public
  one, on a host the contract run never delivers to (its sidecar runs with `--webhooks false`);
- a replay names exactly one of `from` and `failure`, and a failure the webhook has (else 422
  `invalid_replay`, `unknown_failure`): a positive case replays from a time;
- a compose's template names only variables the recipients bring, balances its braces, has a
  `{{link}}` and fits a message (else 422 `invalid_template`), its URL template too (else 422
  `invalid_url_template`), its languages and country are known (else 422 `invalid_language`,
  `invalid_country`), and a CSV body has its `phone` header (else 422
  `invalid_csv`): the campaign becomes a known-good one; the recipients stay as generated, each
  refused on its own line;
- a conversion names its click by exactly one of `click_id` and `code` + `ref` (else 422
  `invalid_click`), has a value and a currency or neither, the value within the currency's
  decimals (else 422 `invalid_value`, `invalid_currency`), and is not in the future (else 422
  `invalid_converted_at`): a positive case keeps its `click_id` (or gets one), sends a value
  of "1" in EUR if it had either, and a time in the past. It then names no click the run has
  made: 404 `unknown_click`.
- a delivery receipt names its link by exactly one of `code`, `short_url` and `campaign` +
  `ref` (else 422 `invalid_link`), and its `at` is not in the future (else 422 `invalid_at`): a
  positive case keeps its `code` (or gets one) and a time in the past. It then names no link the
  run has made: 404 `unknown_link`;
- a callback token's `twilio_auth_token` is for the `twilio` gateway only (else 422
  `invalid_twilio_auth_token`): a positive case for another gateway drops it;
- a compose sends (`send=true`) only through a gateway the workspace has set (else 422
  `no_gateway`) and never in a dry run (else 422 `invalid_send`): a positive case does not send
  (the contract run's sidecar has no gateway; `PUT /api/v1/gateway` answers 403
  `gateways_disabled` there, as on any deployment without `--gateway-secrets-dir`).

- a workspace's block and allow lists hold host names (with a dot, as the url crate parses
  them; else 422 `invalid_host`): a positive case blocks one host no generated target uses and
  allows every host (an allow list would refuse the rest of the run's creates).

Negative cases are left as generated, but for one rule every case keeps: the run never revokes
a key that was there before it (`DELETE /api/v1/keys/{id}` with an id listed in
`SHORTLINK_CONTRACT_KEEP_KEYS` gets an id no key has, answered 404). The key the run
authenticates with is among them; revoked, every later request would be a 401 (the run through
nginx comes after the one on the sidecar, on the same database).
"""

import datetime
import os
import re
import uuid

import schemathesis

UTC = datetime.timezone.utc
INTERVAL_SECONDS = {"hour": 3600, "day": 86400}
STATS = ("GET /api/v1/stats", "GET /api/v1/links/{code}/stats")
LINK_BODIES = ("POST /api/v1/links", "PATCH /api/v1/links/{code}")
COMPOSE = "POST /api/v1/compose"
WITH_IDEMPOTENCY_KEY = ("POST /api/v1/links", "POST /api/v1/links/batch", COMPOSE)
GENERATED_SHAPE = re.compile("[A-Za-z0-9]{7}")
# The characters of the URL pattern's alphabet that the URL parser may percent-encode (3 bytes).
ENCODED = set("\"<>`{}'^|\\")
# The document's own bounds that a schema cannot state (`shortlink_model::schema::max_bytes`).
MAX_BYTES = "x-max-bytes"
MAX_NORMALISED_BYTES = "x-max-normalised-bytes"
# A bound between two query values, named on the operation (`http::stats::RangeBound`).
MAX_INTERVALS = "x-max-intervals"
NULL_UNCHANGED = {"url", "redirect", "forward_query", "tags"}
PREVIEW = "POST /api/v1/links/{code}/preview"
WEBHOOK_BODIES = ("POST /api/v1/webhooks", "PUT /api/v1/webhooks/{id}")
REPLAY = "POST /api/v1/webhooks/{id}/replay"
CONVERSIONS = "POST /api/v1/conversions"
DELIVERIES = "POST /api/v1/deliveries"
CALLBACK_TOKENS = "POST /api/v1/callback-tokens"
TARGET_LISTS = "PUT /api/v1/target-lists"
VALID_RULES = [
    {"if": {"device": ["ios"], "ip": ["192.0.2.0/24"]}, "then": {"url": "https://example.com/ios"}},
    {"if": {"weekly": {"days": ["mon"], "hours": [9], "zone": "Europe/Lisbon"}},
     "split": {"sticky": True, "variants": [{"weight": 1, "url": "https://example.com/a"}]}},
]
PAST = "2000-01-01T00:00:00+00:00"
REVOKE_KEY = "DELETE /api/v1/keys/{id}"
KEEP_KEYS = {
    part.strip() for part in os.environ.get("SHORTLINK_CONTRACT_KEEP_KEYS", "").split(",") if part.strip()
}
NO_SUCH_KEY = 9_000_000_000


def _parse(text):
    """An RFC 3339 time as Python reads it, or None (then the case is changed another way)."""
    try:
        parsed = datetime.datetime.fromisoformat(str(text).upper())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _future_expiry(body):
    if not isinstance(body, dict) or not isinstance(body.get("expires_at"), str):
        return
    at = _parse(body["expires_at"])
    if at is None or at <= datetime.datetime.now(UTC) + datetime.timedelta(minutes=1):
        body["expires_at"] = (datetime.datetime.now(UTC) + datetime.timedelta(days=1)).isoformat()


def _utf8_len(text):
    return len(text.encode("utf-8", "surrogatepass"))


def _within(text, limit):
    while _utf8_len(text) > limit:
        text = text[:-1]
    return text


def _resolved(document, schema):
    """`schema` with its local `$ref`s followed."""
    while isinstance(schema, dict) and "$ref" in schema:
        node = document
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema if isinstance(schema, dict) else {}


def _fitting(document, schema, value):
    """`value` kept within the byte bounds its schema names (`x-max-bytes`: cut to it;
    `x-max-normalised-bytes`: a URL that might outgrow it once normalised is replaced by a short
    one), through objects, arrays and the schema's `allOf`/`anyOf`/`oneOf` parts."""
    schema = _resolved(document, schema)
    for part in schema.get("allOf", []) + schema.get("anyOf", []) + schema.get("oneOf", []):
        value = _fitting(document, part, value)
    if isinstance(value, str):
        if MAX_BYTES in schema:
            value = _within(value, schema[MAX_BYTES])
        limit = schema.get(MAX_NORMALISED_BYTES)
        if limit is not None and len(value) + 1 + 2 * sum(c in ENCODED for c in value) > limit:
            value = "https://example.com/fits"
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in list(value):
            if name in properties:
                value[name] = _fitting(document, properties[name], value[name])
    elif isinstance(value, list) and "items" in schema:
        value[:] = [_fitting(document, schema["items"], item) for item in value]
    return value


def _fitting_body(case):
    operation = case.operation.definition.raw
    document = case.operation.schema.raw_schema
    content = _resolved(document, operation.get("requestBody", {})).get("content", {})
    media = content.get(case.media_type or "application/json", {})
    # Assigned only when replaced: schemathesis revalidates a case's assigned parts, and an
    # absent body assigned back reads as a missing one.
    if "schema" in media and isinstance(case.body, (dict, list, str)):
        fitted = _fitting(document, media["schema"], case.body)
        if fitted is not case.body:
            case.body = fitted


def _fitting_query(case):
    operation = case.operation.definition.raw
    document = case.operation.schema.raw_schema
    for parameter in operation.get("parameters", []):
        parameter = _resolved(document, parameter)
        name = parameter.get("name")
        if parameter.get("in") == "query" and case.query and name in case.query:
            fitted = _fitting(document, parameter.get("schema", {}), case.query[name])
            if fitted is not case.query[name]:
                case.query[name] = fitted


def _no_generated_shape_alias(body):
    if not isinstance(body, dict):
        return
    code = body.get("code")
    if isinstance(code, str) and (GENERATED_SHAPE.fullmatch(code) or code == "batch"):
        body["code"] = code[:-1] + "_"


def _valid_rules(body):
    if not isinstance(body, dict):
        return
    if isinstance(body.get("rules"), list) and body["rules"]:
        body["rules"] = VALID_RULES
    if isinstance(body.get("valid_since"), str):
        body["valid_since"] = PAST


def _valid_preview_rules(body):
    # The address and the country need nothing: their schemas (ipv4/ipv6 formats, two letters)
    # are exactly what the server takes.
    if isinstance(body, dict) and isinstance(body.get("rules"), list) and body["rules"]:
        body["rules"] = VALID_RULES


def _valid_campaign(case):
    query = case.query if case.query is not None else {}
    query["template"] = "Hi, {{link}}"
    query.pop("url_template", None)
    if "languages" in query:
        query["languages"] = "turkish,spanish"
    if "country" in query:
        query["country"] = "PT"
    case.query = query
    if case.media_type == "text/csv":
        case.body = "phone\n" + (case.body if isinstance(case.body, str) else "")


def _changes_something(body):
    if isinstance(body, dict) and body and all(
        key in NULL_UNCHANGED and value is None for key, value in body.items()
    ):
        body["forward_query"] = False


def _own_idempotency_key(headers):
    for name in list(headers or {}):
        if name.lower() == "idempotency-key":
            headers[name] = f"{str(headers[name])[:200]}.{uuid.uuid4().hex}"


def _stats_range(case):
    """Keeps `from` < `to` (as the server aligns them to the interval) and the intervals within
    the operation's `x-max-intervals`."""
    query = case.query
    if not query or ("from" not in query and "to" not in query):
        return
    max_intervals = case.operation.definition.raw[MAX_INTERVALS]
    seconds = INTERVAL_SECONDS.get(query.get("interval") or "day", 86400)
    try:
        to = _parse(query["to"]) if "to" in query else datetime.datetime.now(UTC)
        start = _parse(query["from"]) if "from" in query else None
        if to is None or ("from" in query and start is None):
            raise ValueError("not readable here")
        if start is not None:
            low = start.timestamp() // seconds * seconds
            high = -(-to.timestamp() // seconds) * seconds
            if low < high and (high - low) / seconds <= max_intervals:
                return
        # `from` one interval before `to`: a link's default `from`, its creation, may be after it.
        query["from"] = (to - datetime.timedelta(seconds=seconds)).astimezone(UTC).isoformat()
    except (ValueError, OverflowError, OSError):
        # Times Python cannot handle: the defaults, always a valid range.
        query.pop("from", None)
        query.pop("to", None)


@schemathesis.hook
def map_case(context, case):
    return _keep_rules(case)


@schemathesis.hook
def before_add_examples(context, examples):
    """The examples phase fills what the schema gives no example for (`expires_at` with
    2000-01-01), and runs no `map_case`."""
    for case in examples:
        _keep_rules(case)


def _keep_rules(case):
    path = case.path_parameters or {}
    if case.operation.label == REVOKE_KEY and str(path.get("id")) in KEEP_KEYS:
        case.path_parameters["id"] = NO_SUCH_KEY
    meta = case.meta
    if meta is not None and not meta.generation.mode.is_positive:
        return case
    label = case.operation.label
    _fitting_body(case)
    _fitting_query(case)
    if label in LINK_BODIES:
        _future_expiry(case.body)
        _no_generated_shape_alias(case.body)
        _valid_rules(case.body)
    if label == PREVIEW:
        _valid_preview_rules(case.body)
    if label == COMPOSE:
        _valid_campaign(case)
        if case.query:
            case.query.pop("send", None)
    if label == "PATCH /api/v1/links/{code}":
        _changes_something(case.body)
    if label in WITH_IDEMPOTENCY_KEY:
        _own_idempotency_key(case.headers)
    if label in STATS:
        _stats_range(case)
    if label in WEBHOOK_BODIES and isinstance(case.body, dict):
        case.body["url"] = "https://hooks.example/in"
    if label == REPLAY:
        case.body = {"from": datetime.datetime.now(UTC).isoformat()}
    if label == CONVERSIONS and isinstance(case.body, dict):
        _one_click_and_money(case.body)
    if label == DELIVERIES and isinstance(case.body, dict):
        _one_link(case.body)
    if label == TARGET_LISTS and isinstance(case.body, dict):
        # An allow list would refuse every link the rest of the run creates.
        case.body = {"block": ["blocked.example"], "allow": []}
    if label == CALLBACK_TOKENS and isinstance(case.body, dict):
        if case.body.get("gateway") != "twilio":
            case.body.pop("twilio_auth_token", None)
    return case


def _one_link(body):
    if not isinstance(body.get("code"), str):
        body["code"] = "no-such-code"
    for name in ("short_url", "campaign", "ref"):
        body.pop(name, None)
    if body.get("at") is not None:
        body["at"] = PAST


def _one_click_and_money(body):
    if not isinstance(body.get("click_id"), str):
        body["click_id"] = "no-such-click"
    body.pop("code", None)
    body.pop("ref", None)
    money = body.get("value") is not None or body.get("currency") is not None
    body.pop("value", None)
    body.pop("currency", None)
    if money:
        body["value"] = "1"
        body["currency"] = "EUR"
    if body.get("converted_at") is not None:
        body["converted_at"] = PAST

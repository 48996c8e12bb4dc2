//! Every size the API accepts, in one place, and the room each hop of a click needs for it.
//!
//! A link is accepted once and then clicked through whatever path is up that day: the module,
//! nginx's fallback to the sidecar while Redis is away, the API server's resolve, an import on a
//! new machine. Each hop has buffers of its own (nginx's proxy buffer above all), and a limit
//! that one hop does not carry breaks sent links during exactly the outage the fallback exists
//! for. So the limits live here, the hops size themselves from them, and
//! `tests/tests/e2e/limits.rs` walks each one at its maximum through every path: raising a limit
//! here fails that walk until every hop carries it.

use crate::preview;

/// The longest target (`url`, `not_yet_url`, `expired_url`, a rule's or a variant's `url`)
/// the API accepts by default, in bytes, before and after normalisation.
pub const TARGET_BYTES: usize = 5000;

/// The most `--max-url-length` may raise [`TARGET_BYTES`] to: what the shipped nginx
/// configurations are sized for ([`ANSWER_HEADER_BYTES`]).
pub const TARGET_BYTES_CEILING: usize = 8192;

/// nginx's request line must fit one of its `large_client_header_buffers` (8k unless configured;
/// no shipped configuration changes it): a longer one is answered 414 before any module runs.
/// It bounds the query string a link forwards to its target.
pub const REQUEST_LINE_BYTES: usize = 8192;

/// The longest query string a click can forward: the request line less its method, path and
/// version, so never more than this.
pub const FORWARDED_QUERY_BYTES: usize = REQUEST_LINE_BYTES;

/// The longest `Location` any answer carries: the longest target, a separator and the longest
/// forwarded query.
pub const LOCATION_BYTES: usize = TARGET_BYTES_CEILING + 1 + FORWARDED_QUERY_BYTES;

/// The header block of the sidecar's longest answer (status line, `Location`, `Cache-Control`,
/// `Content-Type`, `Content-Length`, `Date`, `Set-Cookie` of the console): `Location` plus a
/// generous 4 KiB for the rest.
pub const ANSWER_HEADER_BYTES: usize = LOCATION_BYTES + 4096;

/// `proxy_buffer_size` of every shipped nginx location that proxies to the sidecar (the
/// fallback, the API server, the imported-domain server, the Debian package's site): nginx
/// reads an upstream's whole header block into this one buffer and answers 502 ("upstream sent
/// too big header") when it does not fit. `tests/tests/e2e/limits.rs` reads the shipped files.
pub const PROXY_BUFFER_BYTES: usize = 32 * 1024;

const _: () = assert!(ANSWER_HEADER_BYTES <= PROXY_BUFFER_BYTES);

/// The largest link record (`sl:c:<code>`): the module keeps a decoded copy per cached link
/// and reads it in one Redis reply. A link's URLs and rules together must fit.
pub const RECORD_BYTES: usize = 16 * 1024;

/// The longest code: a custom alias, or a code imported from another shortener.
pub const CODE_BYTES: usize = shortcode::ALIAS_MAX_LEN;

const _: () = assert!(shortcode::IMPORTED_MAX_LEN == CODE_BYTES);

/// The longest password a link may have, and a password form may submit.
pub const PASSWORD_BYTES: usize = crate::record::password::MAX_PASSWORD_BYTES;

/// The shortest password a link may have, in characters: the attempt budgets
/// (docs/SECURITY.md, "Password links") make guessing slow, not impossible.
pub const PASSWORD_MIN_CHARS: usize = 8;

/// A preview card's fields, in bytes.
pub const CARD_TITLE_BYTES: usize = preview::MAX_TITLE;
pub const CARD_DESCRIPTION_BYTES: usize = preview::MAX_DESCRIPTION;
pub const CARD_IMAGE_BYTES: usize = preview::MAX_IMAGE;
pub const CARD_SITE_NAME_BYTES: usize = preview::MAX_SITE_NAME;

/// The largest request body of a single API call, and the longest line of an NDJSON batch (one
/// link): a target of the ceiling plus every other field fits many times over. nginx's API
/// server refuses larger bodies itself (`client_max_body_size`, twice this for chunked framing).
pub const REQUEST_BODY_BYTES: usize = 64 * 1024;

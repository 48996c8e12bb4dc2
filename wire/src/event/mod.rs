//! Visit events: what the module appends to the visit stream ([`crate::keys::EVENT_STREAM`]) and
//! the sidecar's consumer reads back. Every answered redirect or 410 is one visit; the visits
//! made in one pass of nginx's event loop leave together as **one** stream entry,
//! `XADD sl:events MAXLEN ~ <cap> * v <batch>`.
//!
//! A batch is a format byte ([`BATCH_FORMAT`]), then its visits one after the other: in format 7
//! each a binary head (flags, time, status, signals: [`VISIT_HEAD`]) and its text fields, each a
//! little-endian `u16` length and the bytes (which ones: [`BATCH_FORMAT`]). [`encode`] writes it
//! (the module), [`decode`] frames it back (the consumer); the limits below are what the writer
//! cuts to and the reader keeps. Older modules wrote every field as text, thirteen
//! length-prefixed fields of [`VISIT_FIELDS`] a visit (length 0 = absent) in format 6, and the
//! first eight, nine, ten, eleven or twelve in formats 1 (before click-time rules), 2 (before
//! click ids), 3 (before orphan visits), 4 (before the host's workspace) and 5 (before the
//! request's signals); the consumer reads them all (upgrade the sidecars first).

pub mod decode;
pub mod encode;
mod visit;

pub use decode::{visits, BatchError, DecodedVisit, VisitFields};
pub use encode::{Batch, Encoder, BATCH_MAX_BYTES, BATCH_MAX_VISITS};
pub use visit::{
    chosen_text, parse_chosen, truncate, OrphanKind, Visit, BATCH_FIELD, BATCH_FORMAT,
    BATCH_FORMAT_1, BATCH_FORMAT_2, BATCH_FORMAT_3, BATCH_FORMAT_4, BATCH_FORMAT_5, BATCH_FORMAT_6,
    FORMAT_1_FIELDS, FORMAT_2_FIELDS, FORMAT_3_FIELDS, FORMAT_4_FIELDS, FORMAT_5_FIELDS,
    FORMAT_6_FIELDS, HAS_ID, HAS_ORPHAN, HAS_RULE, HAS_WORKSPACE, KNOWN_FLAGS, MAX_CODE, MAX_HOST,
    MAX_IP, MAX_LANG, MAX_PATH, MAX_REFERER, MAX_UA, MAX_WORKSPACE, VISIT_FIELDS, VISIT_HEAD,
};

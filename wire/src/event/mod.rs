//! Visit events: what the module appends to the visit stream ([`crate::keys::EVENT_STREAM`]) and
//! the sidecar's consumer reads back. Every answered redirect or 410 is one visit; the visits
//! made in one pass of nginx's event loop leave together as **one** stream entry,
//! `XADD sl:events MAXLEN ~ <cap> * v <batch>`.
//!
//! A batch is a format byte ([`BATCH_FORMAT`]), then per visit the thirteen fields of
//! [`VISIT_FIELDS`] in that order, each a little-endian `u16` length and the bytes (length 0 =
//! absent). [`encode`] writes it (the module), [`decode`] frames it back (the consumer); the
//! limits below are what the writer cuts to and the reader keeps. Format 1, written by modules
//! before click-time rules, has the first eight fields only, format 2, before click ids, the
//! first nine, format 3, before orphan visits, ten, format 4, before the host's workspace,
//! eleven, format 5, before the request's signals, twelve; the consumer reads them all (upgrade the sidecars first).

pub mod decode;
pub mod encode;
mod visit;

pub use decode::{visits, BatchError, VisitFields};
pub use encode::{Batch, Encoder, BATCH_MAX_BYTES, BATCH_MAX_VISITS};
pub use visit::{
    chosen_text, parse_chosen, truncate, OrphanKind, Visit, BATCH_FIELD, BATCH_FORMAT,
    BATCH_FORMAT_1, BATCH_FORMAT_2, BATCH_FORMAT_3, BATCH_FORMAT_4, BATCH_FORMAT_5,
    FORMAT_1_FIELDS, FORMAT_2_FIELDS, FORMAT_3_FIELDS, FORMAT_4_FIELDS, FORMAT_5_FIELDS, MAX_CODE,
    MAX_HOST, MAX_IP, MAX_LANG, MAX_PATH, MAX_REFERER, MAX_UA, MAX_WORKSPACE, VISIT_FIELDS,
};

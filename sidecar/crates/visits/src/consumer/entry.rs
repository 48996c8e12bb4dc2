//! One stream entry as the consumer reads it, before its visits are parsed.

/// One stream entry as read: `fields` is `None` when the entry was trimmed away while pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub id: String,
    pub fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

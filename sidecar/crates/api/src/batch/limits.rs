//! How a batch is cut and how much of it is held: the sizes the body reader, the pipeline and
//! the handler share.

/// Items per chunk: one bulk insert, one Redis `MULTI`.
pub const CHUNK: usize = 1000;
/// Chunks checked (parsed, validated) at once, in parallel blocking tasks: a few, as each
/// thread brings its own allocator arena (peak memory), and checking is not the bottleneck.
pub const PARALLEL_CHUNKS: usize = 4;
/// Most chunks per group: one transaction and one response frame. A group takes the chunks
/// already checked, so a small batch never waits for more.
pub const GROUP_CHUNKS: usize = 8;
/// Checked chunks kept waiting for the writer: a group's worth, so a full group is ready when
/// the previous one is handed to its transaction.
pub const CHECKED_AHEAD: usize = GROUP_CHUNKS;
/// Chunks' results held while the body is still being read (about 400 KB each): the writing
/// waits once they are full, the reading of the body does not.
pub const HELD_FRAMES: usize = 2 * GROUP_CHUNKS;
/// Room reserved per rendered result: a created link's NDJSON line is ~400 bytes (the bench's
/// items: 404 with the newline, and a short URL adds its length), so it is rarely outgrown.
pub(crate) const RESULT_BYTES: usize = 512;
/// Most items in a JSON array body.
pub const MAX_JSON_ITEMS: usize = 10_000;
/// Most lines in an NDJSON body.
pub const MAX_NDJSON_ITEMS: usize = 1_000_000;
/// Largest JSON array body: the item limit times a generous item.
pub const MAX_JSON_BYTES: usize = 80 * 1024 * 1024;
/// Longest NDJSON line (one item).
pub const MAX_LINE_BYTES: usize = crate::MAX_BODY_BYTES;

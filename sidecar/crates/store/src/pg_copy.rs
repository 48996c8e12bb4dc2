//! PostgreSQL's binary `COPY` format, for the bulk writers (batch links, raw visits).
//!
//! `COPY ... FROM STDIN (FORMAT binary)` puts rows straight into the table through the server's
//! bulk insert path: no arrays to decode, no function rows materialised in a tuple store, no
//! probe of the unique indexes before each speculative insert, as `INSERT ... SELECT FROM
//! UNNEST(...) ON CONFLICT DO NOTHING` costs (about half of the backend's time, by perf, for both
//! writers). `COPY` has no `ON CONFLICT`: callers run it in a savepoint and take the `INSERT`
//! path when a unique conflict stops it.

use chrono::{DateTime, Utc};

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Signature, flags and header extension length of the binary format.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Version byte that starts a `jsonb` value in binary form (the JSON text follows).
const JSONB_VERSION: u8 = 1;

/// One binary `COPY` stream: header, tuples, then [`CopyData::finish`] adds the trailer.
pub struct CopyData {
    out: Vec<u8>,
}

impl CopyData {
    /// A stream with room for `rows` tuples of about `row_bytes` each.
    pub fn with_capacity(rows: usize, row_bytes: usize) -> Self {
        let mut out = Vec::with_capacity(HEADER.len() + 2 + rows * row_bytes);
        out.extend_from_slice(HEADER);
        Self { out }
    }

    /// Starts a tuple of `columns` fields; exactly that many field calls must follow.
    pub fn tuple(&mut self, columns: i16) -> &mut Self {
        self.out.extend_from_slice(&columns.to_be_bytes());
        self
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        // Every value written is far under 2 GiB: items and visits are capped long before.
        let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.extend_from_slice(bytes);
        self
    }

    pub fn text(&mut self, value: &str) -> &mut Self {
        self.bytes(value.as_bytes())
    }

    pub fn opt_text(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.text(value),
            None => self.null(),
        }
    }

    /// A `jsonb` field from its JSON text.
    pub(crate) fn opt_jsonb(&mut self, json: Option<&str>) -> &mut Self {
        let Some(json) = json else {
            return self.null();
        };
        let len = i32::try_from(json.len() + 1).unwrap_or(i32::MAX);
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.push(JSONB_VERSION);
        self.out.extend_from_slice(json.as_bytes());
        self
    }

    pub(crate) fn int2(&mut self, value: i16) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    pub fn opt_int2(&mut self, value: Option<i16>) -> &mut Self {
        match value {
            Some(value) => self.int2(value),
            None => self.null(),
        }
    }

    pub(crate) fn int4(&mut self, value: i32) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    pub(crate) fn int8(&mut self, value: i64) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    pub fn opt_int8(&mut self, value: Option<i64>) -> &mut Self {
        match value {
            Some(value) => self.int8(value),
            None => self.null(),
        }
    }

    pub fn timestamptz(&mut self, at: DateTime<Utc>) -> &mut Self {
        self.int8(at.timestamp_micros() - PG_EPOCH_MICROS)
    }

    pub(crate) fn opt_timestamptz(&mut self, at: Option<DateTime<Utc>>) -> &mut Self {
        match at {
            Some(at) => self.timestamptz(at),
            None => self.null(),
        }
    }

    pub(crate) fn null(&mut self) -> &mut Self {
        self.out.extend_from_slice(&(-1i32).to_be_bytes());
        self
    }

    /// The stream, trailer included.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(&(-1i16).to_be_bytes());
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_trailer_frame_the_tuples() {
        let empty = CopyData::with_capacity(0, 0).finish();
        assert_eq!(&empty[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(empty.len(), 19 + 2);
        assert_eq!(&empty[19..], &[0xff, 0xff]);
    }

    #[test]
    fn fields_are_length_prefixed_big_endian() {
        let mut copy = CopyData::with_capacity(1, 64);
        copy.tuple(4)
            .text("ab")
            .null()
            .opt_jsonb(Some("[]"))
            .timestamptz(DateTime::from_timestamp(946_684_801, 0).unwrap());
        let data = copy.finish();
        assert_eq!(
            &data[19..data.len() - 2],
            &[
                0, 4, // four fields
                0, 0, 0, 2, b'a', b'b', // text
                0xff, 0xff, 0xff, 0xff, // NULL
                0, 0, 0, 3, 1, b'[', b']', // jsonb: version 1, then the text
                0, 0, 0, 8, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, // 1 s after 2000-01-01
            ][..]
        );
    }
}

//! Raw visits in PostgreSQL's binary `COPY` format: the rows go straight into `visits` through
//! the server's bulk insert path. Compared with `INSERT ... SELECT * FROM UNNEST(21 arrays) ON
//! CONFLICT DO NOTHING` the server no longer decodes 21 arrays, materialises the function's rows
//! in a tuple store, nor probes the primary key once before each speculative insert (those were
//! about half of the backend's time on the insert of visits, by perf). `COPY` has no `ON
//! CONFLICT`: the caller runs it in a savepoint and takes the slow path when a row is already
//! there ([`super::postgres`]).

use super::visitor_bytes;
use shortlink_analytics::Visit;

/// The statement the buffer of [`encode`] is for (columns in the order encoded).
pub(super) const COPY_VISITS: &str = "COPY visits (event_id, code, visited_at, status, ip, \
     visitor, user_agent, browser, browser_version, os, os_version, device, audience, agent, \
     country, region, city, isp, referrer_host, short_domain, language) FROM STDIN (FORMAT binary)";

const COLUMNS: i16 = 21;

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Signature, flags and header extension length of the binary format.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// The whole binary `COPY` stream of `visits` (header, one tuple each, trailer).
pub(super) fn encode(visits: &[&Visit]) -> Vec<u8> {
    // About 200 bytes of fixed fields and framing plus the text, most of it the user agent.
    let mut out = Vec::with_capacity(HEADER.len() + 2 + visits.len() * 400);
    out.extend_from_slice(HEADER);
    for v in visits {
        out.extend_from_slice(&COLUMNS.to_be_bytes());
        text(&mut out, &v.event_id);
        text(&mut out, &v.code);
        // As the array path bound it: chrono's range, the Unix epoch when out of it.
        let micros = super::postgres::at_ms(v.time_ms).timestamp_micros() - PG_EPOCH_MICROS;
        field(&mut out, &micros.to_be_bytes());
        match v.status.and_then(|s| i16::try_from(s).ok()) {
            Some(status) => field(&mut out, &status.to_be_bytes()),
            None => null(&mut out),
        }
        opt(&mut out, &v.ip);
        field(&mut out, &visitor_bytes(&v.visitor));
        opt(&mut out, &v.user_agent);
        opt(&mut out, &v.browser);
        opt(&mut out, &v.browser_version);
        opt(&mut out, &v.os);
        opt(&mut out, &v.os_version);
        text(&mut out, v.device.as_str());
        text(&mut out, v.audience.as_str());
        opt(&mut out, &v.agent_label);
        opt(&mut out, &v.country);
        opt(&mut out, &v.region);
        opt(&mut out, &v.city);
        opt(&mut out, &v.isp);
        opt(&mut out, &v.referrer_host);
        opt(&mut out, &v.short_domain);
        opt(&mut out, &v.language);
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

fn field(out: &mut Vec<u8>, bytes: &[u8]) {
    // A field is far under 2 GiB: the module caps every value (a user agent at 1 KiB).
    let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

fn text(out: &mut Vec<u8>, value: &str) {
    field(out, value.as_bytes());
}

fn opt(out: &mut Vec<u8>, value: &Option<String>) {
    match value {
        Some(value) => text(out, value),
        None => null(out),
    }
}

fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_trailer_frame_the_tuples() {
        let empty = encode(&[]);
        assert_eq!(&empty[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(empty.len(), 19 + 2);
        assert_eq!(&empty[19..], &[0xff, 0xff]);
    }
}

//! Raw visits in PostgreSQL's binary `COPY` format ([`shortlink_store::pg_copy`]): the rows go
//! straight into `visits` through the server's bulk insert path. `COPY` has no `ON CONFLICT`: the
//! caller runs it in a savepoint and takes the slow path when a row is already there
//! ([`super::postgres`]).

use chrono::{DateTime, Utc};
use shortlink_store::pg_copy::CopyData;
use shortlink_visit_enrich::Visit;

/// A visit's time as PostgreSQL's `timestamptz` takes it, for `COPY` and the slow path alike.
pub(super) fn at_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The statement the buffer of [`encode`] is for (columns in the order encoded).
pub(super) const COPY_VISITS: &str = "COPY visits (event_id, code, visited_at, status, ip, \
     visitor, agent_id, browser, browser_version, os, os_version, device, audience, agent, \
     country, region, city, isp, referrer_host, short_domain, language, rule, reasons) \
     FROM STDIN (FORMAT binary)";

const COLUMNS: i16 = 23;

/// The whole binary `COPY` stream of `visits`.
pub(super) fn encode(visits: &[&Visit]) -> Vec<u8> {
    // About 200 bytes of fixed fields and framing plus the text (the user agent is an id).
    let mut copy = CopyData::with_capacity(visits.len(), 300);
    for v in visits {
        copy.tuple(COLUMNS)
            .text(&v.event_id)
            .text(&v.code)
            // As the array path bound it: chrono's range, the Unix epoch when out of it.
            .timestamptz(at_ms(v.time_ms))
            .opt_int2(v.status.and_then(|s| i16::try_from(s).ok()))
            .opt_text(v.ip.as_deref())
            .bytes(&v.visitor)
            .opt_int8(v.user_agent_id)
            .opt_text(v.agent.browser.as_deref())
            .opt_text(v.agent.browser_version.as_deref())
            .opt_text(v.agent.os.as_deref())
            .opt_text(v.agent.os_version.as_deref())
            .text(v.agent.device.as_str())
            .text(v.agent.audience.as_str())
            .opt_text(v.agent.agent_label)
            .opt_text(v.country.as_deref())
            .opt_text(v.region.as_deref())
            .opt_text(v.city.as_deref())
            .opt_text(v.isp.as_deref())
            .opt_text(v.referrer_host.as_deref())
            .opt_text(v.short_domain.as_deref())
            .opt_text(v.language.as_deref())
            .opt_text(v.rule.as_deref())
            .opt_int2(Some(v.reasons.0 as i16));
    }
    copy.finish()
}

//! The weekly time window: weekdays and hours of the day on the clock of a time zone, daylight
//! saving included (the zone's rules come with the build, from the IANA database).

use chrono::{Datelike, TimeZone, Timelike};
use chrono_tz::Tz;

/// Clicks on `days` (bit 0 Monday … bit 6 Sunday) within `hours` (bit h: from h:00 to h:59),
/// local time in `zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weekly {
    pub days: u8,
    pub hours: u32,
    pub zone: Tz,
}

impl Weekly {
    pub const ALL_DAYS: u8 = 0x7f;
    pub const ALL_HOURS: u32 = 0x00ff_ffff;

    pub fn contains(&self, now_unix: u64) -> bool {
        let Ok(seconds) = i64::try_from(now_unix) else {
            return false;
        };
        let Some(utc) = chrono::DateTime::from_timestamp(seconds, 0) else {
            return false;
        };
        let local = self.zone.from_utc_datetime(&utc.naive_utc());
        let day = local.weekday().num_days_from_monday();
        self.days & (1 << day) != 0 && self.hours & (1 << local.hour()) != 0
    }

    /// The zone by its IANA name (`Europe/Lisbon`), as the record and the API spell it.
    pub fn zone_named(name: &str) -> Option<Tz> {
        name.parse().ok()
    }
}

//! The time formats the sources write: RFC 3339 (Shlink, Kutt), ISO 8601 with a `+0000`
//! offset (Bitly), SQL's `YYYY-MM-DD HH:MM:SS` (YOURLS, in UTC), Unix seconds (a CSV).

use chrono::{DateTime, NaiveDateTime, SubsecRound, Utc};

pub fn parse(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let at = DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%z"))
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .map(|at| at.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
                .ok()
                .map(|at| at.and_utc())
        })
        .or_else(|| {
            text.parse::<i64>()
                .ok()
                .and_then(|secs| DateTime::from_timestamp(secs, 0))
        })?;
    Some(at.trunc_subsecs(6))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn every_source_format() {
        let want = "2024-03-01T10:20:30Z";
        for text in [
            "2024-03-01T10:20:30Z",
            "2024-03-01T11:20:30+01:00",
            "2024-03-01T10:20:30+0000",
            "2024-03-01 10:20:30",
            "1709288430",
        ] {
            assert_eq!(
                parse(text)
                    .unwrap()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                want,
                "{text}"
            );
        }
        assert_eq!(parse(""), None);
        assert_eq!(parse("yesterday"), None);
    }
}

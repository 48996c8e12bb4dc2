//! Receipts from every gateway (issue 68, docs/DELIVERIES.md): each gateway's report read into
//! one [`Report`] whose state is already a [`DeliveryState`] ([`kannel`], [`twilio`],
//! [`vonage`]; the API's `POST /api/v1/deliveries` reads its JSON into the same), checked into
//! the store's [`NewReceipt`] by the one [`check`], and written by a group commit per workspace
//! ([`group`]).
//!
//! **The time** (issue 77). One rule for every gateway: a report's time outside [now − 31 days,
//! now + 5 minutes] is not believed, and the receipt is taken at the time it was received. 31
//! days is the longest report window a job keeps its callback (720 h) and a day; a report cannot
//! be older than its message. The receipt is kept (a gateway does not send a refused report
//! again, and its state is worth more than its time), but a year-0 or year-2100 `ts` is never
//! stored.

pub mod group;
pub mod kannel;
pub mod params;
pub mod twilio;
pub mod vonage;

use chrono::{DateTime, Duration, Utc};
use shortlink_visits::deliveries::model::{
    bounded_text, key_text, opt_key_text, MAX_CARRIER, MAX_ERROR_CODE, MAX_MESSAGE_ID,
};
use shortlink_visits::deliveries::{DeliveryState, Gateway, Invalid, LinkRef, NewReceipt};

/// Longest `code`, `campaign`, `ref` or `short_url` read.
pub const MAX_NAME: usize = 2048;
/// How far ahead of ours a gateway's clock may be.
pub const MAX_AHEAD: Duration = Duration::minutes(5);
/// How old a report may be: the longest report window (720 h) and a day.
pub const MAX_BEHIND: Duration = Duration::hours(720 + 24);

/// A gateway's report as read, before its fields are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The link: exactly one of `code`, `short_url`, `campaign` with `recipient_ref`.
    pub code: Option<String>,
    pub short_url: Option<String>,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    pub message_id: String,
    pub state: DeliveryState,
    pub error_code: Option<String>,
    pub error_text: Option<String>,
    pub carrier: Option<String>,
    /// The gateway's time of the report (`None`: now).
    pub at: Option<DateTime<Utc>>,
}

impl Report {
    /// A report of `state` for message `message_id`, naming no link yet.
    pub fn new(message_id: impl Into<String>, state: DeliveryState) -> Self {
        Report {
            code: None,
            short_url: None,
            campaign: None,
            recipient_ref: None,
            message_id: message_id.into(),
            state,
            error_code: None,
            error_text: None,
            carrier: None,
            at: None,
        }
    }
}

/// The state `table` (a gateway's statuses) maps `status` to, if it has it.
fn state_of<K: PartialEq + Copy>(
    table: &[(K, DeliveryState)],
    status: Option<K>,
) -> Option<DeliveryState> {
    let status = status?;
    (table.iter()).find_map(|(name, state)| (*name == status).then_some(*state))
}

/// `at` if a report can have it as of `now`, else `now`.
pub fn believable(at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    match now - MAX_BEHIND <= at && at <= now + MAX_AHEAD {
        true => at,
        false => now,
    }
}

/// The report's fields checked (no I/O yet), received from `gateway` at `now`.
pub fn check(report: Report, gateway: Gateway, now: DateTime<Utc>) -> Result<NewReceipt, Invalid> {
    let (link, short_domain) = link_of(&report)?;
    Ok(NewReceipt {
        link,
        short_domain,
        message_id: key_text("message_id", &report.message_id, MAX_MESSAGE_ID)?,
        state: report.state,
        error_code: opt_key_text("error_code", report.error_code.as_deref(), MAX_ERROR_CODE)?,
        error_text: bounded_text(report.error_text.as_deref()),
        carrier: opt_key_text("carrier", report.carrier.as_deref(), MAX_CARRIER)?,
        at: report.at.map_or(now, |at| believable(at, now)),
        gateway,
    })
}

/// The link a report names: exactly one of `code`, `short_url` and `campaign` + `ref`; with
/// the short URL's host.
fn link_of(report: &Report) -> Result<(LinkRef, Option<String>), Invalid> {
    let name = |field, text: &Option<String>| {
        (text.as_deref())
            .map(|text| key_text(field, text, MAX_NAME))
            .transpose()
    };
    let code = name("code", &report.code)?;
    let short_url = name("short_url", &report.short_url)?;
    let campaign = name("campaign", &report.campaign)?;
    let recipient_ref = name("ref", &report.recipient_ref)?;
    match (code, short_url, campaign, recipient_ref) {
        (Some(code), None, None, None) => Ok((LinkRef::Code(code), None)),
        (None, Some(url), None, None) => {
            let (code, host) = short_url_parts(&url).ok_or_else(|| {
                Invalid::new(
                    "short_url",
                    "`short_url` is not a short URL (https://host/code)",
                )
            })?;
            Ok((LinkRef::Code(code), Some(host)))
        }
        (None, None, Some(campaign), Some(recipient_ref)) => Ok((
            LinkRef::Recipient {
                campaign,
                recipient_ref,
            },
            None,
        )),
        _ => Err(Invalid::new(
            "link",
            "name the link by exactly one of `code`, `short_url`, and `campaign` with `ref`",
        )),
    }
}

/// A short URL's code and (lower-case) host.
fn short_url_parts(url: &str) -> Option<(String, String)> {
    let url = url::Url::parse(url).ok()?;
    let host = (url.host_str()).filter(|host| host.len() <= 253)?;
    let code = (url.path_segments()?.next()).filter(|code| !code.is_empty())?;
    Some((code.to_owned(), host.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_no_report_can_have_are_the_received_time() {
        let now = Utc::now();
        for good in [now, now - Duration::days(30), now + Duration::minutes(4)] {
            assert_eq!(believable(good, now), good);
        }
        let year_0 = DateTime::parse_from_rfc3339("0000-01-01T00:00:00Z").unwrap();
        let year_2100 = DateTime::parse_from_rfc3339("2100-01-01T00:00:00Z").unwrap();
        for bad in [year_0.into(), year_2100.into(), now + Duration::minutes(6)] {
            assert_eq!(believable(bad, now), now, "{bad}");
        }
        assert_eq!(believable(now - Duration::days(32), now), now);
    }
}

//! Vonage's (Nexmo's) SMS delivery receipts: a JSON POST, or the same fields as a GET query.
//! The callback URL, set as the account's or the message's delivery receipt URL:
//!
//! `…/callbacks/<token>/vonage` (with `?code=<CODE>` when the message's `client-ref` is not the
//! link's code)
//!
//! `messageId` is the idempotency key; `status` maps one to one (`accepted` is `submitted`);
//! `err-code` `0` is no error; `network-code` (MCC-MNC) is the carrier; `message-timestamp`
//! (`YYYY-MM-DD HH:MM:SS`, UTC) the time. `msisdn`, the recipient's number, is dropped unread.

use super::params::Params;
use super::{state_of, Report};
use chrono::NaiveDateTime;
use shortlink_visits::deliveries::{DeliveryState, Invalid};

/// Vonage's statuses and the state each reports (ours by name, but `accepted`).
pub const STATUSES: [(&str, DeliveryState); 7] = [
    ("delivered", DeliveryState::Delivered),
    ("expired", DeliveryState::Expired),
    ("failed", DeliveryState::Failed),
    ("rejected", DeliveryState::Rejected),
    ("accepted", DeliveryState::Submitted),
    ("buffered", DeliveryState::Buffered),
    ("unknown", DeliveryState::Unknown),
];

/// The fields read (a JSON body's must be strings).
pub const FIELDS: [&str; 6] = [
    "messageId",
    "status",
    "err-code",
    "network-code",
    "message-timestamp",
    "client-ref",
];

/// The receipt of one call: `body` (the JSON object's fields, or the query's) and the callback
/// URL's own query (`code`).
pub fn report(body: &Params, query: &Params) -> Result<Report, Invalid> {
    let status = body.get("status").map(str::trim);
    let state = state_of(&STATUSES, status).ok_or_else(|| {
        Invalid::new(
            "state",
            "`status` is one of delivered, expired, failed, rejected, accepted, buffered, unknown",
        )
    })?;
    // A time that cannot be read is taken as now: the report is worth more than its time.
    let at = (body.get("message-timestamp"))
        .and_then(|text| NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S").ok())
        .map(|at| at.and_utc());
    let code = (body.get("client-ref").filter(|c| !c.trim().is_empty()))
        .or_else(|| query.get("code"))
        .map(str::to_owned);
    Ok(Report {
        code,
        error_code: body
            .get("err-code")
            .filter(|code| code.trim() != "0")
            .map(str::to_owned),
        carrier: body.get("network-code").map(str::to_owned),
        at,
        ..Report::new(body.get("messageId").unwrap_or_default(), state)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_get_receipt() {
        let body = Params::from_query(
            "msisdn=4527631111&to=Tak&network-code=23820&messageId=0C0000002EEBDA56\
             &price=0.01820000&status=delivered&scts=1705021324&err-code=0\
             &message-timestamp=2017-05-02+11%3A24%3A03",
        );
        let r = report(&body, &Params::from_query("code=abc")).unwrap();
        assert_eq!(r.code.as_deref(), Some("abc"));
        assert_eq!(r.state, DeliveryState::Delivered);
        assert_eq!(r.error_code, None);
        assert_eq!(r.carrier.as_deref(), Some("23820"));
        assert_eq!(
            r.at.map(|at| at.to_rfc3339()).as_deref(),
            Some("2017-05-02T11:24:03+00:00")
        );
        let rejected = Params::from_query("status=rejected&err-code=6&client-ref=xyz");
        let r = report(&rejected, &Params::default()).unwrap();
        assert_eq!(
            (r.code.as_deref(), r.error_code.as_deref()),
            (Some("xyz"), Some("6"))
        );
        assert!(report(&Params::from_query("status=sent"), &Params::default()).is_err());
    }
}

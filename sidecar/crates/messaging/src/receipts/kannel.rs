//! Kannel's `dlr-url` (a GET): the sender composes it with Kannel's escapes, Kannel substitutes
//! them (URL-encoded) for each report. docs/DELIVERIES.md has the template:
//!
//! `…/callbacks/<token>/kannel?code=<CODE>&mid=<MESSAGE ID>&type=%d&answer=%A&smsc=%i&ts=%T`
//!
//! or `short_url=<SHORT URL>` instead of `code=`: the message's short domain is then known.
//!
//! - `type` (`%d`) is the report's dlr-mask bit: 1 delivered, 2 failed, 4 buffered, 8 accepted
//!   by the SMSC (submitted), 16 rejected by the SMSC.
//! - `answer` (`%A`) is the SMSC's text: `ACK/`, `NACK/<reason>`, or an SMPP-style receipt
//!   (`id:… stat:UNDELIV err:005 text:…`) whose `stat:` (`EXPIRED` → expired, `REJECTD` →
//!   rejected) and `err:` are read; its `text:` (the message's first characters) is not kept.
//! - `mid` is the idempotency key. Kannel's own ids cannot be: `%F` (the SMSC's id) is empty for
//!   a rejection and when only 8 is in the mask, and `%I` is a new id per report (observed with
//!   Kannel 1.4.5). So the sender puts one id of its own per message in the URL; without one the
//!   link's code is the message id, which holds while each message carries a link of its own
//!   (a re-send issues a new link).
//! - `smsc` (`%i`), the route's name, is kept as the carrier when Kannel names one.
//! - `ts` (`%T`) is the report's time (Unix seconds); now without it.
//!
//! - `sig` is a send job's signature of the message (`shortlink_messaging::signed`): a job's own callback
//!   token (named `compose send <job>`) takes a report only with the `sig` its `dlr-url` carries.
//!
//! Anything else in the query (`to=%p`, `from=%P`, `%D`…) is ignored: the destination number is
//! never read.

use super::params::{unix_seconds, Params};
use super::{state_of, Report};
use crate::signed::{DlrKey, SignedMessage};
use shortlink_visits::deliveries::model::MAX_ERROR_CODE;
use shortlink_visits::deliveries::{CallbackToken, DeliveryState, Invalid, LinkRef, NewReceipt};

/// What a send job names its callback token (`crate::gateway::ready`), before its id.
pub const JOB_TOKEN_NAME: &str = "compose send ";

/// The send job whose token `token` is, if it is one. A name an admin gives a token of their
/// own can only take this form to hold the token to signed reports: it gains nothing.
pub fn job_of(token: &CallbackToken) -> Option<&str> {
    token.name.strip_prefix(JOB_TOKEN_NAME)
}

/// Whether `new`, on job `job`'s token, is the report of a message the job sent: `signature`
/// over its job, message id, code and short domain.
pub fn verify(key: &DlrKey, job: &str, new: &NewReceipt, signature: Option<&str>) -> bool {
    let code = match &new.link {
        LinkRef::Code(code) => code.as_str(),
        LinkRef::Recipient { .. } => "",
    };
    let message = SignedMessage {
        job,
        message_id: &new.message_id,
        code,
        host: new.short_domain.as_deref().unwrap_or_default(),
    };
    signature.is_some_and(|signature| key.verify(message, signature))
}

/// Kannel's report types (`%d`, the dlr-mask bit) and the state each reports.
pub const TYPES: [(u8, DeliveryState); 5] = [
    (1, DeliveryState::Delivered),
    (2, DeliveryState::Failed),
    (4, DeliveryState::Buffered),
    (8, DeliveryState::Submitted),
    (16, DeliveryState::Rejected),
];

/// The report of one `dlr-url` call.
pub fn report(params: &Params) -> Result<Report, Invalid> {
    let kind = params.get("type").and_then(|t| t.trim().parse::<u8>().ok());
    let mut state = state_of(&TYPES, kind).ok_or_else(|| {
        Invalid::new(
            "state",
            "`type` is Kannel's report type (%d): 1, 2, 4, 8 or 16",
        )
    })?;
    let answer = params.get("answer").unwrap_or_default();
    let mut error_code = None;
    let mut error_text = None;
    if let Some(reason) = answer.strip_prefix("NACK/") {
        error_text = Some(reason.to_owned());
    } else if !answer.starts_with("ACK/") {
        let field = |name: &str| {
            (answer.split_whitespace())
                .find_map(|word| word.strip_prefix(name))
                .filter(|value| !value.is_empty())
        };
        match field("stat:") {
            // Final reports only: a buffered report's stat says nothing final.
            Some("EXPIRED") if matches!(kind, Some(1 | 2)) => state = DeliveryState::Expired,
            Some("REJECTD") if matches!(kind, Some(1 | 2)) => state = DeliveryState::Rejected,
            _ => {}
        }
        if state != DeliveryState::Delivered {
            error_text = field("stat:").map(|stat| format!("stat:{stat}"));
        }
        // `err:000` is "no error"; an SMSC's text that is no code is not kept as one.
        error_code = field("err:")
            .filter(|err| !err.bytes().all(|b| b == b'0'))
            .filter(|err| err.len() <= MAX_ERROR_CODE && !err.chars().any(char::is_control))
            .map(str::to_owned);
    }
    let at = match params.get("ts") {
        None => None,
        Some(ts) => Some(
            unix_seconds(ts)
                .ok_or_else(|| Invalid::new("at", "`ts` is Kannel's %T: a Unix time in seconds"))?,
        ),
    };
    let code = params.get("code").map(str::to_owned);
    // The short URL the message carried, instead of the code: its host is the message's short
    // domain (the funnel's breakdown; a code works on every domain of its pool).
    let short_url = params.get("short_url").map(str::to_owned);
    let code_in_url = (short_url.as_deref())
        .and_then(|url| url.split(['?', '#']).next()?.rsplit('/').next())
        .filter(|code| !code.is_empty());
    let message_id = (params.get("mid").filter(|mid| !mid.is_empty()))
        .or(code.as_deref())
        .or(code_in_url)
        .unwrap_or_default()
        .to_owned();
    Ok(Report {
        code,
        short_url,
        error_code,
        error_text,
        carrier: params.get("smsc").map(str::to_owned),
        at,
        ..Report::new(message_id, state)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Result<Report, Invalid> {
        report(&Params::from_query(text))
    }

    #[test]
    fn a_short_url_names_the_link_and_its_domain() {
        let receipt =
            query("short_url=https%3A%2F%2Fs2.example%2FAbc123%3Fx&type=16&answer=NACK%2FERR+88")
                .unwrap();
        assert_eq!(
            receipt.short_url.as_deref(),
            Some("https://s2.example/Abc123?x")
        );
        assert_eq!(receipt.code, None);
        assert_eq!(receipt.message_id, "Abc123", "the code, without a mid");
        assert_eq!(receipt.state, DeliveryState::Rejected);
    }

    #[test]
    fn reads_a_failed_report_with_its_smsc_receipt() {
        let r = query(
            "type=2&smsc=dbl&answer=id%3AF000002+sub%3A001+dlvrd%3A000+stat%3AUNDELIV+err%3A005\
             +text%3AYour+link&ts=1795804019&to=%2B15550001111&code=abc&mid=m1",
        )
        .unwrap();
        assert_eq!(r.state, DeliveryState::Failed);
        assert_eq!(r.error_code.as_deref(), Some("005"));
        assert_eq!(r.error_text.as_deref(), Some("stat:UNDELIV"));
        assert_eq!(r.carrier.as_deref(), Some("dbl"));
        assert_eq!(r.message_id, "m1");
        assert_eq!(
            r.at.map(|at| at.to_rfc3339()).as_deref(),
            Some("2026-11-27T18:26:59+00:00")
        );
    }

    #[test]
    fn expired_and_rejected_receipts_and_nacks() {
        let r = query("type=2&answer=id%3A1+stat%3AEXPIRED+err%3A000&code=abc").unwrap();
        assert_eq!(r.state, DeliveryState::Expired);
        assert_eq!(r.error_code, None);
        assert_eq!(r.message_id, "abc");
        let r = query("type=1&answer=id%3A1+stat%3AREJECTD+err%3A0B&code=abc").unwrap();
        assert_eq!(r.state, DeliveryState::Rejected);
        let r = query("type=16&answer=NACK%2FERR+88+destination+blocked&smsc=&code=x").unwrap();
        assert_eq!(r.state, DeliveryState::Rejected);
        assert_eq!(r.error_text.as_deref(), Some("ERR 88 destination blocked"));
        assert_eq!(r.carrier.as_deref(), Some(""));
        assert!(query("type=3&code=x").is_err());
        assert!(query("type=1&code=x&ts=soon").is_err());
    }
}

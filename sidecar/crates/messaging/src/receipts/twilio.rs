//! Twilio's status callback: a form POST per status change of a message, to the URL the sender
//! gave as the message's `StatusCallback`:
//!
//! `https://<api host>/callbacks/<token>/twilio?code=<CODE>`
//!
//! `MessageSid` is the idempotency key; `ErrorCode` the error. Twilio's statuses map to ours:
//! `queued`, `accepted`, `scheduled`, `sending` and `sent` are `submitted` (one state: Twilio
//! has the message, the carrier's answer is to come); `delivered` and `read` are `delivered`;
//! `undelivered` (the carrier's failure) is `failed`; `failed` (Twilio could not send it) is
//! `rejected`; `canceled` (a scheduled message withdrawn) is `failed`. `To` is dropped unread.
//!
//! When the token was made with the account's auth token, `X-Twilio-Signature` must be
//! base64(HMAC-SHA1(auth token, the full URL + every POST parameter's name and value, sorted
//! by name)), compared in constant time.

use super::params::Params;
use super::{state_of, Report};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use shortlink_visits::deliveries::{DeliveryState, Invalid};
use subtle::ConstantTimeEq;

/// Twilio's message statuses and the state each reports.
pub const STATUSES: [(&str, DeliveryState); 10] = [
    ("queued", DeliveryState::Submitted),
    ("accepted", DeliveryState::Submitted),
    ("scheduled", DeliveryState::Submitted),
    ("sending", DeliveryState::Submitted),
    ("sent", DeliveryState::Submitted),
    ("delivered", DeliveryState::Delivered),
    ("read", DeliveryState::Delivered),
    ("undelivered", DeliveryState::Failed),
    ("canceled", DeliveryState::Failed),
    ("failed", DeliveryState::Rejected),
];

/// The report of one callback: the form's fields and the URL's query (`code`).
pub fn report(form: &Params, query: &Params) -> Result<Report, Invalid> {
    let status = form.get("MessageStatus").map(str::trim);
    let state = state_of(&STATUSES, status).ok_or_else(|| {
        Invalid::new(
            "state",
            "`MessageStatus` is one of Twilio's message statuses",
        )
    })?;
    Ok(Report {
        code: query.get("code").map(str::to_owned),
        error_code: form.get("ErrorCode").map(str::to_owned),
        ..Report::new(form.get("MessageSid").unwrap_or_default(), state)
    })
}

/// Twilio's signature of a request to `url` with `params` (the form's fields).
pub fn signature(auth_token: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(auth_token.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Whether `presented` is the signature of the request for one of `urls` (the URL as Twilio
/// may have written it: behind a proxy the scheme and port are not known for sure).
pub fn verify(
    auth_token: &str,
    urls: &[String],
    params: &[(String, String)],
    presented: &str,
) -> bool {
    let mut matched = false;
    for url in urls {
        let expected = signature(auth_token, url, params);
        matched |= bool::from(expected.as_bytes().ct_eq(presented.as_bytes()));
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn signs_as_twilios_own_sdk_test_does() {
        // twilio/twilio-python tests/unit/test_request_validator.py (SOURCES.md).
        let params = pairs(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Digits", "1234"),
            ("From", "+14158675309"),
            ("To", "+18005551212"),
            ("Caller", "+14158675309"),
        ]);
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(
            signature("12345", url, &params),
            "RSOYDt4T1cUTdK1PDd93/VVr8B8="
        );
        let urls = [format!("http://x{url}"), url.to_owned()];
        assert!(verify(
            "12345",
            &urls,
            &params,
            "RSOYDt4T1cUTdK1PDd93/VVr8B8="
        ));
        assert!(!verify(
            "12345",
            &urls,
            &params,
            "RSOYDt4T1cUTdK1PDd93/VVr8B8"
        ));
        assert!(!verify(
            "54321",
            &urls,
            &params,
            "RSOYDt4T1cUTdK1PDd93/VVr8B8="
        ));
    }

    #[test]
    fn maps_statuses() {
        let form = Params::from_query("MessageSid=SM1&MessageStatus=undelivered&ErrorCode=30003");
        let r = report(&form, &Params::from_query("code=abc")).unwrap();
        assert_eq!(r.state, DeliveryState::Failed);
        assert_eq!(r.error_code.as_deref(), Some("30003"));
        assert_eq!(r.code.as_deref(), Some("abc"));
        for (status, state) in [
            ("sent", DeliveryState::Submitted),
            ("failed", DeliveryState::Rejected),
            ("read", DeliveryState::Delivered),
        ] {
            let form = Params::from_query(&format!("MessageSid=SM1&MessageStatus={status}"));
            assert_eq!(report(&form, &Params::default()).unwrap().state, state);
        }
        assert!(report(
            &Params::from_query("MessageStatus=lost"),
            &Params::default()
        )
        .is_err());
    }
}

//! One message through Kannel's `sendsms` (`GET …/cgi-bin/sendsms?username=…&password=…&from=…
//! &to=…&text=…&dlr-mask=…&dlr-url=…`), tried again only while it surely never reached the
//! gateway.
//!
//! Kannel answers 202 `0: Accepted for delivery`, or 202 `3: Queued for later delivery` while no
//! SMSC is connected (it sends it later: taken too); 4xx for what it will never take (403 a wrong
//! password, 400 a bad number); 503 `Temporal failure, try again later.` when its queue is full.
//!
//! At most once, without exception: a connection that could not be made (no byte of the request
//! written) and a 5xx (the gateway says it did not take it) are tried again after the backoff,
//! doubling, up to the gateway's attempts. Anything else that ends without an answer (a timeout,
//! a connection closed after the request was written) may have left the message with the
//! gateway: its outcome is `unknown`, and it is never sent again automatically.
//!
//! What is kept of an answer is what shortlink understood ([`Handoff`]): the status and the
//! numeric code a Kannel body starts with, never the body, never a client error's text (the
//! gateway's URL may point anywhere its workspace chose).

use reqwest::Url;
use shortlink_visits::deliveries::SendOutcome;
use std::time::Duration;

/// The reports asked for: delivered (1), failed (2), buffered (4), accepted by the SMSC (8),
/// rejected by it (16).
pub const DLR_MASK: &str = "31";
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The bytes of a body read for its leading code (`NNN:`); the rest is never read.
const CODE_PREFIX: usize = 16;

/// What a hand-off came to, as shortlink understood it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// A 2xx (Kannel's `0:`): the gateway took it.
    Accepted,
    /// A 2xx with Kannel's `3:`: queued until an SMSC connects; taken too.
    Queued,
    /// A 4xx (or any answer neither 2xx nor 5xx): it never will take it as it is.
    Refused,
    /// No connection on any try: it never reached the gateway.
    Unreachable,
    /// A 5xx on the last try: the gateway said it did not take it.
    ServerError,
    /// No answer in time after the request was written: the gateway may have it.
    TimedOut,
    /// The connection failed after the request was written: the gateway may have it.
    Cut,
}

impl Handoff {
    /// The outcome recorded (`GET /api/v1/gateway/jobs/{job}`).
    pub fn outcome(self) -> SendOutcome {
        match self {
            Handoff::Accepted => SendOutcome::Accepted,
            Handoff::Queued => SendOutcome::Queued,
            Handoff::Refused => SendOutcome::Refused,
            Handoff::Unreachable | Handoff::ServerError => SendOutcome::Failed,
            Handoff::TimedOut | Handoff::Cut => SendOutcome::Unknown,
        }
    }

    /// The fixed description recorded with it.
    pub fn detail(self) -> &'static str {
        match self {
            Handoff::Accepted => "the gateway accepted it for delivery",
            Handoff::Queued => "the gateway queued it for later delivery",
            Handoff::Refused => "the gateway refused it (see its HTTP status and code)",
            Handoff::Unreachable => "no connection to the gateway on any try: not sent",
            Handoff::ServerError => "the gateway answered a server error (5xx) on every try",
            Handoff::TimedOut => {
                "no answer in time after the request was sent: the gateway may have it \
                 (not sent again)"
            }
            Handoff::Cut => {
                "the connection failed after the request was sent: the gateway may have it \
                 (not sent again)"
            }
        }
    }

    /// Whether the gateway has it: its `submitted` receipt is written.
    pub fn taken(self) -> bool {
        matches!(self, Handoff::Accepted | Handoff::Queued)
    }

    /// Whether sending it again is safe and may help.
    fn retried(self) -> bool {
        matches!(self, Handoff::Unreachable | Handoff::ServerError)
    }

    /// The hand-off of an answer with `status`, whose body starts with Kannel's `code`.
    pub fn of_answer(status: u16, code: Option<u32>) -> Handoff {
        match status {
            200..=299 if code == Some(3) => Handoff::Queued,
            200..=299 => Handoff::Accepted,
            500..=599 => Handoff::ServerError,
            _ => Handoff::Refused,
        }
    }

    /// The hand-off of a request that got no answer: only a failed connection proves that no
    /// byte of it left.
    pub fn of_error(error: &reqwest::Error) -> Handoff {
        if error.is_connect() {
            Handoff::Unreachable
        } else if error.is_timeout() {
            Handoff::TimedOut
        } else {
            Handoff::Cut
        }
    }
}

/// The numeric code a Kannel body starts with (`0: Accepted for delivery` → 0).
pub fn leading_code(body: &[u8]) -> Option<u32> {
    let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 4 || body.get(digits) != Some(&b':') {
        return None;
    }
    std::str::from_utf8(&body[..digits]).ok()?.parse().ok()
}

/// Where and as whom a job sends.
pub struct Sendsms {
    pub client: reqwest::Client,
    pub url: Url,
    pub username: String,
    pub password: String,
    pub sender: String,
    /// `<callback base>/callbacks/<token>/kannel`.
    pub dlr_base: String,
    pub attempts: u32,
    pub backoff: Duration,
}

/// What one message came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub handoff: Handoff,
    pub http_status: Option<u16>,
    /// The numeric code the body started with.
    pub gateway_code: Option<u32>,
    pub attempts: u32,
}

/// The `dlr-url` of one message: its report comes back on the workspace's Kannel callback with
/// the short URL (its link and short domain) and `mid`, the receipts' message id. Kannel fills in
/// `%d`, `%A`, `%i`, `%T`; the destination (`%p`) is left out: a phone number. `sig` signs the
/// message (`crate::signed`): the job's token takes no other report.
pub fn dlr_url(base: &str, link: &str, message_id: &str, sig: &str) -> String {
    format!("{base}?{link}&mid={message_id}&sig={sig}&type=%d&answer=%A&smsc=%i&ts=%T")
}

impl Sendsms {
    /// Sends `text` to `phone` (E.164), its reports to `dlr_url`.
    pub async fn send(&self, phone: &str, text: &str, dlr_url: &str) -> Sent {
        let mut url = self.url.clone();
        url.query_pairs_mut().extend_pairs([
            ("username", self.username.as_str()),
            ("password", self.password.as_str()),
            ("from", self.sender.as_str()),
            ("to", phone),
            ("text", text),
            ("dlr-mask", DLR_MASK),
            ("dlr-url", dlr_url),
        ]);
        let mut tries = 0;
        loop {
            tries += 1;
            let (handoff, http_status, gateway_code) = self.once(url.clone()).await;
            if handoff.retried() && tries < self.attempts {
                tokio::time::sleep(backoff(self.backoff, tries)).await;
                continue;
            }
            return Sent {
                handoff,
                http_status,
                gateway_code,
                attempts: tries,
            };
        }
    }

    /// One try: what it came to, the status and the body's leading code.
    async fn once(&self, url: Url) -> (Handoff, Option<u16>, Option<u32>) {
        let mut response = match self.client.get(url).send().await {
            Ok(response) => response,
            // The error is classified, never shown: it may carry the URL (the password, the
            // number) or words of whatever answered.
            Err(error) => return (Handoff::of_error(&error), None, None),
        };
        let status = response.status().as_u16();
        let mut prefix = Vec::new();
        // Only the first bytes: the code. A body cut short after the status still counts as
        // that status's answer.
        while prefix.len() < CODE_PREFIX {
            match response.chunk().await {
                Ok(Some(chunk)) => prefix.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        let code = leading_code(&prefix);
        (Handoff::of_answer(status, code), Some(status), code)
    }
}

/// The wait after the `tries`th failed try: `base`, doubling, at most [`MAX_BACKOFF`].
pub fn backoff(base: Duration, tries: u32) -> Duration {
    base.saturating_mul(1 << tries.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kannels_answers_are_sorted_by_status_and_code() {
        let of = |status, body: &str| Handoff::of_answer(status, leading_code(body.as_bytes()));
        assert_eq!(of(202, "0: Accepted for delivery"), Handoff::Accepted);
        assert_eq!(of(202, "3: Queued for later delivery"), Handoff::Queued);
        assert_eq!(of(200, "anything"), Handoff::Accepted);
        assert_eq!(
            of(403, "Authorization failed for sendsms"),
            Handoff::Refused
        );
        assert_eq!(of(400, "3: looks queued"), Handoff::Refused);
        assert_eq!(of(503, "Temporal failure"), Handoff::ServerError);
        assert_eq!(of(302, ""), Handoff::Refused);
        assert!(Handoff::Queued.taken() && !Handoff::TimedOut.taken());
        assert!(!Handoff::TimedOut.retried() && !Handoff::Cut.retried());
    }

    #[test]
    fn only_a_leading_number_and_colon_is_a_code() {
        assert_eq!(leading_code(b"0: Accepted"), Some(0));
        assert_eq!(leading_code(b"42:x"), Some(42));
        for body in [
            &b""[..],
            b"Accepted",
            b"0 Accepted",
            b":1",
            b"123456: long",
            b"1",
        ] {
            assert_eq!(leading_code(body), None, "{body:?}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let base = Duration::from_millis(100);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 3), Duration::from_millis(400));
        assert_eq!(backoff(base, 40), MAX_BACKOFF);
    }

    #[test]
    fn the_dlr_url_names_the_message_and_no_phone() {
        let url = dlr_url(
            "http://api.example/callbacks/slc_x/kannel",
            "short_url=https://s.example/Ab1",
            "snd_1-4",
            "c2ln",
        );
        assert_eq!(
            url,
            "http://api.example/callbacks/slc_x/kannel?short_url=https://s.example/Ab1\
             &mid=snd_1-4&sig=c2ln&type=%d&answer=%A&smsc=%i&ts=%T"
        );
        assert!(!url.contains("%p") && !url.contains("%P"));
    }
}

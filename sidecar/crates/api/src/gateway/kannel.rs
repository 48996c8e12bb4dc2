//! One message through Kannel's `sendsms` (`GET …/cgi-bin/sendsms?username=…&password=…&from=…
//! &to=…&text=…&dlr-mask=…&dlr-url=…`), retried while the failure is transient.
//!
//! Kannel answers 202 `0: Accepted for delivery`, or 202 `3: Queued for later delivery` while no
//! SMSC is connected (it sends it later: accepted too); 4xx for what it will never take (403 a
//! wrong password, 400 a bad number); 503 `Temporal failure, try again later.` when its queue is
//! full. A connection that fails, a timeout and a 5xx are transient: tried again after the
//! backoff, doubling, up to the gateway's attempts.

use reqwest::Url;
use std::time::Duration;

/// The reports asked for: delivered (1), failed (2), buffered (4), accepted by the SMSC (8),
/// rejected by it (16).
pub const DLR_MASK: &str = "31";
/// The gateway's body kept per recipient, in characters.
pub const MAX_ANSWER: usize = 256;
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a gateway's answer is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// It will never take this message as it is.
    Refused,
    /// Try again.
    Transient,
}

/// The verdict of an HTTP answer.
pub fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Accepted,
        500..=599 => Verdict::Transient,
        _ => Verdict::Refused,
    }
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
    /// `accepted`, `refused` or `failed` (no answer but transient ones, every try spent).
    pub outcome: &'static str,
    pub http_status: Option<u16>,
    pub answer: Option<String>,
    pub attempts: u32,
}

/// The `dlr-url` of one message: its report comes back on the workspace's Kannel callback with
/// the short URL (its link and short domain) and `mid`, the receipts' message id. Kannel fills in
/// `%d`, `%A`, `%i`, `%T`; the destination (`%p`) is left out: a phone number. `sig` signs the
/// message (`deliveries::signed`): the job's token takes no other report.
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
            let (verdict, http_status, answer) = match self.client.get(url.clone()).send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.text().await.unwrap_or_default();
                    (verdict(status), Some(status), Some(cut(body.trim())))
                }
                // Without the URL: it carries the password and the recipient's number.
                Err(error) => (
                    Verdict::Transient,
                    None,
                    Some(cut(&shortlink_core::outbound::describe(
                        &error.without_url(),
                    ))),
                ),
            };
            let outcome = match verdict {
                Verdict::Accepted => "accepted",
                Verdict::Refused => "refused",
                Verdict::Transient if tries < self.attempts => {
                    tokio::time::sleep(backoff(self.backoff, tries)).await;
                    continue;
                }
                Verdict::Transient => "failed",
            };
            return Sent {
                outcome,
                http_status,
                answer,
                attempts: tries,
            };
        }
    }
}

/// The wait after the `tries`th failed try: `base`, doubling, at most [`MAX_BACKOFF`].
pub fn backoff(base: Duration, tries: u32) -> Duration {
    base.saturating_mul(1 << tries.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

fn cut(text: &str) -> String {
    text.chars().take(MAX_ANSWER).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kannels_answers_are_sorted_by_status() {
        // 202 `0: Accepted for delivery` and `3: Queued for later delivery` alike.
        assert_eq!(verdict(202), Verdict::Accepted);
        assert_eq!(verdict(403), Verdict::Refused);
        assert_eq!(verdict(400), Verdict::Refused);
        assert_eq!(verdict(503), Verdict::Transient);
        assert_eq!(verdict(302), Verdict::Refused);
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

//! What a link answers to one click: the one decision the module and the sidecar's fallback
//! share, so a click gets the same answer whichever serves it.

use std::net::IpAddr;

use super::{Extras, QUARANTINE_STATUS, REVOKED_STATUS};
use crate::rules::{self, Click};

/// A link's fields as a reader holds them: borrowed from a decoded [`super::Link`] or from a
/// cache slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkView<'a> {
    /// The link redirects no one: revoked (410), or quarantined when `status` is
    /// [`QUARANTINE_STATUS`]. A quarantine is one more status of a revoke's answer, so the
    /// caches keep it as they keep a tombstone and a live link's click costs nothing more.
    pub revoked: bool,
    pub status: u16,
    /// Unix seconds after which the link is expired; 0 = never.
    pub expires_at: u64,
    pub forward_query: bool,
    pub target: &'a [u8],
    pub extras: Option<&'a Extras>,
}

/// Which rule (and which variant of its split) answered a click: recorded on the visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    pub rule: u8,
    pub variant: Option<u8>,
}

/// What a link means for one click.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    Redirect {
        status: u16,
        target: &'a [u8],
        forward_query: bool,
        /// The rule that sent the click to `target`; none for the link's own target and for the
        /// lifecycle's URLs.
        chosen: Option<Chosen>,
    },
    /// Revoked, or expired without an expired URL: 410.
    Gone,
    /// Quarantined: [`QUARANTINE_STATUS`] with [`quarantine_page`], never the target.
    Quarantined,
    /// Before `valid_since`, without a "not yet" URL: a page saying when the link opens.
    NotYet { opens_at: u64 },
    /// A link with `max_visits` that would redirect: count the click (`INCR` of
    /// [`crate::keys::visit_count_key`]) and ask again with [`LinkView::answer_checked`].
    Count,
    /// A password-protected link, and no right password given: the password page
    /// ([`super::password`]); a right one is checked, then asked again with `unlocked`.
    Password,
}

/// What the reader established about a click before asking again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// The click's number ([`Answer::Count`]).
    pub visits: Option<u64>,
    /// The link's password was given, and right.
    pub unlocked: bool,
    /// The click-time verdict, when the click had a cap to spend (`crate::verdict::at_click`):
    /// a machine's click was counted as the next click's number without spending it.
    pub verdict: Option<crate::agent::Audience>,
}

impl Checked {
    /// How a preview card's target is decided: as for a click within `max_visits`, without
    /// counting (a preview is not a click; the card shows where a click within the cap would go).
    pub const PREVIEW: Checked = Checked {
        visits: Some(0),
        unlocked: false,
        verdict: None,
    };
}

/// The status of the "not yet" page: the link exists but does not open to anyone yet (never a
/// 404, which would tell a phone the link is wrong).
pub const NOT_YET_STATUS: u16 = 403;

/// The "not yet" page a click before `valid_since` gets when the link has no "not yet" URL: the
/// module and the fallback send these very bytes (`text/html; charset=utf-8`, `no-store`).
pub fn not_yet_page(opens_at: u64) -> Vec<u8> {
    let when = i64::try_from(opens_at)
        .ok()
        .and_then(|seconds| chrono::DateTime::from_timestamp(seconds, 0))
        .map_or_else(String::new, |at| {
            at.format("%Y-%m-%d %H:%M UTC").to_string()
        });
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>Not open yet</title></head>\
         <body><h1>This link is not open yet</h1><p>It opens on \
         <time datetime=\"{opens_at}\">{when}</time>. Please try again then.</p></body></html>\n"
    )
    .into_bytes()
}

/// The page a quarantined link answers (status [`QUARANTINE_STATUS`], `text/html; charset=utf-8`,
/// `no-store`): the module and the fallback send these very bytes. It names no target (the
/// point is that no one reaches it, nor copies it from the page) and offers the domain's report
/// button: a form posting the page's own path with `?report`, which nginx sends to the sidecar's
/// `POST /report-abuse/{code}` (docs/SECURITY.md, "Quarantine"), so the page needs no code in it.
pub fn quarantine_page() -> &'static [u8] {
    b"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
      <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
      <meta name=\"robots\" content=\"noindex\"><title>Link held back</title></head>\
      <body><h1>This link is held back</h1><p>It points to a site listed as unsafe (phishing or \
      malware), so it does not open. If you expected it to work, the sender can have it checked \
      and released.</p><form method=\"post\" action=\"?report\"><p>Received it in a message \
      you did not expect? <button type=\"submit\">Report this link</button></p></form>\
      </body></html>\n"
}

/// The status of the lifecycle's redirects (before and after the link lives): temporary, since
/// the same click will be answered differently later or was answered differently before.
pub const LIFECYCLE_STATUS: u16 = 302;

impl LinkView<'static> {
    /// A revoked link's view.
    pub const ENDED: LinkView<'static> = LinkView::stopped(REVOKED_STATUS);
    /// A quarantined link's view.
    pub const QUARANTINED: LinkView<'static> = LinkView::stopped(QUARANTINE_STATUS);

    const fn stopped(status: u16) -> Self {
        LinkView {
            revoked: true,
            status,
            expires_at: 0,
            forward_query: false,
            target: &[],
            extras: None,
        }
    }
}

impl<'a> LinkView<'a> {
    /// The answer at `now_unix`. `click` is built only when a rule needs to be evaluated, and
    /// `country` called at most once, when a rule asks for the client's country: a plain link
    /// costs neither.
    pub fn answer<'c>(
        &self,
        now_unix: u64,
        click: impl FnOnce() -> Click<'c>,
        country: impl FnOnce(IpAddr) -> Option<[u8; 2]>,
    ) -> Answer<'a> {
        self.answer_checked(now_unix, Checked::default(), click, country)
    }

    /// The answer once the reader checked what [`Answer::Count`] or [`Answer::Password`] asked
    /// for. Past `max_visits` (`visits` is the counter after this click's `INCR`) the link
    /// answers like an expired one, so no more than `max_visits` clicks are ever redirected,
    /// from however many edges.
    #[inline]
    pub fn answer_checked<'c>(
        &self,
        now_unix: u64,
        checked: Checked,
        click: impl FnOnce() -> Click<'c>,
        country: impl FnOnce(IpAddr) -> Option<[u8; 2]>,
    ) -> Answer<'a> {
        // A plain link (nearly every click) is answered here, inlined into the caller; the
        // lifecycle and the rules stay out of line.
        if self.extras.is_none() {
            let expired = self.revoked || (self.expires_at != 0 && self.expires_at <= now_unix);
            return if expired {
                self.ended()
            } else {
                self.own_target()
            };
        }
        self.decide(now_unix, checked, click, country)
    }

    #[inline(never)]
    fn decide<'c>(
        &self,
        now_unix: u64,
        checked: Checked,
        click: impl FnOnce() -> Click<'c>,
        country: impl FnOnce(IpAddr) -> Option<[u8; 2]>,
    ) -> Answer<'a> {
        if self.revoked {
            return self.ended();
        }
        let expired = self.expires_at != 0 && self.expires_at <= now_unix;
        let Some(extras) = self.extras else {
            return if expired {
                Answer::Gone
            } else {
                self.own_target()
            };
        };
        if expired {
            return over(extras);
        }
        if extras.valid_since > now_unix {
            return match &extras.not_yet_url {
                Some(url) => lifecycle_redirect(url),
                None => Answer::NotYet {
                    opens_at: extras.valid_since,
                },
            };
        }
        if extras.password.is_some() && !checked.unlocked {
            return Answer::Password;
        }
        if extras.max_visits != 0 {
            match checked.visits {
                None => return Answer::Count,
                Some(n) if n > extras.max_visits => return over(extras),
                Some(_) => {}
            }
        }
        if extras.rules.is_empty() {
            return self.own_target();
        }
        let click = Click {
            recipient: extras.recipient,
            ..click()
        };
        match rules::choose(&extras.rules, &click, country) {
            Some(choice) => Answer::Redirect {
                status: choice.target.status,
                target: choice.target.url,
                forward_query: choice.target.forward_query,
                chosen: Some(Chosen {
                    rule: choice.rule,
                    variant: choice.variant,
                }),
            },
            None => self.own_target(),
        }
    }

    /// Whether a click at `now_unix` must be counted before it is answered ([`Answer::Count`]):
    /// a live, open, unexpired link with `max_visits`, unlocked if it has a password. Decided
    /// without the click.
    pub fn needs_count(&self, now_unix: u64, unlocked: bool) -> bool {
        match self.extras {
            Some(extras) if extras.max_visits != 0 && !self.revoked => {
                let expired = self.expires_at != 0 && self.expires_at <= now_unix;
                let locked = extras.password.is_some() && !unlocked;
                !expired && !locked && extras.valid_since <= now_unix
            }
            _ => false,
        }
    }

    /// Whether a click at `now_unix` meets the password ([`Answer::Password`]): a live, open,
    /// unexpired link with a password.
    pub fn needs_password(&self, now_unix: u64) -> bool {
        match self.extras {
            Some(extras) if extras.password.is_some() && !self.revoked => {
                let expired = self.expires_at != 0 && self.expires_at <= now_unix;
                !expired && extras.valid_since <= now_unix
            }
            _ => false,
        }
    }

    /// A link that redirects no one: quarantined, else gone. Out of line: a live link's click
    /// never gets here.
    #[inline(never)]
    fn ended(&self) -> Answer<'a> {
        if self.revoked && self.status == QUARANTINE_STATUS {
            Answer::Quarantined
        } else {
            Answer::Gone
        }
    }

    #[inline]
    fn own_target(&self) -> Answer<'a> {
        Answer::Redirect {
            status: self.status,
            target: self.target,
            forward_query: self.forward_query,
            chosen: None,
        }
    }
}

/// An expired or capped link: its expired URL, else 410.
fn over(extras: &Extras) -> Answer<'_> {
    match &extras.expired_url {
        Some(url) => lifecycle_redirect(url),
        None => Answer::Gone,
    }
}

fn lifecycle_redirect(url: &[u8]) -> Answer<'_> {
    Answer::Redirect {
        status: LIFECYCLE_STATUS,
        target: url,
        forward_query: false,
        chosen: None,
    }
}

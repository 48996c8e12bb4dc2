//! Who made a visit — a person, a link preview, a URL scanner or another machine — and why, from
//! what a request shows at click time. One ordered list of signals ([`at_click`]), each a line
//! with what it reads; the full list, what each misses and its false-positive risk is
//! docs/BOTS.md.
//!
//! The module computes the verdict only for a link that has something to spend (`max_visits`):
//! a request it calls a machine is answered as a person would be, without spending the cap. For
//! every tracked visit it records the raw [`Signals`] instead (cheap: a method compare and
//! header pointers), and the visit consumer computes the same verdict from them, then adds what
//! only hindsight shows (delivery timing, sweeps).

use crate::agent::{self, Audience};

/// The request facts a verdict reads beyond the user agent, packed in the visit event's `sig`
/// field (decimal). Bits 0-7 are signals; bits 8-10 the click-time verdict when the module
/// computed one ([`Signals::with_verdict`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Signals(u16);

impl Signals {
    /// `HEAD`: what link checkers and scanners send first; a browser following a link never does.
    pub const HEAD: u16 = 1;
    /// `OPTIONS` (or another method a link is never followed with, save GET, HEAD and a
    /// password form's POST).
    pub const OPTIONS: u16 = 1 << 1;
    /// No `Accept-Language`: every browser sends one on a navigation (Chromium, Firefox,
    /// Safari; RFC 9110 §12.5.4 makes it optional, and HTTP libraries leave it out).
    pub const NO_LANGUAGE: u16 = 1 << 2;
    /// The request came over TLS: the only requests on which browsers send fetch metadata
    /// (`Sec-Fetch-*` go to potentially trustworthy origins only, W3C Fetch Metadata §2).
    pub const SECURE: u16 = 1 << 3;
    /// No `Sec-Fetch-Mode` (meaningful with [`Signals::SECURE`]): Chromium 76+, Firefox 90+ and
    /// Safari 16.4+ send it on every navigation (MDN, Sec-Fetch-Mode browser compatibility).
    pub const NO_FETCH_MODE: u16 = 1 << 4;
    /// The client's network is on the hosting/cloud list ([`crate::verdict`] callers that
    /// looked it up set [`Signals::NETWORK_KNOWN`] too).
    pub const HOSTING: u16 = 1 << 5;
    /// The client's network was looked up (the hosting bit means something).
    pub const NETWORK_KNOWN: u16 = 1 << 6;

    const VERDICT_SHIFT: u16 = 8;

    pub const fn new(bits: u16) -> Self {
        Self(bits & 0xff)
    }

    pub const fn bits(self) -> u16 {
        self.0
    }

    /// The signals whose [`Signals::bits`] these are (a visit event's, verdict included).
    pub const fn from_bits(bits: u16) -> Self {
        Self(bits)
    }

    pub const fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }

    /// These signals, carrying the verdict the module acted on at click time.
    pub const fn with_verdict(self, verdict: Audience) -> Self {
        Self(self.0 & 0xff | (code_of(verdict) << Self::VERDICT_SHIFT))
    }

    /// These signals with the client's network looked up (by the visit consumer, which holds
    /// the ASN table and the hosting list): [`Signals::NETWORK_KNOWN`], and
    /// [`Signals::HOSTING`] when it is listed.
    pub const fn with_network(self, hosting: bool) -> Self {
        let network = Self::NETWORK_KNOWN | if hosting { Self::HOSTING } else { 0 };
        Self(self.0 | network)
    }

    /// The verdict the module acted on, if it computed one.
    pub fn click_verdict(self) -> Option<Audience> {
        audience_of(self.0 >> Self::VERDICT_SHIFT)
    }

    /// The `sig` field's text (never empty: a visit with signals says so, even "0"), as visit
    /// events of format 6 carried it and entries of plain fields do.
    #[inline]
    pub fn text(self) -> ([u8; 5], usize) {
        let mut out = [0; 5];
        let n = self.0;
        if n < 10 {
            out[0] = b'0' + n as u8;
            return (out, 1);
        }
        let len = n.ilog10() as usize + 1;
        let mut rest = n;
        for at in (0..len).rev() {
            out[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        (out, len)
    }

    /// The signals a `sig` field holds; `None` for an absent (older module) or malformed field.
    pub fn parse(text: &[u8]) -> Option<Self> {
        let bits: u16 = std::str::from_utf8(text).ok()?.parse().ok()?;
        Some(Self(bits))
    }
}

const fn code_of(verdict: Audience) -> u16 {
    match verdict {
        Audience::Human => 1,
        Audience::Preview => 2,
        Audience::Scanner => 3,
        Audience::Bot => 4,
    }
}

fn audience_of(code: u16) -> Option<Audience> {
    Some(match code {
        1 => Audience::Human,
        2 => Audience::Preview,
        3 => Audience::Scanner,
        4 => Audience::Bot,
        _ => return None,
    })
}

/// Why a visit got its verdict: a set, stored with the visit and sent with its webhook event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Reasons(pub u16);

impl Reasons {
    /// The user agent is on the agent table (its label says whose).
    pub const AGENT: u16 = 1;
    /// No user agent at all: every browser sends one.
    pub const NO_AGENT: u16 = 1 << 1;
    /// `HEAD` or `OPTIONS`.
    pub const METHOD: u16 = 1 << 2;
    /// A browser's agent without the headers that browser always sends ([`browser_claim`]).
    pub const HEADERS: u16 = 1 << 3;
    /// From a hosting/cloud network.
    pub const NETWORK: u16 = 1 << 4;
    /// Within seconds of its message's delivery receipt (or hand-off): hindsight only.
    pub const AFTER_DELIVERY: u16 = 1 << 5;
    /// One address or network reaching many recipients' links of a campaign at once: hindsight.
    pub const SWEEP: u16 = 1 << 6;
    /// A person: a later person-like visit of the same recipient confirmed it.
    pub const CONFIRMED: u16 = 1 << 7;

    /// Every reason with its stored name, in a fixed order.
    pub const NAMES: [(u16, &'static str); 8] = [
        (Self::AGENT, "agent"),
        (Self::NO_AGENT, "no_agent"),
        (Self::METHOD, "method"),
        (Self::HEADERS, "headers"),
        (Self::NETWORK, "network"),
        (Self::AFTER_DELIVERY, "after_delivery"),
        (Self::SWEEP, "sweep"),
        (Self::CONFIRMED, "confirmed"),
    ];

    pub const fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }

    /// The names of the reasons in the set, in [`Reasons::NAMES`] order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(bit, _)| self.has(*bit))
            .map(|(_, name)| name)
    }
}

/// A verdict: who, why, and the agent table's label when a rule matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub audience: Audience,
    pub reasons: Reasons,
    pub label: Option<&'static str>,
}

impl Verdict {
    pub fn is_human(&self) -> bool {
        self.audience == Audience::Human
    }
}

/// The click-time verdict of a request with user agent `lower_ua` (trimmed, lower-cased: see
/// [`agent::lowered`]) and `signals`. The first signal that names a machine decides, in this
/// order (the table in docs/BOTS.md):
///
/// | signal | verdict | reads |
/// |---|---|---|
/// | agent table ([`agent::RULES`]) | its audience | `User-Agent` |
/// | no user agent | bot | `User-Agent` |
/// | `HEAD` / `OPTIONS` | scanner | the method |
/// | hosting/cloud network | scanner | the client's autonomous system ([`Signals::HOSTING`]) |
/// | a browser's agent without its headers | scanner | `Accept-Language`, `Sec-Fetch-Mode` over TLS |
pub fn at_click(lower_ua: &str, signals: Signals) -> Verdict {
    decide(AgentPart::of(lower_ua), signals)
}

/// What the user agent alone says towards a verdict: its rule of the agent table, whether it
/// is empty, and the browser it claims. Worked out once per distinct agent where agents repeat
/// (a worker's [`crate::agent_cache::AgentCache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPart {
    rule: Option<(Audience, &'static str)>,
    empty: bool,
    claim: Option<BrowserClaim>,
}

impl AgentPart {
    /// The part of `lower_ua` (trimmed, lower-cased).
    pub fn of(lower_ua: &str) -> Self {
        let rule = agent::table_match(lower_ua).map(|rule| (rule.audience, rule.label));
        AgentPart {
            rule,
            empty: lower_ua.is_empty(),
            claim: rule.is_none().then(|| browser_claim(lower_ua)).flatten(),
        }
    }
}

/// [`at_click`]'s verdict from the agent's part and the request's signals.
pub fn decide(part: AgentPart, signals: Signals) -> Verdict {
    let machine = |audience, reasons, label| Verdict {
        audience,
        reasons: Reasons(reasons),
        label,
    };
    if let Some((audience, label)) = part.rule {
        return machine(audience, Reasons::AGENT, Some(label));
    }
    if part.empty {
        return machine(Audience::Bot, Reasons::NO_AGENT, None);
    }
    if signals.has(Signals::HEAD | Signals::OPTIONS) {
        return machine(Audience::Scanner, Reasons::METHOD, None);
    }
    if signals.has(Signals::HOSTING) {
        return machine(Audience::Scanner, Reasons::NETWORK, None);
    }
    if part
        .claim
        .is_some_and(|claim| missing_headers(claim, signals))
    {
        return machine(Audience::Scanner, Reasons::HEADERS, None);
    }
    Verdict {
        audience: Audience::Human,
        reasons: Reasons::default(),
        label: None,
    }
}

/// Whether a browser that `claim`s so would have sent a header `signals` says is missing.
fn missing_headers(claim: BrowserClaim, signals: Signals) -> bool {
    signals.has(Signals::NO_LANGUAGE)
        || (claim.fetch_metadata
            && signals.has(Signals::SECURE)
            && signals.has(Signals::NO_FETCH_MODE))
}

/// What a user agent claims to be, as far as the headers it must send go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrowserClaim {
    /// The browser sends `Sec-Fetch-Mode` on navigations over TLS.
    pub fetch_metadata: bool,
}

/// The browser `lower_ua` claims to be, if it is one of the three engines whose headers are
/// known: Chromium (`chrome/N`, Edge, Opera, Samsung Internet, Android WebView all carry it),
/// Firefox (`firefox/N`) and Safari (`version/N.M … safari/`, without `chrome/`). In-app web
/// views without a browser token (iOS apps) claim nothing, so the header signal never judges them.
pub fn browser_claim(lower_ua: &str) -> Option<BrowserClaim> {
    if let Some(major) = version_after(lower_ua, "chrome/") {
        // Sec-Fetch-* since Chrome 76 (chromestatus 5155867204780032).
        return Some(BrowserClaim {
            fetch_metadata: major.0 >= 76,
        });
    }
    if let Some(major) = version_after(lower_ua, "firefox/") {
        // Since Firefox 90 (MDN browser compatibility data).
        return Some(BrowserClaim {
            fetch_metadata: major.0 >= 90,
        });
    }
    if lower_ua.contains("safari/") {
        if let Some((major, minor)) = version_after(lower_ua, "version/") {
            // Since Safari 16.4 (WebKit release notes, March 2023).
            return Some(BrowserClaim {
                fetch_metadata: (major, minor) >= (16, 4),
            });
        }
    }
    None
}

/// The `major.minor` number after `token` in `text`.
fn version_after(text: &str, token: &str) -> Option<(u32, u32)> {
    let at = text.find(token)? + token.len();
    let mut parts = text[at..].split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

#[cfg(test)]
mod tests;

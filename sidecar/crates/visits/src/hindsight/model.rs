//! What hindsight's parts share: its thresholds, a correction, what the store tells of a
//! batch's links, and how a visit is demoted.

use shortlink_visit_enrich::{AgentFacts, Audience, Device, Visit};
use shortlink_wire::verdict::Reasons;
use std::collections::HashMap;
use std::sync::Arc;

/// A click this soon after its message's delivery receipt (or hand-off, where no receipt came)
/// is a machine's. A person must notice the message, open it and tap the link: two pointing
/// acts with their mental preparation take 4.9 s in the Keystroke-Level Model (Card, Moran and
/// Newell, 1980: M = 1.35 s, P = 1.1 s), before any reading; 3 s stays under the fastest tap.
/// Carriers' SMS firewalls fetch while the message is in flight, before its receipt, and are
/// caught from the hand-off on.
pub const AFTER_DELIVERY_MS: i64 = 3_000;

/// A sweep: one network (an IPv4 /24 or IPv6 /48) with one user agent reaching this many
/// different links of one campaign (each a recipient's)...
pub const SWEEP_RECIPIENTS: usize = 5;

/// ...within this many milliseconds. Many people share a carrier's NAT addresses, rarely one
/// agent string as well, and five recipients of a campaign behind one /24 tapping within ten
/// seconds with the same agent is a machine's pace (docs/BOTS.md works out the odds).
pub const SWEEP_WINDOW_MS: i64 = 10_000;

/// How long a visit judged on timing alone waits for its visitor's later visit to clear it.
pub const CONFIRM_WITHIN_MS: i64 = 24 * 3_600_000;

/// Visits awaiting confirmation at most, the oldest forgotten first: each is a copy of its
/// visit (about a kilobyte with its strings), so 20,000 hold about 20 MB.
pub(super) const MAX_PENDING: usize = 20_000;

/// A stored visit's verdict changed: `before` as it was stored and counted, `after` the verdict
/// it is to be counted with. Only the verdict: a copy of the whole visit (a dozen strings) made
/// and dropped per corrected visit was a share of a correction's cost
/// (bench/results/system-cost-reclassified-2026-11-29-5.md).
#[derive(Debug, Clone)]
pub struct Correction {
    pub before: Visit,
    pub after: Verdict,
}

/// What a verdict changes of a visit: its agent's facts (audience, device; the rest is the
/// visit's agent's) and its reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub agent: Arc<AgentFacts>,
    pub reasons: Reasons,
}

impl Verdict {
    /// `visit`'s verdict as it stands.
    pub fn of(visit: &Visit) -> Self {
        Verdict {
            agent: Arc::clone(&visit.agent),
            reasons: visit.reasons,
        }
    }

    /// `visit`'s verdict once judged a scanner for `reason`, `scanner` its agent's facts as a
    /// scanner's ([`scanner`]).
    pub(super) fn demoted(visit: &Visit, scanner: Arc<AgentFacts>, reason: u16) -> Self {
        Verdict {
            agent: scanner,
            reasons: Reasons(visit.reasons.0 | reason),
        }
    }

    /// Gives `visit` this verdict.
    pub(super) fn apply(self, visit: &mut Visit) {
        visit.agent = self.agent;
        visit.reasons = self.reasons;
    }
}

/// When a message reached the network and the phone, as far as its receipts and hand-off say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// The gateway accepted it (a hand-off, or a `submitted` receipt), Unix ms.
    pub handed_off_ms: Option<i64>,
    /// The `delivered` receipt's time, Unix ms.
    pub delivered_ms: Option<i64>,
}

impl Reach {
    /// Whether a click at `at_ms` came before a person could have tapped this message: from its
    /// hand-off until [`AFTER_DELIVERY_MS`] after its delivery (or after its hand-off, where no
    /// receipt came: the delivery is later still). A click before the hand-off (the sender
    /// trying the link) is no scanner's.
    pub fn too_soon(&self, at_ms: i64) -> bool {
        let start = match (self.handed_off_ms, self.delivered_ms) {
            (Some(h), Some(d)) => h.min(d),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => return false,
        };
        let reached = self.delivered_ms.or(self.handed_off_ms).unwrap_or(start);
        (start..=reached.saturating_add(AFTER_DELIVERY_MS)).contains(&at_ms)
    }
}

/// What the store knows of a batch's links that hindsight reads.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    /// code → its campaign (links without one are never part of a sweep).
    pub campaigns: HashMap<String, String>,
    /// code → its workspace's slug (every link of the batch the store found).
    pub workspaces: HashMap<String, String>,
    /// code → each message of it.
    pub reached: HashMap<String, Vec<Reach>>,
}

/// `visit` judged a scanner for `reason`: a machine's device, as every machine's visit has.
pub(super) fn demote(visit: &mut Visit, reason: u16) {
    Verdict::demoted(visit, scanner(&visit.agent), reason).apply(visit);
}

/// `agent`'s facts as a scanner's.
pub(super) fn scanner(agent: &AgentFacts) -> Arc<AgentFacts> {
    Arc::new(AgentFacts {
        device: Device::Bot,
        audience: Audience::Scanner,
        ..AgentFacts::clone(agent)
    })
}

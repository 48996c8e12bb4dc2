//! What only hindsight shows about a visit (issue 78, docs/BOTS.md): a click within seconds of
//! its message reaching the phone ([`Reasons::AFTER_DELIVERY`]), one client reaching many
//! recipients' links of a campaign at once ([`Reasons::SWEEP`]), and a person's later visit that
//! clears a fast first one ([`Reasons::CONFIRMED`]). The module cannot know these at click time;
//! the consumer judges each batch with them before storing it ([`Hindsight::judge`]), and a
//! verdict that changes after its visit was stored becomes a [`Correction`] the store applies in
//! the batch's own transaction, moving every count exactly once (`shortlink-visits-sql`,
//! `corrections.rs`).
//!
//! The state is the consumer's memory: the sweeps of the last [`SWEEP_WINDOW_MS`] and the fast
//! visits awaiting confirmation for [`CONFIRM_WITHIN_MS`]. A restart forgets them: a sweep that
//! straddles it is caught from its next [`SWEEP_RECIPIENTS`] visits on, and a fast visit before it
//! stays a scanner's.

mod deltas;
mod sweep;

use shortlink_visit_enrich::{AgentFacts, Audience, Device, Visit};
use shortlink_wire::verdict::Reasons;
use std::collections::{HashMap, VecDeque};
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

/// Visits awaiting confirmation at most (the oldest are forgotten first).
const MAX_PENDING: usize = 100_000;

/// A stored visit's verdict changed: `before` as it was stored and counted, `after` as it is to
/// be counted (its audience, reasons and device).
#[derive(Debug, Clone)]
pub struct Correction {
    pub before: Visit,
    pub after: Visit,
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
    /// code → each message of it.
    pub reached: HashMap<String, Vec<Reach>>,
}

/// The consumer's hindsight: see the module doc.
#[derive(Debug, Default)]
pub struct Hindsight {
    sweeps: sweep::Sweeps,
    /// (code, visitor) → the visit as a person's, demoted on timing alone.
    pending: HashMap<(String, [u8; 16]), Visit>,
    pending_order: VecDeque<(i64, String, [u8; 16])>,
}

impl Hindsight {
    /// The codes whose facts [`Hindsight::judge`] reads: those of the visits a person made, as
    /// far as the click-time signals tell.
    pub fn codes(visits: &[Visit]) -> Vec<&str> {
        let mut codes: Vec<&str> = (visits.iter())
            .filter(|v| v.agent.audience == Audience::Human)
            .map(|v| v.code.as_str())
            .collect();
        codes.sort_unstable();
        codes.dedup();
        codes
    }

    /// Judges a batch (in stream order) with what hindsight shows, changing the verdicts of its
    /// visits in place, and answers the corrections to visits stored by earlier batches.
    pub fn judge(&mut self, visits: &mut [Visit], facts: &LinkFacts) -> Vec<Correction> {
        let mut corrections = Vec::new();
        for i in 0..visits.len() {
            if visits[i].agent.audience != Audience::Human {
                continue;
            }
            let v = &visits[i];
            let too_soon = (facts.reached.get(&v.code))
                .is_some_and(|reach| reach.iter().any(|r| r.too_soon(v.time_ms)));
            if too_soon {
                let person = visits[i].clone();
                demote(&mut visits[i], Reasons::AFTER_DELIVERY);
                self.await_confirmation(person);
                continue;
            }
            if let Some(campaign) = facts.campaigns.get(&visits[i].code) {
                let swept = self.sweeps.see(campaign, visits, i);
                corrections.extend(swept);
                if visits[i].agent.audience != Audience::Human {
                    continue;
                }
            }
            corrections.extend(self.confirm(&visits[i]));
        }
        self.sweeps.settle(visits);
        corrections
    }

    fn await_confirmation(&mut self, person: Visit) {
        let key = (person.code.clone(), person.visitor);
        self.pending_order
            .push_back((person.time_ms, key.0.clone(), key.1));
        self.pending.insert(key, person);
        while self.pending_order.len() > MAX_PENDING {
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) {
        if let Some((at, code, visitor)) = self.pending_order.pop_front() {
            let key = (code, visitor);
            if self.pending.get(&key).is_some_and(|v| v.time_ms == at) {
                self.pending.remove(&key);
            }
        }
    }

    /// The correction a person's `visit` makes to its visitor's fast visit of the same link,
    /// if one awaits it: that one was the same person, tapping fast.
    fn confirm(&mut self, visit: &Visit) -> Option<Correction> {
        while (self.pending_order.front())
            .is_some_and(|(at, _, _)| *at < visit.time_ms - CONFIRM_WITHIN_MS)
        {
            self.forget_oldest();
        }
        let key = (visit.code.clone(), visit.visitor);
        let fast = self.pending.get(&key)?;
        if visit.time_ms - fast.time_ms <= AFTER_DELIVERY_MS {
            return None;
        }
        let mut after = self.pending.remove(&key)?;
        let mut before = after.clone();
        demote(&mut before, Reasons::AFTER_DELIVERY);
        after.reasons = Reasons(Reasons::AFTER_DELIVERY | Reasons::CONFIRMED);
        Some(Correction { before, after })
    }
}

/// `visit` judged a scanner for `reason`: a machine's device, as every machine's visit has.
pub(crate) fn demote(visit: &mut Visit, reason: u16) {
    visit.agent = Arc::new(AgentFacts {
        device: Device::Bot,
        audience: Audience::Scanner,
        ..AgentFacts::clone(&visit.agent)
    });
    visit.reasons = Reasons(visit.reasons.0 | reason);
}

#[cfg(test)]
mod tests;

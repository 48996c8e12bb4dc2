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
mod feed_id;
mod model;
mod sweep;

pub use feed_id::{parse_reclassified_id, reclassified_id};

pub use model::{
    Correction, LinkFacts, Reach, Verdict, AFTER_DELIVERY_MS, CONFIRM_WITHIN_MS, SWEEP_RECIPIENTS,
    SWEEP_WINDOW_MS,
};

use foldhash::HashMap;
use model::{demote, MAX_PENDING};
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::sweeps::Flag;
use shortlink_wire::verdict::Reasons;
use std::collections::VecDeque;
use std::sync::Arc;

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
    /// Call [`Hindsight::keep`] with the batch once it is stored.
    pub fn judge(&mut self, visits: &mut [Visit], facts: &LinkFacts) -> Vec<Correction> {
        self.sweeps.begin(visits.len());
        let campaigns = self.campaigns(facts);
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
            if let Some(&campaign) = campaigns.get(visits[i].code.as_str()) {
                self.sweeps.see(campaign, visits, i, &mut corrections);
                if visits[i].agent.audience != Audience::Human {
                    continue;
                }
            }
            corrections.extend(self.confirm(&visits[i]));
        }
        self.sweeps.settle(visits);
        corrections
    }

    /// After the batch judged last is stored: keeps those of its visits a sweep to come may
    /// correct (moved, not copied; the rest of the batch is dropped). A batch judged but never
    /// kept (its store gave up) is never corrected.
    pub fn keep(&mut self, visits: Vec<Visit>) {
        self.sweeps.keep(visits);
    }

    /// The sweeps noticed since the last call (`shortlink_wire::sweeps`), each with the Unix ms
    /// it protects caps until: the consumer publishes them once their batch is stored.
    pub fn take_noticed(&mut self) -> Vec<(Flag, i64)> {
        self.sweeps.take_noticed()
    }

    /// The workspace and campaign of each link of the batch that has a campaign, looked up once
    /// a batch, not per visit (a link of a workspace whose slug this version cannot read is
    /// judged with `default`'s name, never with another's).
    fn campaigns<'f>(&mut self, facts: &'f LinkFacts) -> HashMap<&'f str, sweep::Campaign> {
        (facts.campaigns.iter())
            .map(|(code, campaign)| {
                let workspace = (facts.workspaces.get(code))
                    .and_then(|slug| WorkspaceName::parse(slug.as_bytes()))
                    .unwrap_or(WorkspaceName::DEFAULT);
                let number = self.sweeps.campaign(workspace, campaign);
                (code.as_str(), (workspace, number))
            })
            .collect()
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
        if self.pending.is_empty() {
            return None;
        }
        let key = (visit.code.clone(), visit.visitor);
        let fast = self.pending.get(&key)?;
        if visit.time_ms - fast.time_ms <= AFTER_DELIVERY_MS {
            return None;
        }
        let mut before = self.pending.remove(&key)?;
        // The person's verdict it was demoted from, confirmed.
        let after = Verdict {
            agent: Arc::clone(&before.agent),
            reasons: Reasons(Reasons::AFTER_DELIVERY | Reasons::CONFIRMED),
        };
        demote(&mut before, Reasons::AFTER_DELIVERY);
        Some(Correction { before, after })
    }
}

#[cfg(test)]
mod tests;

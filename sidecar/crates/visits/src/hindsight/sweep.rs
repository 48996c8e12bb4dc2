//! Sweeps: one client network with one user agent reaching [`SWEEP_RECIPIENTS`] different links
//! of a campaign within [`SWEEP_WINDOW_MS`]. Each (campaign, network, agent) has a track of its
//! visits in the window; the visit that completes a sweep demotes itself and every earlier visit
//! of the track still counted as a person's (those of earlier batches as [`Correction`]s), and
//! the track stays a sweep while its visits keep coming within the window.
//!
//! A sweep seen is also a [`Flag`] to publish (`shortlink_wire::sweeps`): the module then spares
//! the caps of its further visits. A track publishes when it becomes a sweep, then again each
//! quarter of [`FLAG_MS`] it goes on, not once per visit.

use super::model::{demote, Correction, Verdict, SWEEP_RECIPIENTS, SWEEP_WINDOW_MS};
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::sweeps::{agent_key, Flag, Network, FLAG_MS};
use shortlink_wire::verdict::Reasons;
use std::collections::hash_map::{Entry, RandomState};
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::net::IpAddr;

/// A track's key: (workspace, campaign, network, user agent id), a few words, copied freely
/// (campaigns are named per workspace; the name is numbered in [`Sweeps::campaigns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    workspace: WorkspaceName,
    campaign: u32,
    network: Network,
    agent: Option<i64>,
}

/// Where a link belongs: its workspace and campaign.
pub(super) type Campaign<'a> = (WorkspaceName, &'a str);

/// The tracks of the last window. Each visit to a campaign's link touches its own track only:
/// found by a key of a few words (no string built or compared per visit), and tracks expire in
/// the order they went idle ([`Sweeps::expiry`]), not by a walk over every track each batch
/// (bench/results/system-cost-reclassified-2026-11-29-2.md: a quarter of the consumer's CPU with
/// people only, when each person's visit to a campaign's link held a copy of itself).
#[derive(Debug, Default)]
pub(super) struct Sweeps {
    tracks: HashMap<Key, Track>,
    /// workspace → campaign name → its number in [`Key`]; emptied with the tracks, so it holds
    /// the campaigns of the last window only.
    campaigns: HashMap<WorkspaceName, HashMap<String, u32>>,
    next_campaign: u32,
    /// (Unix ms, track): when to look at a track again, in the order pushed. A track is pushed
    /// when it opens; looked at, it is dropped if idle for a window and past its sweep, else
    /// pushed again for when it may be.
    expiry: VecDeque<(i64, Key)>,
    /// The members of the batch being judged that count as people: (track, member number),
    /// each given its visit once the batch is stored ([`Sweeps::keep`]).
    in_batch: Vec<(Key, u64)>,
    /// Tells recipients' links apart within a track by a hash of their code.
    codes: RandomState,
    /// Sweeps seen, to publish, with the Unix ms each lasts until.
    noticed: Vec<(Flag, i64)>,
}

#[derive(Debug, Default)]
struct Track {
    members: VecDeque<Member>,
    /// The number of the first of `members`: members are numbered in the order they came.
    first: u64,
    /// A visit until then (Unix ms) belongs to the sweep seen.
    swept_until: i64,
    latest: i64,
    /// The end of the flag published last for this track (Unix ms).
    published_until: i64,
}

#[derive(Debug)]
struct Member {
    at: i64,
    /// The hash of its link's code.
    code: u64,
    /// The visit while it counts as a person's.
    person: Option<Person>,
}

#[derive(Debug)]
enum Person {
    /// The visit of this index in the batch being judged, stored with the batch.
    InBatch(usize),
    /// The visit as it was stored, moved out of its batch once stored (not copied). Boxed: a
    /// track holds mostly visits of the batch being judged, by index.
    Stored(Box<Visit>),
}

impl Track {
    /// How many different links the members reached, counted up to [`SWEEP_RECIPIENTS`].
    fn recipients(&self) -> usize {
        let mut codes: Vec<u64> = Vec::with_capacity(SWEEP_RECIPIENTS);
        for member in &self.members {
            if !codes.contains(&member.code) {
                codes.push(member.code);
                if codes.len() == SWEEP_RECIPIENTS {
                    break;
                }
            }
        }
        codes.len()
    }

    /// The member numbered `number`, if still in the window.
    fn member_mut(&mut self, number: u64) -> Option<&mut Member> {
        let k = usize::try_from(number.checked_sub(self.first)?).ok()?;
        self.members.get_mut(k)
    }

    /// Adds the track's flag to `noticed` if a sweep visit at `at` extends it by a quarter of
    /// [`FLAG_MS`] or more (or it was never published).
    fn publish(&mut self, flag: Option<Flag>, at: i64, noticed: &mut Vec<(Flag, i64)>) {
        let until = at + FLAG_MS;
        if let Some(flag) = flag.filter(|_| until >= self.published_until + FLAG_MS / 4) {
            self.published_until = until;
            noticed.push((flag, until));
        }
    }
}

/// The flag a sweep `visit` from `ip` of `workspace` makes: its network and its agent as the
/// module sees them (an agent that came as bytes other than UTF-8 was changed on its way here,
/// so the module would key it apart: left out).
fn flag_of(workspace: WorkspaceName, ip: IpAddr, visit: &Visit) -> Option<Flag> {
    let ua = visit.user_agent.as_deref().unwrap_or("");
    if ua.contains('\u{fffd}') {
        return None;
    }
    Some(Flag {
        workspace,
        network: Network::of(ip),
        agent: agent_key(ua.as_bytes()),
    })
}

impl Sweeps {
    /// Sees `visits[i]`, a person's visit so far of a link of `campaign`: demotes it, and the
    /// earlier visits of its sweep, when it is part of one; answers the corrections to the
    /// earlier visits already stored. The sweep is told by the visit's network: the /24 of an
    /// IPv4 address, the /48 of an IPv6 one (a scanner's fleet spreads over neighbouring
    /// addresses).
    pub(super) fn see(
        &mut self,
        (workspace, campaign): Campaign<'_>,
        visits: &mut [Visit],
        i: usize,
    ) -> Vec<Correction> {
        let Some(ip) = (visits[i].ip.as_deref()).and_then(|ip| ip.parse::<IpAddr>().ok()) else {
            return Vec::new();
        };
        let (at, agent) = (visits[i].time_ms, visits[i].user_agent_id);
        let flag = flag_of(workspace, ip, &visits[i]);
        let key = Key {
            workspace,
            campaign: self.campaign(workspace, campaign),
            network: Network::of(ip),
            agent,
        };
        let code = self.codes.hash_one(visits[i].code.as_str());
        let track = match self.tracks.entry(key) {
            Entry::Occupied(track) => track.into_mut(),
            Entry::Vacant(track) => {
                self.expiry.push_back((at + SWEEP_WINDOW_MS, key));
                track.insert(Track::default())
            }
        };
        track.latest = track.latest.max(at);
        while (track.members.front()).is_some_and(|m| m.at < at - SWEEP_WINDOW_MS) {
            track.members.pop_front();
            track.first += 1;
        }
        if at <= track.swept_until {
            track.swept_until = at + SWEEP_WINDOW_MS;
            track.publish(flag, at, &mut self.noticed);
            demote(&mut visits[i], Reasons::SWEEP);
            track.members.push_back(Member {
                at,
                code,
                person: None,
            });
            return Vec::new();
        }
        let number = track.first + track.members.len() as u64;
        track.members.push_back(Member {
            at,
            code,
            person: Some(Person::InBatch(i)),
        });
        self.in_batch.push((key, number));
        if track.recipients() < SWEEP_RECIPIENTS {
            return Vec::new();
        }
        track.swept_until = at + SWEEP_WINDOW_MS;
        track.publish(flag, at, &mut self.noticed);
        let mut corrections = Vec::new();
        for member in &mut track.members {
            match member.person.take() {
                Some(Person::InBatch(j)) => demote(&mut visits[j], Reasons::SWEEP),
                Some(Person::Stored(before)) => {
                    let after = Verdict::demoted(&before, Reasons::SWEEP);
                    corrections.push(Correction {
                        before: *before,
                        after,
                    });
                }
                None => {}
            }
        }
        corrections
    }

    /// The number of `campaign` of `workspace` in track keys.
    fn campaign(&mut self, workspace: WorkspaceName, campaign: &str) -> u32 {
        let names = self.campaigns.entry(workspace).or_default();
        if let Some(&number) = names.get(campaign) {
            return number;
        }
        let number = self.next_campaign;
        self.next_campaign = self.next_campaign.wrapping_add(1);
        names.insert(campaign.to_owned(), number);
        number
    }

    /// How many tracks are held.
    #[cfg(test)]
    pub(super) fn tracks(&self) -> usize {
        self.tracks.len()
    }

    /// The sweeps seen since the last call, each with the Unix ms its flag lasts until.
    pub(super) fn take_noticed(&mut self) -> Vec<(Flag, i64)> {
        std::mem::take(&mut self.noticed)
    }

    /// After a batch is judged: the tracks idle for a window (and past their sweep) by the
    /// batch's latest visit are dropped, looked at in the order they may have gone idle.
    pub(super) fn settle(&mut self, visits: &[Visit]) {
        let Some(now) = visits.iter().map(|v| v.time_ms).max() else {
            return;
        };
        while let Some(&(due, key)) = self.expiry.front() {
            if due >= now {
                break;
            }
            self.expiry.pop_front();
            let Some(track) = self.tracks.get(&key) else {
                continue;
            };
            let until = (track.latest + SWEEP_WINDOW_MS).max(track.swept_until);
            match until < now {
                true => drop(self.tracks.remove(&key)),
                false => self.expiry.push_back((until, key)),
            }
        }
        if self.tracks.is_empty() {
            self.campaigns.clear();
        }
    }

    /// After the batch judged last is stored: its visits still counted as people's are kept by
    /// their tracks, moved out of `visits` (a sweep to come corrects them as stored); the rest
    /// of the batch is dropped here.
    pub(super) fn keep(&mut self, visits: Vec<Visit>) {
        let mut visits: Vec<Option<Visit>> = visits.into_iter().map(Some).collect();
        for (key, number) in self.in_batch.drain(..) {
            let Some(member) = (self.tracks.get_mut(&key)).and_then(|t| t.member_mut(number))
            else {
                continue;
            };
            if let Some(Person::InBatch(j)) = member.person {
                member.person = (visits.get_mut(j).and_then(Option::take))
                    .filter(|v| v.agent.audience == Audience::Human)
                    .map(|v| Person::Stored(Box::new(v)));
            }
        }
    }

    /// Forgets the visits of a batch judged but never kept (its store gave up): their indices
    /// would name the next batch's visits.
    pub(super) fn forget_unkept(&mut self) {
        for (key, number) in self.in_batch.drain(..) {
            let member = (self.tracks.get_mut(&key)).and_then(|t| t.member_mut(number));
            if let Some(member) = member.filter(|m| matches!(m.person, Some(Person::InBatch(_)))) {
                member.person = None;
            }
        }
    }
}

//! Sweeps: one client network with one user agent reaching [`SWEEP_RECIPIENTS`] different links
//! of a campaign within [`SWEEP_WINDOW_MS`]. Each (campaign, network, agent) has a track of its
//! visits in the window; the visit that completes a sweep demotes itself and every earlier visit
//! of the track still counted as a person's (those of earlier batches as [`Correction`]s), and
//! the track stays a sweep while its visits keep coming within the window.
//!
//! A sweep seen is also a [`Flag`] to publish (`shortlink_wire::sweeps`): the module then spares
//! the caps of its further visits. A track publishes when it becomes a sweep, then again each
//! quarter of [`FLAG_MS`] it goes on, not once per visit.
//!
//! Every person's visit to a campaign's link opens or extends a track, so what a track costs is
//! what the consumer pays per visit (bench/results/system-cost-reclassified-2026-11-30.md): a
//! member is a few words naming its visit by (batch, index), the stored batches are kept whole
//! for a window ([`Stored`], moved, never copied or boxed per visit), and tracks live in two
//! generations of a window each ([`Generations`]), dropped a generation at a time, not removed
//! one by one (a hash map with a removal per insertion fills with tombstones and rehashes
//! itself whole, a stall of a million entries every few seconds).

use super::model::{scanner, Correction, Verdict, SWEEP_RECIPIENTS, SWEEP_WINDOW_MS};
use foldhash::fast::RandomState;
use foldhash::HashMap;
use shortlink_visit_enrich::{AgentFacts, Audience, Visit};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::sweeps::{agent_key, Flag, Network, FLAG_MS};
use shortlink_wire::verdict::Reasons;
use smallvec::SmallVec;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Arc;

/// A track's key: (campaign, network, user agent id), a few words (campaigns are numbered per
/// workspace and name in [`Sweeps::campaigns`], so the number names the workspace too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    campaign: u32,
    network: Network,
    agent: Option<i64>,
}

/// Where a link belongs: its workspace and its campaign's number ([`Sweeps::campaign`]).
pub(super) type Campaign = (WorkspaceName, u32);

/// The tracks and the visits they may correct. See the module doc.
#[derive(Debug, Default)]
pub(super) struct Sweeps {
    tracks: Generations,
    /// workspace → campaign name → its number in [`Key`]; emptied with the tracks, so it holds
    /// the campaigns of the last two windows only.
    campaigns: HashMap<WorkspaceName, HashMap<String, u32>>,
    next_campaign: u32,
    /// The number of the batch being judged; a batch judged but never kept is never stored
    /// under its number, so its members find no visit to correct.
    judging: u64,
    /// Which visits of the batch being judged are members of a track, as people.
    members_in_batch: Vec<bool>,
    /// The batches stored in the last window, oldest first, by number.
    stored: VecDeque<Stored>,
    /// Tells recipients' links apart within a track by a hash of their code.
    codes: RandomState,
    demoter: Demoter,
    /// Sweeps seen, to publish, with the Unix ms each lasts until.
    noticed: Vec<(Flag, i64)>,
}

/// The tracks touched in the current window (of visits' time) and in the one before. A track
/// touched again moves to `current`; when a window has passed, `previous` (idle for a window
/// at least) is dropped whole and `current` takes its place. Only insertions into `current`.
#[derive(Debug, Default)]
struct Generations {
    current: HashMap<Key, Track>,
    previous: HashMap<Key, Track>,
    /// When `current` began (Unix ms); `None` before the first visit.
    began: Option<i64>,
}

impl Generations {
    /// The track of `key`, moved into `current` if it was in `previous`, opened if neither.
    fn touch(&mut self, key: Key) -> &mut Track {
        match self.current.entry(key) {
            Entry::Occupied(track) => track.into_mut(),
            Entry::Vacant(track) => track.insert(self.previous.remove(&key).unwrap_or_default()),
        }
    }

    /// Drops the tracks idle for a window by `now`, a generation at a time.
    fn turn(&mut self, now: i64) {
        let began = *self.began.get_or_insert(now);
        if now - began < SWEEP_WINDOW_MS {
            return;
        }
        std::mem::swap(&mut self.current, &mut self.previous);
        // Cleared, not replaced: the table keeps its size for the next window's tracks.
        self.current.clear();
        self.began = Some(now);
    }

    fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

/// A batch as stored: its visits still counted as people's and part of a track (taken out as
/// they are corrected), the rest dropped when it was kept.
#[derive(Debug)]
struct Stored {
    number: u64,
    /// Its latest visit (Unix ms): the batch goes once that is a window old.
    latest: i64,
    /// The index in the batch of each of `visits`, ascending.
    indices: Vec<u32>,
    visits: Vec<Option<Visit>>,
}

impl Stored {
    /// The visit of index `i` in the batch, taken out, if it is still here.
    fn take(&mut self, i: u32) -> Option<Visit> {
        let k = self.indices.binary_search(&i).ok()?;
        self.visits[k].take()
    }
}

#[derive(Debug, Default)]
struct Track {
    /// The visits of the window, oldest first, while the track is no sweep (a sweep's visits
    /// are demoted as they come; it needs none of them to go on).
    members: SmallVec<[Member; 1]>,
    /// A visit until then (Unix ms) belongs to the sweep seen.
    swept_until: i64,
    /// The end of the flag published last for this track (Unix ms).
    published_until: i64,
}

#[derive(Debug)]
struct Member {
    at: i64,
    /// The hash of its link's code.
    code: u64,
    /// Its visit, (batch number, index), while it counts as a person's.
    person: Option<(u64, u32)>,
}

impl Track {
    /// How many different links the members reached, counted up to [`SWEEP_RECIPIENTS`].
    fn recipients(&self) -> usize {
        let mut codes: SmallVec<[u64; SWEEP_RECIPIENTS]> = SmallVec::new();
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

/// Demotes sweeps' visits: a sweep's visits share their agent (the enricher's, one per user
/// agent), whose scanner's facts are made once, not once per visit.
#[derive(Debug, Default)]
struct Demoter {
    last: Option<(Arc<AgentFacts>, Arc<AgentFacts>)>,
}

impl Demoter {
    fn verdict(&mut self, visit: &Visit) -> Verdict {
        let agent = match &self.last {
            Some((person, machine)) if Arc::ptr_eq(person, &visit.agent) => Arc::clone(machine),
            _ => {
                let machine = scanner(&visit.agent);
                self.last = Some((Arc::clone(&visit.agent), Arc::clone(&machine)));
                machine
            }
        };
        Verdict::demoted(visit, agent, Reasons::SWEEP)
    }

    fn demote(&mut self, visit: &mut Visit) {
        self.verdict(visit).apply(visit);
    }
}

impl Sweeps {
    /// Starts judging a batch of `len` visits.
    pub(super) fn begin(&mut self, len: usize) {
        self.judging += 1;
        self.members_in_batch.clear();
        self.members_in_batch.resize(len, false);
    }

    /// Sees `visits[i]`, a person's visit so far of a link of `campaign`: demotes it, and the
    /// earlier visits of its sweep, when it is part of one; adds the corrections to the
    /// earlier visits already stored to `corrections`. The sweep is told by the visit's
    /// network: the /24 of an IPv4 address, the /48 of an IPv6 one (a scanner's fleet spreads
    /// over neighbouring addresses).
    pub(super) fn see(
        &mut self,
        (workspace, campaign): Campaign,
        visits: &mut [Visit],
        i: usize,
        corrections: &mut Vec<Correction>,
    ) {
        let Some(ip) = (visits[i].ip.as_deref()).and_then(|ip| ip.parse::<IpAddr>().ok()) else {
            return;
        };
        let at = visits[i].time_ms;
        let key = Key {
            campaign,
            network: Network::of(ip),
            agent: visits[i].user_agent_id,
        };
        let track = self.tracks.touch(key);
        let demoter = &mut self.demoter;
        if at <= track.swept_until {
            track.swept_until = at + SWEEP_WINDOW_MS;
            track.publish(flag_of(workspace, ip, &visits[i]), at, &mut self.noticed);
            demoter.demote(&mut visits[i]);
            return;
        }
        let code = self.codes.hash_one(visits[i].code.as_str());
        let stale = (track.members.iter())
            .take_while(|m| m.at < at - SWEEP_WINDOW_MS)
            .count();
        track.members.drain(..stale);
        track.members.push(Member {
            at,
            code,
            person: Some((self.judging, i as u32)),
        });
        self.members_in_batch[i] = true;
        if track.recipients() < SWEEP_RECIPIENTS {
            return;
        }
        track.swept_until = at + SWEEP_WINDOW_MS;
        track.publish(flag_of(workspace, ip, &visits[i]), at, &mut self.noticed);
        // A sweep's visits are all demoted now; it goes on without them (`Track::members`).
        for member in track.members.drain(..) {
            let Some((batch, j)) = member.person else {
                continue;
            };
            if batch == self.judging {
                demoter.demote(&mut visits[j as usize]);
                continue;
            }
            let stored = (self.stored.binary_search_by_key(&batch, |s| s.number).ok())
                .and_then(|k| self.stored[k].take(j));
            if let Some(before) = stored.filter(|v| v.agent.audience == Audience::Human) {
                let after = demoter.verdict(&before);
                corrections.push(Correction { before, after });
            }
        }
    }

    /// The number of `campaign` of `workspace` in track keys.
    pub(super) fn campaign(&mut self, workspace: WorkspaceName, campaign: &str) -> u32 {
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

    /// After a batch is judged: the tracks idle for a window by the batch's latest visit go,
    /// a generation at a time, and so do the stored batches a window old.
    pub(super) fn settle(&mut self, visits: &[Visit]) {
        let Some(now) = visits.iter().map(|v| v.time_ms).max() else {
            return;
        };
        self.tracks.turn(now);
        while (self.stored.front()).is_some_and(|s| s.latest < now - SWEEP_WINDOW_MS) {
            self.stored.pop_front();
        }
        if self.tracks.len() == 0 {
            self.campaigns.clear();
        }
    }

    /// After the batch judged last is stored: its visits still counted as people's and part of
    /// a track are kept, moved (a sweep to come corrects them as stored); the rest of the batch
    /// is dropped here.
    pub(super) fn keep(&mut self, visits: Vec<Visit>) {
        let Some(latest) = visits.iter().map(|v| v.time_ms).max() else {
            return;
        };
        let members = &self.members_in_batch;
        let mut indices = Vec::new();
        // In place: the batch's own vector, its members moved to its front.
        let mut visits: Vec<Option<Visit>> = (visits.into_iter().enumerate())
            .filter(|(i, visit)| members[*i] && visit.agent.audience == Audience::Human)
            .map(|(i, visit)| {
                indices.push(i as u32);
                Some(visit)
            })
            .collect();
        if visits.is_empty() {
            return;
        }
        // A batch of few campaign visits does not hold a window's worth of empty slots.
        if visits.len() < visits.capacity() / 2 {
            visits.shrink_to_fit();
        }
        self.stored.push_back(Stored {
            number: self.judging,
            latest,
            indices,
            visits,
        });
    }
}

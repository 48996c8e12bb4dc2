//! Sweeps: one client network with one user agent reaching [`SWEEP_RECIPIENTS`] different links
//! of a campaign within [`SWEEP_WINDOW_MS`]. Each (campaign, network, agent) has a track of its
//! visits in the window; the visit that completes a sweep demotes itself and every earlier visit
//! of the track still counted as a person's (those of earlier batches as [`Correction`]s), and
//! the track stays a sweep while its visits keep coming within the window.
//!
//! A sweep seen is also a [`Flag`] to publish (`shortlink_wire::sweeps`): the module then spares
//! the caps of its further visits. A track publishes when it becomes a sweep, then again each
//! quarter of [`FLAG_MS`] it goes on, not once per visit.

use super::model::{demote, Correction, SWEEP_RECIPIENTS, SWEEP_WINDOW_MS};
use shortlink_visit_enrich::privacy::anonymize_ip;
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::sweeps::{agent_key, Flag, Network, FLAG_MS};
use shortlink_wire::verdict::Reasons;
use std::collections::{HashMap, HashSet, VecDeque};

/// (workspace, campaign, network, user agent id): campaigns are named per workspace.
type Key = (WorkspaceName, String, String, Option<i64>);

/// Where a link belongs: its workspace and campaign.
pub(super) type Campaign<'a> = (WorkspaceName, &'a str);

#[derive(Debug, Default)]
pub(super) struct Sweeps {
    tracks: HashMap<Key, Track>,
    /// The tracks that hold visits of the batch being judged, by index.
    in_batch: Vec<Key>,
    /// Sweeps seen, to publish, with the Unix ms each lasts until.
    noticed: Vec<(Flag, i64)>,
}

#[derive(Debug, Default)]
struct Track {
    members: VecDeque<Member>,
    /// A visit until then (Unix ms) belongs to the sweep seen.
    swept_until: i64,
    latest: i64,
    /// The end of the flag published last for this track (Unix ms).
    published_until: i64,
}

#[derive(Debug)]
struct Member {
    at: i64,
    code: String,
    /// The visit while it counts as a person's.
    person: Option<Person>,
}

#[derive(Debug)]
enum Person {
    InBatch(usize),
    // Boxed: a track holds mostly visits of the batch being judged, by index.
    Stored(Box<Visit>),
}

impl Track {
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

/// The flag a sweep `visit` of `workspace` makes: its network and its agent as the module sees
/// them (an agent that came as bytes other than UTF-8 was changed on its way here, so the
/// module would key it apart: left out).
fn flag_of(workspace: WorkspaceName, visit: &Visit) -> Option<Flag> {
    let ip = visit.ip.as_deref()?.parse().ok()?;
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

/// The network a sweep is told by: the /24 of an IPv4 address, the /48 of an IPv6 one (a
/// scanner's fleet spreads over neighbouring addresses).
fn network(visit: &Visit) -> Option<String> {
    let ip = visit.ip.as_deref()?.parse().ok()?;
    Some(anonymize_ip(ip).to_string())
}

impl Sweeps {
    /// Sees `visits[i]`, a person's visit so far of a link of `campaign`: demotes it, and the
    /// earlier visits of its sweep, when it is part of one; answers the corrections to the
    /// earlier visits already stored.
    pub(super) fn see(
        &mut self,
        (workspace, campaign): Campaign<'_>,
        visits: &mut [Visit],
        i: usize,
    ) -> Vec<Correction> {
        let Some(net) = network(&visits[i]) else {
            return Vec::new();
        };
        let (at, agent) = (visits[i].time_ms, visits[i].user_agent_id);
        let flag = flag_of(workspace, &visits[i]);
        let key = (workspace, campaign.to_owned(), net, agent);
        let track = self.tracks.entry(key.clone()).or_default();
        track.latest = track.latest.max(at);
        while (track.members.front()).is_some_and(|m| m.at < at - SWEEP_WINDOW_MS) {
            track.members.pop_front();
        }
        let code = visits[i].code.clone();
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
        track.members.push_back(Member {
            at,
            code,
            person: Some(Person::InBatch(i)),
        });
        self.in_batch.push(key);
        let recipients: HashSet<&str> = track.members.iter().map(|m| m.code.as_str()).collect();
        if recipients.len() < SWEEP_RECIPIENTS {
            return Vec::new();
        }
        track.swept_until = at + SWEEP_WINDOW_MS;
        track.publish(flag, at, &mut self.noticed);
        let mut corrections = Vec::new();
        for member in &mut track.members {
            match member.person.take() {
                Some(Person::InBatch(j)) => demote(&mut visits[j], Reasons::SWEEP),
                Some(Person::Stored(before)) => {
                    let before = *before;
                    let mut after = before.clone();
                    demote(&mut after, Reasons::SWEEP);
                    corrections.push(Correction { before, after });
                }
                None => {}
            }
        }
        corrections
    }

    /// The sweeps seen since the last call, each with the Unix ms its flag lasts until.
    pub(super) fn take_noticed(&mut self) -> Vec<(Flag, i64)> {
        std::mem::take(&mut self.noticed)
    }

    /// After a batch: its visits still counted as people's are kept for the sweeps to come (a
    /// copy: they may be corrected after they are stored), and the tracks idle for a window
    /// are dropped.
    pub(super) fn settle(&mut self, visits: &[Visit]) {
        for key in self.in_batch.drain(..) {
            let Some(track) = self.tracks.get_mut(&key) else {
                continue;
            };
            for member in &mut track.members {
                if let Some(Person::InBatch(j)) = member.person {
                    let visit = &visits[j];
                    member.person = (visit.agent.audience == Audience::Human)
                        .then(|| Person::Stored(Box::new(visit.clone())));
                }
            }
        }
        let Some(now) = visits.iter().map(|v| v.time_ms).max() else {
            return;
        };
        self.tracks
            .retain(|_, t| t.latest >= now - SWEEP_WINDOW_MS || t.swept_until >= now);
    }
}

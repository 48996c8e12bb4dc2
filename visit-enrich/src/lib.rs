//! Enrichment of shortlink visit events: the pure first half of the visit pipeline (the second,
//! `sidecar/crates/visits/src/`, consumes the stream and stores and rolls up what this returns).
//!
//! The sidecar reads `sl:events` entries, turns each into a [`VisitEvent`], and [`Enricher::enrich`]s
//! it into a [`Visit`] with every derived field the stats need (agent, audience, geo, referrer host,
//! short domain, language, visitor hash). No I/O happens here after the geo database is opened, so
//! this runs at stream speed and is tested without Redis or SQL.

#![forbid(unsafe_code)]

pub mod agent;
pub mod event;
pub mod geo;
pub mod privacy;
pub mod referrer;

pub use agent::{Agent, Audience, Device};
pub use event::{split_entry, EventError, VisitEvent};
pub use geo::{Geo, GeoDb, GeoError};

use serde::Serialize;
use shortlink_wire::agent::{lowered, MAX_AGENT};
use shortlink_wire::network::Networks;
use shortlink_wire::verdict::{self, Reasons, Signals};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Longest language tag kept (BCP 47 tags in practice are far shorter; this bounds junk).
pub const MAX_LANGUAGE_LEN: usize = 16;

/// Distinct user agents whose parse the [`Enricher`] remembers. Parsing (woothee's regexes plus the
/// classifier table) is the most expensive step of enrichment, and traffic repeats a few hundred
/// user agents over and over; the bound keeps a flood of unique junk agents from growing memory.
pub const AGENT_CACHE_SIZE: usize = 4096;

/// Turns events into visits.
#[derive(Debug)]
pub struct Enricher {
    pub geo: GeoDb,
    /// Store IPs truncated (IPv4 /24, IPv6 /48). Geo and the visitor hash still use the full address.
    pub anonymize: bool,
    /// User agent → its parse, classification and id (pure functions of the string, so caching
    /// them changes no result). Emptied when full rather than LRU-evicted: simpler, and a refill
    /// costs one parse per distinct agent.
    agents: Mutex<HashMap<String, Arc<AgentFacts>>>,
    /// At most this many agents in `agents`; 0 parses every visit's agent.
    agent_cache_size: usize,
    /// The hosting networks and the ASN table (`None`: no network is judged).
    networks: Option<Arc<Networks>>,
}

/// What one user agent string says about who clicked, worked out once per distinct string (the
/// [`Enricher`]'s cache) and shared by every visit that sent it: a visit points here instead of
/// carrying its own copies of these strings, five allocations a visit (issue 38).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentFacts {
    pub browser: Option<String>,
    pub browser_version: Option<String>,
    pub os: Option<String>,
    pub os_version: Option<String>,
    /// [`Device::Bot`] for every bot and preview, whatever device the UA claims (iMessage's fetcher
    /// claims to be a Mac): device breakdowns describe people.
    pub device: Device,
    pub audience: Audience,
    /// Who the bot or preview fetcher is ("WhatsApp", "Slack", "curl"); `None` for humans.
    pub agent_label: Option<&'static str>,
    /// [`agent::user_agent_id`] of the string.
    #[serde(skip)]
    pub id: i64,
}

impl AgentFacts {
    /// Parses and classifies `ua` (empty: no user agent).
    fn of(ua: &str) -> AgentFacts {
        let agent = Agent::parse(ua);
        let class = agent::classify(Some(ua), &agent);
        AgentFacts {
            browser: agent.browser,
            browser_version: agent.browser_version,
            os: agent.os,
            os_version: agent.os_version,
            device: if class.audience == Audience::Human {
                agent.device
            } else {
                Device::Bot
            },
            audience: class.audience,
            agent_label: class.label,
            id: agent::user_agent_id(ua),
        }
    }
}

/// One enriched visit, ready to store. Owned and flat so a storage layer can bind it directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Visit {
    /// Stream entry id: the idempotency key for at-least-once delivery.
    pub event_id: String,
    pub code: String,
    /// Unix time of the redirect, in milliseconds.
    pub time_ms: i64,
    pub status: Option<u16>,
    /// Client address as stored: truncated when [`Enricher::anonymize`] is on.
    pub ip: Option<String>,
    /// 16 bytes of SHA-256(full ip, 0x00, user agent); see [`privacy::visitor_hash`]. Stored as
    /// these bytes.
    pub visitor: [u8; 16],
    pub user_agent: Option<String>,
    /// [`agent::user_agent_id`] of `user_agent`: raw visits store this id, the string once in
    /// `user_agents`.
    pub user_agent_id: Option<i64>,
    /// What `user_agent` says (without one: what an empty one says).
    #[serde(flatten)]
    pub agent: Arc<AgentFacts>,
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    pub isp: Option<String>,
    pub referrer_host: Option<String>,
    pub short_domain: Option<String>,
    pub language: Option<String>,
    /// The click-time rule (and variant) that answered; `None` for the link's own target.
    pub rule: Option<String>,
    /// `Some` for an orphan visit: `code` is then the path asked for.
    #[serde(skip)]
    pub orphan: Option<shortlink_wire::event::OrphanKind>,
    /// The host's workspace as nginx mapped it (orphan visits and 410s); `None`: not recorded.
    #[serde(skip)]
    pub workspace: Option<String>,
    /// Why `agent.audience` is what it is (`shortlink_wire::verdict::Reasons`; none for a person).
    #[serde(skip)]
    pub reasons: Reasons,
}

impl Enricher {
    pub fn new(geo: GeoDb, anonymize: bool) -> Self {
        Enricher {
            geo,
            anonymize,
            agents: Mutex::default(),
            agent_cache_size: AGENT_CACHE_SIZE,
            networks: None,
        }
    }

    /// Judges visits by their client's network too ([`Networks`]).
    pub fn with_networks(mut self, networks: Networks) -> Self {
        self.networks = networks.is_enabled().then(|| Arc::new(networks));
        self
    }

    /// `signals` with the client's network looked up, for a visit a person's agent made (a
    /// machine's agent decides first; a visit without an address has no network).
    fn with_network(
        &self,
        agent: &AgentFacts,
        ip: Option<std::net::IpAddr>,
        signals: Option<Signals>,
    ) -> Option<Signals> {
        let (Some(networks), Some(ip)) = (&self.networks, ip) else {
            return signals;
        };
        if agent.audience != Audience::Human {
            return signals;
        }
        Some(
            signals
                .unwrap_or_default()
                .with_network(networks.hosting(ip)),
        )
    }

    /// Remembers at most `entries` user agents' parses (0: none, every visit parses its own).
    pub fn with_agent_cache(mut self, entries: usize) -> Self {
        self.agent_cache_size = entries;
        self
    }

    /// How many user agents' parses are remembered now.
    pub fn cached_agents(&self) -> usize {
        self.agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The parse, classification and id of `ua`, from the cache when seen before.
    fn agent(&self, ua: &str) -> Arc<AgentFacts> {
        // A poisoned lock only means another thread panicked mid-insert: the map is still valid.
        let lock = || self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = lock().get(ua) {
            return Arc::clone(hit);
        }
        // Parsed outside the lock: two threads may parse the same agent once each, harmlessly.
        let parsed = Arc::new(AgentFacts::of(ua));
        if self.agent_cache_size == 0 {
            return parsed;
        }
        let mut agents = lock();
        if agents.len() >= self.agent_cache_size {
            agents.clear();
        }
        agents.insert(ua.to_owned(), Arc::clone(&parsed));
        parsed
    }

    pub fn enrich(&self, event: &VisitEvent) -> Visit {
        self.enrich_owned(event.clone())
    }

    /// [`Enricher::enrich`] taking the event, whose strings move into the visit rather than being
    /// copied (the consumer's path: four allocations and copies a visit fewer).
    pub fn enrich_owned(&self, event: VisitEvent) -> Visit {
        // No user agent and an empty one classify alike ("no user agent").
        let ua = event.user_agent.as_deref().unwrap_or("");
        let agent = self.agent(ua);
        let signals = self.with_network(&agent, event.ip, event.signals);
        let (agent, reasons) = judged(agent, ua, signals);
        let geo = event.ip.map(|ip| self.geo.lookup(ip)).unwrap_or_default();
        // Formatted once: the visitor hash and the stored address (unless anonymised) share it.
        let canonical = event.ip.map(|ip| ip.to_canonical().to_string());
        let visitor = privacy::visitor_hash_of_text(canonical.as_deref(), ua);
        let stored_ip = match (self.anonymize, event.ip) {
            (true, Some(ip)) => Some(privacy::anonymize_ip(ip).to_string()),
            _ => canonical,
        };
        Visit {
            event_id: event.id,
            code: event.code,
            time_ms: event.time_ms,
            status: event.status,
            ip: stored_ip,
            visitor,
            user_agent_id: event.user_agent.as_ref().map(|_| agent.id),
            user_agent: event.user_agent,
            agent,
            country: geo.country,
            region: geo.region,
            city: geo.city,
            isp: geo.isp,
            referrer_host: event.referrer.as_deref().and_then(referrer::referrer_host),
            short_domain: event.host.as_deref().and_then(referrer::short_domain),
            language: event.accept_language.as_deref().and_then(language),
            rule: event.rule,
            orphan: event.orphan,
            workspace: event.workspace,
            reasons,
        }
    }
}

/// The visit's verdict: the agent's own for a machine's agent; for a person's, the click-time
/// verdict of the request's `signals` (method, headers: `shortlink_wire::verdict::at_click`, the
/// module's very function), which may call it a scanner or a bot. A visit of a module before
/// signals keeps the agent's. Only a visit whose verdict the signals change pays for a copy.
fn judged(
    agent: Arc<AgentFacts>,
    ua: &str,
    signals: Option<Signals>,
) -> (Arc<AgentFacts>, Reasons) {
    if agent.audience != Audience::Human {
        let reason = if ua.trim().is_empty() {
            Reasons::NO_AGENT
        } else {
            Reasons::AGENT
        };
        return (agent, Reasons(reason));
    }
    let Some(signals) = signals else {
        return (agent, Reasons::default());
    };
    let mut lower = [0; MAX_AGENT];
    let verdict = verdict::at_click(lowered(ua.as_bytes(), &mut lower), signals);
    if verdict.is_human() {
        return (agent, verdict.reasons);
    }
    let machine = AgentFacts {
        // Device breakdowns describe people, as for every machine's agent.
        device: Device::Bot,
        audience: verdict.audience,
        ..AgentFacts::clone(&agent)
    };
    (Arc::new(machine), verdict.reasons)
}

/// The first tag of an `Accept-Language` header, lowercased: "de-DE,de;q=0.9" → "de-de". Quality
/// values are ignored: browsers list the preferred language first. A tag longer than
/// [`MAX_LANGUAGE_LEN`] keeps its leading subtags that fit; `*` and junk give `None`.
pub fn language(accept_language: &str) -> Option<String> {
    let first = accept_language.split(',').next()?.split(';').next()?.trim();
    let mut tag = first.replace('_', "-").to_ascii_lowercase();
    let valid = tag.starts_with(|c: char| c.is_ascii_alphabetic())
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !valid {
        return None;
    }
    while tag.len() > MAX_LANGUAGE_LEN {
        tag.truncate(tag.rfind('-')?);
    }
    Some(tag)
}

#[cfg(test)]
mod tests;

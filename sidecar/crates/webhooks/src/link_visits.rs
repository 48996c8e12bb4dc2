//! One link's stored visits, newest first, as the feed gives each away (its verdict and reasons
//! included): the console's list under a link and `GET /api/v1/links/{code}/visits` (issue 78,
//! "shown where operators look… and why"), with each reason's words from one table. The rows are the feed's ([`FeedRow`], the same columns and the same conversion into
//! a [`FeedEvent`]), read by link and time instead of by feed position.

use super::cursor::Cursor;
use super::event::{FeedEvent, Privacy};
use super::row::FeedRow;
use super::store::WebhookStore;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use shortlink_wire::agent::Audience;
use shortlink_wire::verdict::Reasons;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use utoipa::ToSchema;

/// Where a newest-first list goes on: the last visit shown, by its time (microseconds, every
/// backend's finest) and its id, which breaks ties between visits of the same instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitKey {
    pub at: DateTime<Utc>,
    pub event_id: String,
}

impl VisitKey {
    pub fn of(row: &FeedRow) -> Self {
        VisitKey {
            at: row.visited_at,
            event_id: row.event_id.clone(),
        }
    }
}

/// `<Unix microseconds>_<event id>`: the digits hold no `_`, so the first one splits.
impl fmt::Display for VisitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.at.timestamp_micros(), self.event_id)
    }
}

/// Read by exactly the pattern the API documents, `^[0-9]{1,18}_[!-~]{1,128}$` (a visit's id
/// is printable ASCII: its stream entry's `<ms>-<n>`, an import's `import:<source>:<code>:…`), so
/// that no byte a backend's text refuses (PostgreSQL's NUL) reaches a statement. A time past
/// every backend's (year 9999) is that year's end: every visit is older.
impl FromStr for VisitKey {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (micros, event_id) = text.split_once('_').ok_or(())?;
        let digits = (1..=18).contains(&micros.len()) && micros.bytes().all(|b| b.is_ascii_digit());
        let id =
            (1..=128).contains(&event_id.len()) && event_id.bytes().all(|b| b.is_ascii_graphic());
        if !(digits && id) {
            return Err(());
        }
        let last = DateTime::from_timestamp(253_402_300_799, 0).ok_or(())?;
        let micros = micros.parse().map_err(|_| ())?;
        let at = DateTime::from_timestamp_micros(micros).ok_or(())?.min(last);
        Ok(VisitKey {
            at,
            event_id: event_id.to_owned(),
        })
    }
}

/// Which of a link's visits a page holds.
#[derive(Debug, Clone, Default)]
pub struct VisitQuery {
    /// Only those older than this visit (the previous page's last).
    pub before: Option<VisitKey>,
    /// Only those with this verdict; every one without.
    pub audience: Option<Audience>,
    /// Visits at most.
    pub limit: u32,
}

/// One visit of the list: its event, its reasons in words, and who fetched.
#[derive(Debug, Clone)]
pub struct LinkVisit {
    pub event: FeedEvent,
    /// The event's `reasons`, in their order, each with its words.
    pub reasons: Vec<Reason>,
    /// Who fetched, in a few words ([`client`]).
    pub client: String,
}

/// Why a visit got its verdict: the code the feed and webhooks carry, and the words the console
/// shows for it ([`WORDS`], with what the visit adds: the agent's label, the network's system).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Reason {
    /// `agent`, `no_agent`, `method`, `headers`, `network`, `after_delivery`, `sweep` or
    /// `confirmed` (docs/BOTS.md).
    pub code: &'static str,
    /// In words, e.g. `preview agent (WhatsApp)`, `hosting network (AS16509 Amazon.com, Inc.)`.
    pub words: String,
}

/// Each reason's words, as docs/BOTS.md names its signal: one line a reason of
/// [`Reasons::NAMES`]. `agent` is said with the verdict it gave (`preview agent`), and both it and
/// `network` with what the visit names in brackets.
pub const WORDS: [(&str, &str); 8] = [
    ("agent", "agent"),
    ("no_agent", "no user agent"),
    ("method", "HEAD or OPTIONS request"),
    ("headers", "a browser's agent without its headers"),
    ("network", "hosting network"),
    ("after_delivery", "within 3 s of delivery"),
    ("sweep", "sweep of the campaign"),
    ("confirmed", "confirmed by a later visit"),
];

/// A page of a link's visits.
#[derive(Debug, Clone, Default)]
pub struct LinkVisits {
    pub visits: Vec<LinkVisit>,
    /// Where the next (older) page starts; `None` after the oldest.
    pub next: Option<VisitKey>,
}

/// Names the autonomous system of a visit's address as the visit store kept it
/// (`shortlink_visits::click_judge::ClickJudge::system`): asked only for a visit judged by its
/// network.
pub type NameSystem<'a> = &'a (dyn Fn(IpAddr) -> Option<String> + Sync);

/// The page of `workspace`'s link `code`'s visits `query` asks for, newest first.
pub(crate) async fn read(
    store: &dyn WebhookStore,
    privacy: Privacy,
    workspace: WorkspaceId,
    code: &str,
    query: &VisitQuery,
    system: NameSystem<'_>,
) -> StorageResult<LinkVisits> {
    let limit = query.limit;
    // One more than shown says whether an older page exists.
    let read = store.link_visits(
        workspace,
        code,
        query.before.as_ref(),
        query.audience,
        limit + 1,
    );
    let mut rows = read.await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = more.then(|| rows.last().map(VisitKey::of)).flatten();
    let visits = rows
        .into_iter()
        .map(|mut row| {
            let isp = row.isp.take();
            let hosting = Reasons(u16::try_from(row.reasons).unwrap_or(0)).has(Reasons::NETWORK);
            let address = row.ip.as_deref().and_then(|ip| ip.parse().ok());
            let network = match address.filter(|_| hosting).and_then(system) {
                Some(system) => Some(system),
                None => isp,
            };
            // Not read from the feed: no feed position to resume from.
            let event = FeedEvent::new(row, Cursor::default(), privacy);
            let reasons = (event.reasons.iter())
                .map(|&code| Reason {
                    code,
                    words: words(code, &event, network.as_deref()),
                })
                .collect();
            LinkVisit {
                client: client(&event),
                reasons,
                event,
            }
        })
        .collect();
    Ok(LinkVisits { visits, next })
}

/// A reason's words ([`WORDS`]): `agent` with its verdict and the agent table's label,
/// `network` with the `network`'s name (its autonomous system, else the ISP the store kept).
fn words(code: &str, event: &FeedEvent, network: Option<&str>) -> String {
    let plain = (WORDS.iter().find(|(c, _)| *c == code)).map_or(code, |(_, words)| words);
    let (said, detail) = match code {
        "agent" => {
            let kind = match event.audience.as_str() {
                kind @ ("preview" | "scanner") => kind,
                _ => "bot",
            };
            (format!("{kind} {plain}"), event.agent.as_deref())
        }
        "network" => (plain.to_owned(), network),
        _ => (plain.to_owned(), None),
    };
    match detail {
        Some(detail) => format!("{said} ({detail})"),
        None => said,
    }
}

/// Who fetched, in a few words: the agent table's label, else the browser on its system.
pub fn client(event: &FeedEvent) -> String {
    if let Some(label) = &event.agent {
        return label.clone();
    }
    let browser = event.browser.as_deref().unwrap_or("unknown browser");
    match &event.os {
        Some(os) => format!("{browser} on {os}"),
        None => browser.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_words() {
        let codes: Vec<&str> = Reasons::NAMES.iter().map(|(_, name)| *name).collect();
        let worded: Vec<&str> = WORDS.iter().map(|(code, _)| *code).collect();
        assert_eq!(codes, worded);
    }

    #[test]
    fn a_key_reads_back_as_written() {
        let key = VisitKey {
            at: DateTime::from_timestamp_micros(1_764_000_000_123_456).unwrap(),
            event_id: "1764000000123-0_x".into(),
        };
        assert_eq!(key.to_string().parse::<VisitKey>(), Ok(key));
        for bad in ["", "12", "x_1", "12_", "-99999999999999999999_a"] {
            assert!(bad.parse::<VisitKey>().is_err(), "{bad}");
        }
    }
}

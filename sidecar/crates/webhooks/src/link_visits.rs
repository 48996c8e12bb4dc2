//! One link's stored visits, newest first, as the feed gives each away (its verdict and reasons
//! included): the console's list under a link (issue 78, "shown where operators look… and
//! why"). The rows are the feed's ([`FeedRow`], the same columns and the same conversion into
//! a [`FeedEvent`]), read by link and time instead of by feed position.

use super::cursor::Cursor;
use super::event::{FeedEvent, Privacy};
use super::row::FeedRow;
use super::store::WebhookStore;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use std::fmt;
use std::str::FromStr;

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

impl FromStr for VisitKey {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (micros, event_id) = text.split_once('_').ok_or(())?;
        let at = DateTime::from_timestamp_micros(micros.parse().map_err(|_| ())?).ok_or(())?;
        if event_id.is_empty() || event_id.len() > 128 {
            return Err(());
        }
        Ok(VisitKey {
            at,
            event_id: event_id.to_owned(),
        })
    }
}

/// One visit of the list: its event, and the network's name the visit store kept (the ISP or
/// autonomous system's organization; said beside a hosting network's reason).
#[derive(Debug, Clone)]
pub struct LinkVisit {
    pub event: FeedEvent,
    pub network: Option<String>,
}

/// A page of a link's visits.
#[derive(Debug, Clone, Default)]
pub struct LinkVisits {
    pub visits: Vec<LinkVisit>,
    /// Where the next (older) page starts; `None` after the oldest.
    pub next: Option<VisitKey>,
}

/// Up to `limit` visits of `workspace`'s link `code` older than `before`, newest first.
pub(crate) async fn read(
    store: &dyn WebhookStore,
    privacy: Privacy,
    workspace: WorkspaceId,
    code: &str,
    before: Option<&VisitKey>,
    limit: u32,
) -> StorageResult<LinkVisits> {
    // One more than shown says whether an older page exists.
    let mut rows = store
        .link_visits(workspace, code, before, limit + 1)
        .await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = more.then(|| rows.last().map(VisitKey::of)).flatten();
    let visits = rows
        .into_iter()
        .map(|mut row| LinkVisit {
            network: row.isp.take(),
            // Not read from the feed: no feed position to resume from.
            event: FeedEvent::new(row, Cursor::default(), privacy),
        })
        .collect();
    Ok(LinkVisits { visits, next })
}

#[cfg(test)]
mod tests {
    use super::*;

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

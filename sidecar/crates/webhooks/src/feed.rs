//! The visit feed: every stored visit once, in the order the transactions storing them committed,
//! with a cursor to resume from. Written by the visit stores, one row in each visit write
//! transaction (`visits-sql/src/feed.rs`); read by [`FeedReader`] for `GET /api/v1/visits` and the
//! webhook deliverers.

use super::cursor::Cursor;
use super::event::{Event, FeedEvent, LinkEventView, Privacy, StoredLinkEvent};
pub use super::filter::FeedFilter;
use super::row::FeedRow;
use super::store::FeedBatch;
use super::store::Stores;
use shortlink_store::{StorageResult, LINK_EVENT_PREFIX};
use shortlink_visits::conversions::store::is_conversion_id;
use shortlink_visits::conversions::Conversion;
use shortlink_visits::hindsight::parse_reclassified_id;
use std::collections::HashMap;
use std::sync::Arc;

/// What one read found.
#[derive(Debug, Default)]
pub struct Page {
    pub events: Vec<Event>,
    /// Where the next read starts: after the last event, or after every row looked at when the
    /// filter left them out.
    pub next: Cursor,
}

/// Feed rows read at a time.
const ROWS_PER_READ: u32 = 8;

/// Visits looked at by one read at most, matching or not: a narrow filter over a long stretch
/// of the feed answers in steps, each with a cursor further on.
const SCAN_LIMIT: usize = 50_000;

/// Reads the feed. Keeps the rows it read last: a deliverer sending one event per POST reads
/// the same row (up to 16,000 ids) many times over.
pub struct FeedReader {
    stores: Stores,
    privacy: Privacy,
    rows: Vec<Arc<FeedBatch>>,
}

impl FeedReader {
    pub fn new(stores: Stores, privacy: Privacy) -> Self {
        Self {
            stores,
            privacy,
            rows: Vec::new(),
        }
    }

    /// The first row from `seq` on. The kept rows answer while they reach `seq`: rows commit in
    /// seq order, so none can appear between two rows already seen.
    async fn row_from(&mut self, seq: i64) -> StorageResult<Option<Arc<FeedBatch>>> {
        if self.rows.last().is_none_or(|last| last.seq < seq) {
            let rows = self
                .stores
                .webhooks
                .feed_batches(seq, ROWS_PER_READ)
                .await?;
            self.rows = rows.into_iter().map(Arc::new).collect();
        }
        Ok(self.rows.iter().find(|row| row.seq >= seq).cloned())
    }

    /// Up to `limit` events after `from` that `filter` admits.
    pub async fn read(
        &mut self,
        from: Cursor,
        filter: &FeedFilter,
        limit: usize,
    ) -> StorageResult<Page> {
        let mut page = Page {
            next: from,
            ..Page::default()
        };
        let mut scanned = 0;
        while page.events.len() < limit && scanned < SCAN_LIMIT {
            let Some(row) = self.row_from(page.next.seq).await? else {
                break;
            };
            if row.seq > page.next.seq {
                // The rows before it were pruned (retention).
                page.next = Cursor::after_row(row.seq - 1);
            }
            let len = row.event_ids.len();
            let start = usize::try_from(page.next.index).map_or(len, |i| i.min(len));
            let end = len.min(start + (limit - page.events.len()).clamp(100, 1000));
            scanned += end - start;
            self.collect(&row, start..end, filter, limit, &mut page)
                .await?;
            if page.next.index >= len as i64 {
                page.next = Cursor::after_row(row.seq);
            }
        }
        Ok(page)
    }

    /// The tags of a conversion's link as the link holds them now (a conversion keeps no copy:
    /// a subscription to a tag hears of the link's conversions as of its clicks).
    async fn tags_of(&self, code: &str) -> StorageResult<Vec<String>> {
        let rows = self.stores.webhooks.link_tags(code).await?;
        Ok(rows
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default())
    }

    /// What `ids` (of `row`) name: visits (a reclassification's as stored now), conversions
    /// and, if the subscription takes them, link events.
    async fn fetch(
        &self,
        row: &FeedBatch,
        ids: &[String],
        filter: &FeedFilter,
    ) -> StorageResult<Fetched> {
        let (link_ids, ids_else): (Vec<String>, Vec<String>) = ids
            .iter()
            .cloned()
            .partition(|id| id.starts_with(LINK_EVENT_PREFIX));
        let (conversion_ids, visit_ids): (Vec<String>, Vec<String>) =
            ids_else.into_iter().partition(|id| is_conversion_id(id));
        let visit_ids: Vec<String> = (visit_ids.into_iter())
            .map(|id| match parse_reclassified_id(&id) {
                Some((_, visit_id)) => visit_id.to_owned(),
                None => id,
            })
            .collect();
        let found = (self.stores.webhooks)
            .feed_rows(&visit_ids, row.visits_within)
            .await?
            .into_iter()
            .map(|r| (r.event_id.clone(), r))
            .collect();
        let conversions = match conversion_ids.is_empty() {
            true => HashMap::new(),
            false => (self.stores.visits.conversions())
                .conversions(&conversion_ids)
                .await?
                .into_iter()
                .map(|c| (c.id.clone(), c))
                .collect(),
        };
        let links = match link_ids.is_empty() || !filter.link_events {
            true => HashMap::new(),
            false => (self.stores.webhooks.link_events(&link_ids).await?)
                .into_iter()
                .map(|e| (e.event.id.clone(), e))
                .collect(),
        };
        Ok(Fetched {
            found,
            conversions,
            links,
        })
    }

    /// Adds the admitted events of `row`'s ids in `range` to `page`, up to `limit`, and moves
    /// its cursor past what it looked at.
    async fn collect(
        &self,
        row: &FeedBatch,
        range: std::ops::Range<usize>,
        filter: &FeedFilter,
        limit: usize,
        page: &mut Page,
    ) -> StorageResult<()> {
        let ids = &row.event_ids[range.clone()];
        let Fetched {
            mut found,
            mut conversions,
            mut links,
        } = self.fetch(row, ids, filter).await?;
        for (index, id) in range.zip(ids) {
            let after = Cursor {
                seq: row.seq,
                index: index as i64 + 1,
            };
            page.next = after;
            if let Some(link) = links.remove(id) {
                // Told to the link's own workspace only; a subscription chose them or not.
                if filter.owns(Some(link.event.workspace)) {
                    page.events
                        .push(Event::Link(LinkEventView::new(link, after)));
                    if page.events.len() >= limit {
                        break;
                    }
                }
                continue;
            }
            if let Some(conversion) = conversions.remove(id) {
                if !filter.owns(Some(conversion.workspace)) {
                    continue;
                }
                let tags = self.tags_of(&conversion.code).await?;
                let event = FeedEvent::conversion(conversion, tags, after);
                if filter.admits(&event) {
                    page.events.push(Event::Visit(Box::new(event)));
                    if page.events.len() >= limit {
                        break;
                    }
                }
                continue;
            }
            let reclassified = parse_reclassified_id(id);
            let visit_id = reclassified.map_or(id.as_str(), |(_, visit_id)| visit_id);
            // A click's row is taken; a reclassification's is copied, as one batch may hold
            // two changes of one visit (corrections change visits of earlier batches only, so
            // never a click of the same row).
            let visit = match reclassified {
                Some(_) => found.get(visit_id).cloned(),
                None => found.remove(visit_id),
            };
            // Gone: removed by the retention job.
            let Some(visit) = visit else {
                continue;
            };
            // Another workspace's visits are not there for this reader (issue 53).
            if !filter.owns(visit.workspace) {
                continue;
            }
            let privacy = self.privacy;
            let event = match reclassified {
                Some((from, _)) => FeedEvent::reclassified(id, from, visit, after, privacy),
                None => FeedEvent::new(visit, after, privacy),
            };
            if filter.admits(&event) {
                page.events.push(Event::Visit(Box::new(event)));
                if page.events.len() >= limit {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// The stored events a batch's ids name, by id.
struct Fetched {
    found: HashMap<String, FeedRow>,
    conversions: HashMap<String, Conversion>,
    links: HashMap<String, StoredLinkEvent>,
}

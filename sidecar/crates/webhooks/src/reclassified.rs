//! A visit's reclassification as the feed and the webhooks give it away (issue 78, docs/BOTS.md):
//! hindsight found, after the click's event went out, that the visit was not what the click was
//! judged (a sweep seen once it had happened, a click within seconds of its message's delivery,
//! a fast tapper confirmed a person). The store writes one feed id per change
//! (`shortlink_visits::hindsight::reclassified_id`), in the transaction that changes the
//! visit and moves its counts, so a receiver hears of each change once, after the click.
//!
//! Who hears of it: a subscription that takes every visit (`include_bots`) hears of every
//! change; a people-only one (the default) of a change into or out of people — exactly the
//! changes to what it was told — and of no change between machines, which it never heard of.

use super::cursor::Cursor;
use super::event::{FeedEvent, Privacy, Reclassification};
use super::row::FeedRow;
use shortlink_wire::agent::Audience;

impl FeedEvent {
    /// The event of feed id `id`: `row`'s visit reclassified from `from`.
    pub fn reclassified(
        id: &str,
        from: Audience,
        row: FeedRow,
        cursor: Cursor,
        privacy: Privacy,
    ) -> Self {
        let mut event = FeedEvent::new(row, cursor, privacy);
        event.reclassification = Some(Reclassification {
            visit_id: std::mem::replace(&mut event.id, id.to_owned()),
            from: from.as_str().to_owned(),
            to: event.audience.clone(),
        });
        event.kind = "reclassified";
        event
    }

    /// Whether a people-only reader hears of this event: a person's click or conversion, or a
    /// reclassification into or out of people.
    pub(crate) fn concerns_people(&self) -> bool {
        const HUMAN: &str = "human";
        self.audience == HUMAN
            || (self.reclassification.as_ref()).is_some_and(|change| change.from == HUMAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::FeedFilter;
    use shortlink_model::WorkspaceId;

    fn event(audience: &str, from: Option<Audience>) -> FeedEvent {
        let row = FeedRow {
            event_id: "1700000000000-0".into(),
            audience: audience.into(),
            ..FeedRow::default()
        };
        let (cursor, privacy) = (Cursor::default(), Privacy::default());
        match from {
            Some(from) => {
                let id = format!("rc_{}_1700000000000-0", from.as_str());
                FeedEvent::reclassified(&id, from, row, cursor, privacy)
            }
            None => FeedEvent::new(row, cursor, privacy),
        }
    }

    #[test]
    fn a_people_only_subscription_hears_of_changes_to_what_it_was_told() {
        let people = FeedFilter::of(WorkspaceId::DEFAULT);
        let mut everyone = FeedFilter::of(WorkspaceId::DEFAULT);
        everyone.include_bots = true;
        let cases = [
            // (event, a people-only subscription hears of it)
            (event("human", None), true),
            (event("scanner", None), false),
            // It heard of the click as a person's: it hears that it no longer is one.
            (event("scanner", Some(Audience::Human)), true),
            // It never heard of the click: now a person's (confirmed), it hears of it.
            (event("human", Some(Audience::Scanner)), true),
            // Between machines: nothing it was told changes.
            (event("scanner", Some(Audience::Preview)), false),
        ];
        for (event, heard) in cases {
            assert_eq!(people.admits(&event), heard, "{event:?}");
            assert!(everyone.admits(&event), "{event:?}");
        }
        let change = event("scanner", Some(Audience::Human));
        assert_eq!(change.kind, "reclassified");
        assert_eq!(change.id, "rc_human_1700000000000-0");
        let detail = change.reclassification.unwrap();
        assert_eq!(
            (
                detail.visit_id.as_str(),
                detail.from.as_str(),
                detail.to.as_str()
            ),
            ("1700000000000-0", "human", "scanner")
        );
    }
}

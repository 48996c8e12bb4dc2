//! Hindsight in SQL (issue 78): what the backends share to apply a batch's [`Correction`]s
//! inside its transaction, and reading the facts hindsight judges by
//! ([`VisitStore::link_facts`]).
//!
//! A correction changes its stored visit only if the visit still has the verdict the correction
//! starts from (`... AND audience = <before>`): the statement that changes it is the one that
//! moves its counts, so a correction met twice (a retried batch, a redelivered one, a second
//! consumer's) moves them once. A batch's corrections go in a few statements, not one or two
//! per corrected visit (bench/results/system-cost-reclassified-2026-11-29-2.md: those round
//! trips were a fifth of the consumer's CPU with 8% of visits corrected): each backend applies
//! a [`round`] of them at once, the visits' keys bound as arrays (PostgreSQL,
//! `postgres/corrections.rs`), locked and then changed per verdict transition (MariaDB/MySQL,
//! `mysql/corrections.rs`), or stepped through the connection's own handle, where a statement
//! costs no hand-off (SQLite, `sqlite/raw.rs`).
//!
//! [`VisitStore::link_facts`]: shortlink_visits::store::VisitStore::link_facts

use crate::sql::{db, fetch_all, marks, SqlVisitStore, VisitDialect};
use foldhash::HashSet;
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::StorageResult;
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_visits::hindsight::{Correction, LinkFacts, Reach};
use shortlink_visits::rollup::Folding;
use std::collections::HashMap;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// A correction its statement applied; `first_visit`: the visitor set lost the visitor whose
/// first visit as a person's it was.
pub(crate) struct Applied<'c> {
    pub(crate) correction: &'c Correction,
    pub(crate) first_visit: bool,
}

/// `corrections` split in rounds, in order, each naming a stored visit once: a round is applied
/// at once, and a visit corrected twice in a batch (rare) has its second correction judged
/// against what its first left, as one statement after the other would.
pub(crate) fn rounds(corrections: &[Correction]) -> Vec<Vec<&Correction>> {
    let mut rounds: Vec<Vec<&Correction>> = Vec::new();
    let mut seen: Vec<HashSet<&str>> = Vec::new();
    for correction in corrections {
        let id = correction.before.event_id.as_str();
        let round = seen
            .iter()
            .position(|ids| !ids.contains(id))
            .unwrap_or(seen.len());
        if round == seen.len() {
            seen.push(HashSet::default());
            rounds.push(Vec::new());
        }
        seen[round].insert(id);
        rounds[round].push(correction);
    }
    rounds
}

/// `corrections` in the order of their visits' primary key (the event id), each visit's own
/// corrections still in theirs (a stable sort): stepped one by one (SQLite), the visits are
/// then found left to right in the key's B-tree, each search going down pages the last one
/// warmed, not at random across the leaves of the last seconds.
pub(crate) fn in_key_order(corrections: &[Correction]) -> Vec<&Correction> {
    let mut sorted: Vec<&Correction> = corrections.iter().collect();
    sorted.sort_by(|a, b| a.before.event_id.cmp(&b.before.event_id));
    sorted
}

/// Whether applying `correction` takes its visit out of people: then its visitor leaves the
/// link's visitor set if this visit was its first (a machine's visit makes no visitor; a later
/// visit of a person's makes it anew).
pub(crate) fn leaves_people(correction: &Correction) -> bool {
    correction.before.agent.audience == Audience::Human
        && correction.after.agent.audience != Audience::Human
}

/// The stored visits the applied corrections changed, as they were: the feed tells receivers
/// of each change (`crate::feed::append`).
pub(crate) fn reclassified<'c>(applied: &[Applied<'c>]) -> Vec<&'c Visit> {
    applied.iter().map(|a| &a.correction.before).collect()
}

/// Folds the applied corrections into the batch's deltas (written with its own rows).
pub(crate) fn fold<'c>(d: &mut Folding<'c>, applied: &[Applied<'c>]) {
    for a in applied {
        d.reclassify(a.correction, a.first_visit);
    }
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// [`VisitStore::link_facts`](shortlink_visits::store::VisitStore::link_facts): the
    /// campaigns and workspaces of `codes`, then their messages' hand-offs and receipts (indexed by workspace
    /// and code).
    pub(crate) async fn facts_of(&self, codes: &[&str]) -> StorageResult<LinkFacts> {
        let mut facts = LinkFacts::default();
        let mut workspaces: Vec<i64> = Vec::new();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT l.code, l.workspace_id, w.slug, l.campaign FROM links l \
                     JOIN workspaces w ON w.id = l.workspace_id WHERE l.code IN ({})",
                    marks(chunk.len())
                ),
                chunk.iter().map(|code| Value::Text((*code).to_owned())),
            );
            for row in fetch_all::<V>(&self.reader, query).await? {
                let code = V::Sql::read_text(&row, "code")?;
                workspaces.push(Db::<V>::int(&row, "workspace_id").map_err(db)?);
                let slug = V::Sql::read_text(&row, "slug")?;
                facts.workspaces.insert(code.clone(), slug);
                if let Some(campaign) = V::Sql::read_opt_text(&row, "campaign")? {
                    facts.campaigns.insert(code, campaign);
                }
            }
        }
        workspaces.sort_unstable();
        workspaces.dedup();
        if workspaces.is_empty() {
            return Ok(facts);
        }
        let mut messages: HashMap<(String, String), Reach> = HashMap::new();
        for chunk in codes.chunks(IN_LIST) {
            self.reaches(&workspaces, chunk, &mut messages).await?;
        }
        for ((code, _), reach) in messages {
            facts.reached.entry(code).or_default().push(reach);
        }
        Ok(facts)
    }

    /// Adds the hand-offs and receipts of `codes`' messages to `messages`.
    async fn reaches(
        &self,
        workspaces: &[i64],
        codes: &[&str],
        messages: &mut HashMap<(String, String), Reach>,
    ) -> StorageResult<()> {
        let values = || {
            (workspaces.iter().map(|w| Value::Int(*w)))
                .chain(codes.iter().map(|code| Value::Text((*code).to_owned())))
        };
        let within = format!(
            "workspace_id IN ({}) AND code IN ({})",
            marks(workspaces.len()),
            marks(codes.len())
        );
        let receipts = statement(
            &format!(
                "SELECT code, message_id, state, at_ms FROM delivery_receipts \
                 WHERE {within} AND state IN ('submitted', 'delivered')"
            ),
            values(),
        );
        let sends = statement(
            &format!(
                "SELECT code, message_id, 'submitted' AS state, at_ms FROM gateway_sends \
                 WHERE {within} AND outcome = 'accepted'"
            ),
            values(),
        );
        for query in [receipts, sends] {
            for row in fetch_all::<V>(&self.reader, query).await? {
                let key = (
                    V::Sql::read_text(&row, "code")?,
                    V::Sql::read_text(&row, "message_id")?,
                );
                let at = Db::<V>::int(&row, "at_ms").map_err(db)?;
                let reach = messages.entry(key).or_default();
                match V::Sql::read_text(&row, "state")?.as_str() {
                    "delivered" => reach.delivered_ms = Some(at),
                    _ => {
                        let first = reach.handed_off_ms.map_or(at, |h| h.min(at));
                        reach.handed_off_ms = Some(first);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    use shortlink_visits::hindsight::Verdict;
    use shortlink_wire::verdict::Reasons;

    fn correction(id: &str, reasons: u16) -> Correction {
        let fields = [("c", "abc".to_owned()), ("t", "1700000000000".to_owned())];
        let event = VisitEvent::from_fields(id, fields).unwrap();
        let before = Enricher::new(GeoDb::disabled(), false).enrich(&event);
        let mut after = Verdict::of(&before);
        after.reasons = Reasons(reasons);
        Correction { before, after }
    }

    #[test]
    fn corrections_go_in_key_order_each_visits_own_in_theirs() {
        let batch = [
            correction("1700000000002-0", 1),
            correction("1700000000001-5", 1),
            correction("1700000000002-0", 2),
            correction("1700000000001-0", 1),
        ];
        let order: Vec<(&str, u16)> = (in_key_order(&batch).iter())
            .map(|c| (c.before.event_id.as_str(), c.after.reasons.0))
            .collect();
        assert_eq!(
            order,
            [
                ("1700000000001-0", 1),
                ("1700000000001-5", 1),
                ("1700000000002-0", 1),
                ("1700000000002-0", 2)
            ]
        );
    }
}

//! Hindsight in SQL (issue 78): applying a batch's [`Correction`]s inside its transaction, and
//! reading the facts hindsight judges by ([`VisitStore::link_facts`]).
//!
//! A correction changes its stored visit only if the visit still has the verdict the correction
//! starts from (`... AND audience = <before>`): the statement that changes it is the one that
//! moves its counts, so a correction met twice (a retried batch, a redelivered one, a second
//! consumer's) moves them once.
//!
//! [`VisitStore::link_facts`]: shortlink_visits::store::VisitStore::link_facts

use crate::sql::{db, fetch_all, marks, SqlVisitStore, VisitDialect};
use chrono::DateTime;
use shortlink_store::sql::{statement, Dialect, Driver, Value, IN_LIST};
use shortlink_store::{Backend, StorageResult};
use shortlink_visit_enrich::{Audience, Visit};
use shortlink_visits::hindsight::{Correction, LinkFacts, Reach};
use shortlink_visits::rollup::Deltas;
use sqlx::Database;
use std::collections::HashMap;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// A correction its statement applied; `first_visit`: the visitor set lost the visitor whose
/// first visit as a person's it was.
pub(crate) struct Applied<'c> {
    correction: &'c Correction,
    first_visit: bool,
}

/// Applies `corrections` to the stored visits on `connection` (the batch's transaction);
/// answers those that changed a visit.
pub(crate) async fn apply<'c, V: VisitDialect>(
    connection: &mut <Db<V> as Database>::Connection,
    corrections: &'c [Correction],
) -> StorageResult<Vec<Applied<'c>>> {
    let mut applied = Vec::new();
    for correction in corrections {
        let (before, after) = (&correction.before, &correction.after);
        let Some(at) = DateTime::from_timestamp_millis(before.time_ms) else {
            continue;
        };
        let update = statement(
            "UPDATE visits SET audience = ?, device = ?, reasons = ? \
             WHERE event_id = ? AND visited_at = ? AND audience = ?",
            [
                Value::Text(after.agent.audience.as_str().into()),
                Value::Text(after.agent.device.as_str().into()),
                Value::Int(i64::from(after.reasons.0)),
                Value::Text(before.event_id.clone()),
                V::visit_time(at),
                Value::Text(before.agent.audience.as_str().into()),
            ],
        );
        if Db::<V>::execute(connection, update).await.map_err(db)? == 0 {
            continue;
        }
        let first_visit = before.agent.audience == Audience::Human
            && after.agent.audience != Audience::Human
            && forget_visitor::<V>(connection, before).await?;
        applied.push(Applied {
            correction,
            first_visit,
        });
    }
    Ok(applied)
}

/// Takes `visit`'s visitor out of its link's visitor set if this visit was its first: a
/// machine's visit makes no visitor (a later visit of a person's makes it anew).
async fn forget_visitor<V: VisitDialect>(
    connection: &mut <Db<V> as Database>::Connection,
    visit: &Visit,
) -> StorageResult<bool> {
    let Some(at) = DateTime::from_timestamp_millis(visit.time_ms) else {
        return Ok(false);
    };
    // The shared statements carry no bytes: the visitor goes as hex text, decoded by the
    // database, so that the statement's text is one for every correction. Written out as a
    // literal, each correction's was a statement of its own, prepared and cached by sqlx, and a
    // batch's thousands of them evicted the batch's own prepared statements from the cache.
    let hex: String = visit.visitor.iter().map(|b| format!("{b:02x}")).collect();
    let visitor = match V::Sql::BACKEND {
        Backend::Postgres => "decode(?, 'hex')",
        Backend::Sqlite => "unhex(?)",
        Backend::Mysql => "UNHEX(?)",
    };
    let delete = statement(
        &format!(
            "DELETE FROM link_visitors WHERE code = ? AND visitor = {visitor} AND first_seen = ?"
        ),
        [
            Value::Text(visit.code.clone()),
            Value::Text(hex),
            V::visit_time(at),
        ],
    );
    Ok(Db::<V>::execute(connection, delete).await.map_err(db)? > 0)
}

/// The stored visits the applied corrections changed, as they were: the feed tells receivers
/// of each change (`crate::feed::append`).
pub(crate) fn reclassified<'c>(applied: &[Applied<'c>]) -> Vec<&'c Visit> {
    applied.iter().map(|a| &a.correction.before).collect()
}

/// Folds the applied corrections into the batch's deltas (written with its own rows).
pub(crate) fn fold<'c>(d: &mut Deltas<'c>, applied: &[Applied<'c>], count_bots: bool) {
    for a in applied {
        d.reclassify(a.correction, a.first_visit, count_bots);
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

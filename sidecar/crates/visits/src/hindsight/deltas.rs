//! What a [`Correction`] changes in a batch's rollup deltas: its visit counted once less as it
//! was stored and once more as it is now, in every table a visit counts in.

use super::model::Correction;
use crate::rollup::{text, unknown, Audiences, Counts, Folding, Interval};
use shortlink_visit_enrich::{AgentFacts, Audience};

impl<'a> Folding<'a> {
    /// Moves a stored visit from `correction.before` to `correction.after`. `first_visit`: the
    /// store took the visitor out of the link's visitor set (the visit was its first as a
    /// person's, and is a machine's now), so the new visitor it credited is taken back too.
    ///
    /// The two are one visit with two verdicts, so every row but the agents' is the same for
    /// both: each is looked up once, and its counts moved from one audience to the other; and
    /// only the link's own rows, whose sums [`Folding::finish`] adds to all links.
    pub fn reclassify(&mut self, correction: &'a Correction, first_visit: bool) {
        let (v, after) = (&correction.before, &correction.after);
        let (was, now) = (v.agent.audience, after.agent.audience);
        let seconds = v.time_ms.div_euclid(1000);
        let day = Interval::Day.floor(seconds);
        let code = v.code.as_str();
        let taken_back = -i64::from(first_visit);
        for span in [Interval::Hour, Interval::Day] {
            let key = (code, span.seconds(), span.floor(seconds));
            let counts = self.buckets.entry(key).or_default();
            add(counts, was, -1);
            add(counts, now, 1);
            counts.new_visitors += taken_back;
        }
        let agent = |a: &'a AgentFacts| {
            let label = a.agent_label.unwrap_or(unknown());
            (
                code,
                day,
                text(&a.browser),
                text(&a.os),
                a.device.as_str(),
                label,
            )
        };
        (self.agents.entry(agent(&v.agent)).or_default()).add_n(was, -1);
        (self.agents.entry(agent(&after.agent)).or_default()).add_n(now, 1);
        let place = (code, day, text(&v.country), text(&v.region), text(&v.city));
        move_one(self.places.entry(place).or_default(), was, now);
        let source = (code, day, text(&v.referrer_host), text(&v.short_domain));
        move_one(self.sources.entry(source).or_default(), was, now);
        if let Some(domain) = &v.short_domain {
            let minute = seconds - seconds.rem_euclid(60);
            move_one(
                self.domain_minutes.entry((minute, domain)).or_default(),
                was,
                now,
            );
        }
        let person = |audience| i64::from(audience == Audience::Human);
        if was == Audience::Human || now == Audience::Human || first_visit {
            let rule = v.rule.as_deref().unwrap_or(unknown());
            let arm = self.arms.entry((code, rule)).or_default();
            arm.humans += person(now) - person(was);
            arm.visitors += taken_back;
        }
        let count_bots = self.count_bots;
        let counted = |audience| i64::from(count_bots || audience == Audience::Human);
        if counted(was) + counted(now) > 0 {
            let link = self.links.entry(code).or_insert((0, i64::MIN));
            link.0 += counted(now) - counted(was);
            link.1 = link.1.max(v.time_ms);
        }
    }
}

/// One visit of `counts` moved from audience `was` to `now`.
fn move_one(counts: &mut Audiences, was: Audience, now: Audience) {
    counts.add_n(was, -1);
    counts.add_n(now, 1);
}

fn add(counts: &mut Counts, audience: Audience, n: i64) {
    let mut one = Counts::default();
    one.count(audience, false);
    for (total, unit) in [
        (&mut counts.humans, one.humans),
        (&mut counts.bots, one.bots),
        (&mut counts.previews, one.previews),
        (&mut counts.scanners, one.scanners),
    ] {
        *total += unit * n;
    }
}

//! What a [`Correction`] changes in a batch's rollup deltas: its visit counted once less as it
//! was stored and once more as it is now, in every table a visit counts in.

use super::model::Correction;
use crate::rollup::{Counts, Deltas, Interval};
use shortlink_visit_enrich::{Audience, Visit};

impl<'a> Deltas<'a> {
    /// Moves a stored visit from `correction.before` to `correction.after`. `first_visit`: the
    /// store took the visitor out of the link's visitor set (the visit was its first as a
    /// person's, and is a machine's now), so the new visitor it credited is taken back too.
    pub fn reclassify(&mut self, correction: &'a Correction, first_visit: bool, count_bots: bool) {
        self.count(&correction.before, -1, count_bots);
        self.count(&correction.after, 1, count_bots);
        if first_visit {
            let v = &correction.before;
            let rule = v.rule.as_deref().unwrap_or_default();
            self.arms.entry((&v.code, rule)).or_default().visitors -= 1;
            let seconds = v.time_ms.div_euclid(1000);
            for span in [Interval::Hour, Interval::Day] {
                for code in [v.code.as_str(), self.all_links.key(&v.code)] {
                    let key = (code, span.seconds(), span.floor(seconds));
                    self.buckets.entry(key).or_default().new_visitors -= 1;
                }
            }
        }
    }

    /// Adds `n` (1 or -1) visits like `visit` to every table, as [`crate::rollup::fold`]
    /// counts one.
    fn count(&mut self, visit: &'a Visit, n: i64, count_bots: bool) {
        let audience = visit.agent.audience;
        let seconds = visit.time_ms.div_euclid(1000);
        let day = Interval::Day.floor(seconds);
        let code = visit.code.as_str();
        let text = |value: &'a Option<String>| value.as_deref().unwrap_or_default();
        for code in [code, self.all_links.key(code)] {
            for span in [Interval::Hour, Interval::Day] {
                let key = (code, span.seconds(), span.floor(seconds));
                add(self.buckets.entry(key).or_default(), audience, n);
            }
            let agent = (
                code,
                day,
                text(&visit.agent.browser),
                text(&visit.agent.os),
                visit.agent.device.as_str(),
                visit.agent.agent_label.unwrap_or_default(),
            );
            self.agents.entry(agent).or_default().add_n(audience, n);
            let place = (
                code,
                day,
                text(&visit.country),
                text(&visit.region),
                text(&visit.city),
            );
            self.places.entry(place).or_default().add_n(audience, n);
            let source = (
                code,
                day,
                text(&visit.referrer_host),
                text(&visit.short_domain),
            );
            self.sources.entry(source).or_default().add_n(audience, n);
        }
        if let Some(domain) = &visit.short_domain {
            let minute = seconds - seconds.rem_euclid(60);
            (self.domain_minutes.entry((minute, domain)).or_default()).add_n(audience, n);
        }
        if audience == Audience::Human {
            let rule = visit.rule.as_deref().unwrap_or_default();
            self.arms.entry((code, rule)).or_default().humans += n;
        }
        if count_bots || audience == Audience::Human {
            let link = self.links.entry(code).or_insert((0, i64::MIN));
            link.0 += n;
            link.1 = link.1.max(visit.time_ms);
        }
    }
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

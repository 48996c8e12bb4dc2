use super::*;
use crate::rollup::{fold, AllLinks, Audiences, Folding, NewVisitors};
use shortlink_visit_enrich::{Device, Enricher, GeoDb, VisitEvent};
use std::collections::BTreeMap;

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const T0: i64 = 1_700_000_000_000;

fn visit(id: &str, code: &str, t: i64, ip: &str) -> Visit {
    let fields = [
        ("c", code.to_owned()),
        ("t", t.to_string()),
        ("ip", ip.to_owned()),
        ("ua", CHROME.to_owned()),
        ("host", "go.example".to_owned()),
    ];
    Enricher::new(GeoDb::disabled(), false).enrich(&VisitEvent::from_fields(id, fields).unwrap())
}

fn campaign(codes: &[&str]) -> LinkFacts {
    LinkFacts {
        campaigns: (codes.iter())
            .map(|c| ((*c).to_owned(), "spring".to_owned()))
            .collect(),
        workspaces: (codes.iter())
            .map(|c| ((*c).to_owned(), "brand-a".to_owned()))
            .collect(),
        reached: Default::default(),
    }
}

fn audiences(visits: &[Visit]) -> Vec<Audience> {
    visits.iter().map(|v| v.agent.audience).collect()
}

/// A person's visit to `abc`, the scanner's visit a sweep makes of it, and that correction.
fn swept_person() -> (Visit, Visit, Correction) {
    let person = visit("1-0", "abc", T0, "203.0.113.1");
    let mut scanner = person.clone();
    demote(&mut scanner, Reasons::SWEEP);
    let correction = Correction {
        before: person.clone(),
        after: Verdict::of(&scanner),
    };
    (person, scanner, correction)
}

#[test]
fn a_click_before_a_person_could_tap_is_a_scanner() {
    let reach = Reach {
        handed_off_ms: Some(T0),
        delivered_ms: Some(T0 + 4_000),
    };
    // In flight, just delivered, at the threshold: too soon; before the hand-off (the sender
    // trying the link) and after the threshold: a person's.
    for (at, soon) in [
        (T0 + 1_000, true),
        (T0 + 4_500, true),
        (T0 + 7_000, true),
        (T0 - 1, false),
        (T0 + 7_001, false),
    ] {
        assert_eq!(reach.too_soon(at), soon, "{at}");
    }
    let no_receipt = Reach {
        handed_off_ms: Some(T0),
        delivered_ms: None,
    };
    assert!(no_receipt.too_soon(T0 + 3_000) && !no_receipt.too_soon(T0 + 3_001));
    let mut facts = LinkFacts::default();
    facts.reached.insert("abc".into(), vec![reach]);
    let mut visits = vec![visit("1-0", "abc", T0 + 5_000, "198.51.100.7")];
    let corrections = Hindsight::default().judge(&mut visits, &facts);
    assert!(corrections.is_empty());
    assert_eq!(visits[0].agent.audience, Audience::Scanner);
    assert_eq!(visits[0].reasons.0, Reasons::AFTER_DELIVERY);
}

#[test]
fn a_sweep_demotes_its_earlier_visits_once() {
    let codes = ["a", "b", "c", "d", "e", "f"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let ip = |n: u8| format!("203.0.113.{n}");
    // Four recipients' links from one /24: people, as far as anyone can tell yet.
    let mut first: Vec<Visit> = (0..4)
        .map(|i| {
            visit(
                &format!("1-{i}"),
                codes[i],
                T0 + i as i64 * 100,
                &ip(i as u8),
            )
        })
        .collect();
    assert!(hindsight.judge(&mut first, &facts).is_empty());
    assert_eq!(audiences(&first), [Audience::Human; 4]);
    hindsight.keep(first.clone());
    // The fifth makes it a sweep: the four stored ones are corrected, once.
    let mut second = vec![visit("2-0", "e", T0 + 500, &ip(9))];
    let corrections = hindsight.judge(&mut second, &facts);
    assert_eq!(corrections.len(), 4);
    for (c, stored) in corrections.iter().zip(&first) {
        assert_eq!(c.before, *stored);
        assert_eq!(c.before.agent.audience, Audience::Human);
        assert_eq!(c.after.agent.audience, Audience::Scanner);
        assert_eq!(c.after.reasons.0, Reasons::SWEEP);
    }
    assert_eq!(second[0].agent.audience, Audience::Scanner);
    // The sweep goes on: its next visit is a scanner's at once, and nothing is corrected again.
    let mut third = vec![visit("3-0", "f", T0 + 9_000, &ip(1))];
    assert!(hindsight.judge(&mut third, &facts).is_empty());
    assert_eq!(third[0].agent.audience, Audience::Scanner);
    // Another network, or the same one long after: people.
    let mut later = vec![
        visit("4-0", "a", T0 + 9_100, "192.0.2.1"),
        visit("4-1", "b", T0 + 60_000, &ip(1)),
    ];
    assert!(hindsight.judge(&mut later, &facts).is_empty());
    assert_eq!(audiences(&later), [Audience::Human; 2]);
}

#[test]
fn a_visit_out_of_the_window_counts_toward_no_sweep_and_idle_tracks_expire() {
    let codes = ["a", "b", "c", "d", "e", "f"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let net = |n: u8| format!("203.0.113.{n}");
    let batch = |hindsight: &mut Hindsight, visits: Vec<Visit>| {
        let mut visits = visits;
        let corrections = hindsight.judge(&mut visits, &facts);
        hindsight.keep(visits.clone());
        (visits, corrections)
    };
    // Five links within 10.5 s: the first is out of the window when the fifth comes.
    let (_, none) = batch(&mut hindsight, vec![visit("1-0", "a", T0, &net(1))]);
    assert!(none.is_empty());
    let three: Vec<Visit> = (1..4)
        .map(|i| visit(&format!("2-{i}"), codes[i], T0 + 6_000 + i as i64, &net(1)))
        .collect();
    let (three, none) = batch(&mut hindsight, three);
    assert!(none.is_empty() && audiences(&three) == [Audience::Human; 3]);
    let (fifth, none) = batch(
        &mut hindsight,
        vec![visit("3-0", "e", T0 + 10_500, &net(2))],
    );
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(audiences(&fifth), [Audience::Human]);
    assert_eq!(hindsight.sweeps.tracks(), 1);
    // Idle for a window: its track goes, with the visits it held, at the next batch's judging.
    let elsewhere = visit("4-0", "f", T0 + 21_000, "192.0.2.1");
    let (_, none) = batch(&mut hindsight, vec![elsewhere]);
    assert!(none.is_empty());
    assert_eq!(hindsight.sweeps.tracks(), 1, "only the new network's track");
    let (back, none) = batch(
        &mut hindsight,
        vec![visit("5-0", "f", T0 + 21_100, &net(3))],
    );
    assert!(none.is_empty() && audiences(&back) == [Audience::Human]);
}

#[test]
fn a_sweep_across_a_generation_of_tracks_corrects_the_visits_of_the_window_only() {
    let codes = ["a", "b", "c", "d", "e", "f"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let at = |id: &str, code: &str, t: i64| visit(id, code, t, "203.0.113.7");
    let mut stored = Vec::new();
    for (n, (code, t)) in [("a", T0), ("b", T0 + 5_000), ("c", T0 + 10_000)]
        .iter()
        .enumerate()
    {
        let mut batch = vec![at(&format!("{n}-0"), code, *t)];
        assert!(hindsight.judge(&mut batch, &facts).is_empty());
        stored.push(batch[0].clone());
        hindsight.keep(batch);
    }
    // A window has passed since the first batch: the track is in the older generation now,
    // and `a` is out of the window when the sweep completes.
    let mut last = vec![
        at("3-0", "d", T0 + 12_000),
        at("3-1", "e", T0 + 12_000),
        at("3-2", "f", T0 + 12_001),
    ];
    let corrections = hindsight.judge(&mut last, &facts);
    let corrected: Vec<&str> = (corrections.iter())
        .map(|c| c.before.code.as_str())
        .collect();
    assert_eq!(corrected, ["b", "c"]);
    assert_eq!(corrections[0].before, stored[1]);
    assert_eq!(audiences(&last), [Audience::Scanner; 3]);
}

#[test]
fn a_sweep_corrects_its_own_visits_of_a_batch_that_held_others() {
    let codes = ["a", "b", "c", "d", "e"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let scanner = "203.0.113.7";
    let mut mixed = vec![
        visit("1-0", "no-campaign", T0, scanner),
        visit("1-1", "a", T0 + 1, scanner),
        visit("1-2", "a", T0 + 2, "192.0.2.1"),
        visit("1-3", "b", T0 + 3, scanner),
        visit("1-4", "b", T0 + 4, "198.51.100.1"),
    ];
    assert!(hindsight.judge(&mut mixed, &facts).is_empty());
    hindsight.keep(mixed.clone());
    let mut rest: Vec<Visit> = (2..5)
        .map(|i| visit(&format!("2-{i}"), codes[i], T0 + 100, scanner))
        .collect();
    let corrections = hindsight.judge(&mut rest, &facts);
    let before: Vec<&Visit> = corrections.iter().map(|c| &c.before).collect();
    assert_eq!(before, [&mixed[1], &mixed[3]]);
}

#[test]
fn a_batch_judged_but_never_kept_is_never_corrected() {
    let codes = ["a", "b", "c", "d", "e"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let mut four: Vec<Visit> = (0..4)
        .map(|i| visit(&format!("1-{i}"), codes[i], T0 + i as i64, "203.0.113.5"))
        .collect();
    assert!(hindsight.judge(&mut four, &facts).is_empty());
    // Its store gave up: the next batch's indices name other visits, none of the four.
    let mut fifth = vec![visit("2-0", "e", T0 + 10, "203.0.113.6")];
    assert!(hindsight.judge(&mut fifth, &facts).is_empty());
    assert_eq!(audiences(&fifth), [Audience::Scanner]);
}

#[test]
fn a_sweep_within_one_batch_needs_no_correction() {
    let codes = ["a", "b", "c", "d", "e"];
    let mut visits: Vec<Visit> = (0..5)
        .map(|i| visit(&format!("1-{i}"), codes[i], T0 + i as i64, "203.0.113.5"))
        .collect();
    let corrections = Hindsight::default().judge(&mut visits, &campaign(&codes));
    assert!(corrections.is_empty());
    assert_eq!(audiences(&visits), [Audience::Scanner; 5]);
    // Four links, or links of no campaign, make no sweep.
    let mut four = visits[..4].to_vec();
    for v in &mut four {
        *v = visit(&v.event_id, &v.code, v.time_ms, "203.0.113.5");
    }
    assert!(Hindsight::default()
        .judge(&mut four, &campaign(&codes))
        .is_empty());
    assert_eq!(audiences(&four), [Audience::Human; 4]);
}

#[test]
fn a_sweep_is_published_for_its_workspace_network_and_agent_not_per_visit() {
    use shortlink_wire::sweeps::{agent_key, Network, FLAG_MS};
    let codes = ["a", "b", "c", "d", "e", "f", "g"];
    let facts = campaign(&codes);
    let mut hindsight = Hindsight::default();
    let mut visits: Vec<Visit> = (0..4)
        .map(|i| visit(&format!("1-{i}"), codes[i], T0 + i as i64, "203.0.113.5"))
        .collect();
    hindsight.judge(&mut visits, &facts);
    assert!(
        hindsight.take_noticed().is_empty(),
        "four visits: no sweep yet"
    );
    let mut fifth = vec![visit("2-0", "e", T0 + 10, "203.0.113.6")];
    hindsight.judge(&mut fifth, &facts);
    let noticed = hindsight.take_noticed();
    assert_eq!(noticed.len(), 1);
    let (flag, until) = noticed[0];
    assert_eq!(flag.workspace.as_str(), "brand-a");
    assert_eq!(flag.network, Network::of("203.0.113.0".parse().unwrap()));
    assert_eq!(flag.agent, agent_key(CHROME.as_bytes()));
    assert_eq!(until, T0 + 10 + FLAG_MS);
    // Its next visits extend the flag only once they add a quarter of it.
    let mut sixth = vec![visit("3-0", "f", T0 + 5_000, "203.0.113.7")];
    hindsight.judge(&mut sixth, &facts);
    assert!(hindsight.take_noticed().is_empty());
    let mut more = vec![visit("4-0", "g", T0 + 10_000, "203.0.113.8")];
    hindsight.judge(&mut more, &facts);
    assert!(hindsight.take_noticed().is_empty());
    let mut later = vec![visit("5-0", "a", T0 + 10 + FLAG_MS / 4, "203.0.113.9")];
    hindsight.judge(&mut later, &facts);
    assert_eq!(hindsight.take_noticed().len(), 1);
}

#[test]
fn two_workspaces_campaigns_of_one_name_are_two_campaigns() {
    let codes = ["a", "b", "c", "d", "e"];
    let mut facts = campaign(&codes);
    for code in ["d", "e"] {
        facts
            .workspaces
            .insert(code.to_owned(), "brand-b".to_owned());
    }
    let mut visits: Vec<Visit> = (0..5)
        .map(|i| visit(&format!("1-{i}"), codes[i], T0 + i as i64, "203.0.113.5"))
        .collect();
    let mut hindsight = Hindsight::default();
    hindsight.judge(&mut visits, &facts);
    assert_eq!(audiences(&visits), [Audience::Human; 5]);
    assert!(hindsight.take_noticed().is_empty());
}

#[test]
fn a_later_visit_of_the_same_person_confirms_a_fast_one() {
    let mut facts = LinkFacts::default();
    facts.reached.insert(
        "abc".into(),
        vec![Reach {
            handed_off_ms: None,
            delivered_ms: Some(T0),
        }],
    );
    let mut hindsight = Hindsight::default();
    let mut fast = vec![visit("1-0", "abc", T0 + 2_000, "198.51.100.7")];
    assert!(hindsight.judge(&mut fast, &facts).is_empty());
    assert_eq!(fast[0].agent.audience, Audience::Scanner);
    // Someone else's later visit confirms nothing.
    let mut other = vec![visit("2-0", "abc", T0 + 60_000, "198.51.100.8")];
    assert!(hindsight.judge(&mut other, &facts).is_empty());
    let mut again = vec![visit("3-0", "abc", T0 + 90_000, "198.51.100.7")];
    let corrections = hindsight.judge(&mut again, &facts);
    assert_eq!(corrections.len(), 1);
    let c = &corrections[0];
    assert_eq!(c.before.event_id, "1-0");
    assert_eq!(
        (c.before.agent.audience, c.after.agent.audience),
        (Audience::Scanner, Audience::Human)
    );
    assert_ne!(c.after.agent.device, Device::Bot);
    assert_eq!(
        c.after.reasons.0,
        Reasons::AFTER_DELIVERY | Reasons::CONFIRMED
    );
    // Once.
    let mut third = vec![visit("4-0", "abc", T0 + 120_000, "198.51.100.7")];
    assert!(hindsight.judge(&mut third, &facts).is_empty());
}

#[test]
fn a_correction_moves_every_count_of_its_visit() {
    let all_links = AllLinks::default();
    let (person, scanner, correction) = swept_person();
    let visitors = [person.visitor.to_vec()].into_iter().collect();
    let new: NewVisitors = [("abc".to_owned(), visitors)].into_iter().collect();
    let stored = fold(&[&person], &all_links, new, false);
    let mut d = Folding::new(&all_links, false);
    d.reclassify(&correction, true);
    let d = d.finish();
    // What was counted plus the correction is what the scanner's visit counts alone.
    let expected = fold(&[&scanner], &all_links, NewVisitors::default(), false);
    let sum = |a: i64, b: i64| a + b;
    for (key, counts) in &expected.buckets {
        let before = stored.buckets.get(key).copied().unwrap_or_default();
        let moved = d.buckets[key];
        assert_eq!(sum(before.humans, moved.humans), counts.humans);
        assert_eq!(sum(before.previews, moved.previews), counts.previews);
        assert_eq!(sum(before.scanners, moved.scanners), counts.scanners);
        assert_eq!(sum(before.new_visitors, moved.new_visitors), 0);
    }
    assert_eq!(d.links["abc"].0, -1);
    assert_eq!(
        (d.arms[&("abc", "")].humans, d.arms[&("abc", "")].visitors),
        (-1, -1)
    );
    let minute = d.domain_minutes.values().next().unwrap();
    assert_eq!((minute.humans, minute.scanners), (-1, 1));
    // Every breakdown row, the person's agent row emptied and the machine's filled.
    let audiences = |a: Audiences| [a.humans, a.bots, a.previews, a.scanners];
    let plus = |a: Audiences, b: Audiences| {
        let (a, b) = (audiences(a), audiences(b));
        [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
    };
    macro_rules! moved_exactly {
        ($table:ident) => {
            let keys = (stored.$table.keys()).chain(expected.$table.keys());
            for key in keys.chain(d.$table.keys()) {
                let at = |m: &BTreeMap<_, Audiences>| m.get(key).copied().unwrap_or_default();
                let (was, moved) = (at(&stored.$table), at(&d.$table));
                assert_eq!(plus(was, moved), audiences(at(&expected.$table)), "{key:?}");
            }
        };
    }
    moved_exactly!(agents);
    moved_exactly!(places);
    moved_exactly!(sources);
    moved_exactly!(domain_minutes);
}

#[test]
fn a_correction_counted_with_bots_keeps_its_link_count() {
    let all_links = AllLinks::default();
    let (_, _, correction) = swept_person();
    let mut d = Folding::new(&all_links, true);
    d.reclassify(&correction, false);
    let d = d.finish();
    assert_eq!(d.links["abc"], (0, T0));
    assert_eq!(d.arms[&("abc", "")].humans, -1);
    assert_eq!(d.arms[&("abc", "")].visitors, 0);
}

#[test]
fn a_correction_moves_its_workspaces_all_links_rows_only() {
    let mut all_links = AllLinks::default();
    all_links.insert("abc".into(), shortlink_model::WorkspaceId::from_db(7));
    let (_, _, correction) = swept_person();
    let mut d = Folding::new(&all_links, false);
    d.reclassify(&correction, false);
    let d = d.finish();
    // The link's rows and its workspace's sums, each moved once; the default's untouched.
    let codes: Vec<&str> = d.buckets.keys().map(|k| k.0).collect();
    assert_eq!(codes, ["*7", "*7", "abc", "abc"]);
    for counts in d.buckets.values() {
        assert_eq!((counts.humans, counts.scanners), (-1, 1));
    }
    for table in [
        d.agents.keys().map(|k| k.0).collect::<Vec<_>>(),
        d.places.keys().map(|k| k.0).collect(),
        d.sources.keys().map(|k| k.0).collect(),
    ] {
        assert!(
            table.iter().all(|code| ["*7", "abc"].contains(code)),
            "{table:?}"
        );
        assert!(table.contains(&"*7"));
    }
    let humans = |code: &str| -> i64 {
        (d.places.iter())
            .filter(|(k, _)| k.0 == code)
            .map(|(_, a)| a.humans)
            .sum()
    };
    assert_eq!((humans("abc"), humans("*7")), (-1, -1));
}

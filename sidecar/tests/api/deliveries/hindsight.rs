//! Hindsight (issue 78) on every backend: a sweep noticed after its first visits were stored
//! moves them out of the funnel's clicked, the A/B arms, the links' visit counts (the re-send
//! list), the domain's clicks (the health check) and the people of the stats, exactly once
//! (counts before and after, and after the same corrections again); a click within seconds of
//! its message's delivery receipt is a scanner's, and its recipient's later tap confirms it.

use super::*;
use crate::conversions::{visit, IPHONE};
use shortlink_visit_enrich::{AgentFacts, Audience, Device, Visit};
use shortlink_visits::hindsight::{Correction, Hindsight, Verdict};
use shortlink_wire::verdict::Reasons;
use std::sync::Arc;

crate::on_each_backend!(
    a_sweep_noticed_afterwards_leaves_every_count_once,
    a_click_right_after_delivery_counts_once_its_person_is_confirmed,
    a_batch_of_corrections_from_several_verdicts_moves_each_count_once
);

/// The people's counts that decide something, over `codes`: the funnel's clicked links, the
/// A/B arms' clicks and visitors, the links' visit counts, the domain's clicks, and the
/// people's visits stored.
async fn counts(app: &TestApp, (backend, db): (Backend, &TestDb), codes: &[String]) -> [i64; 6] {
    // A sum is a decimal on PostgreSQL and MariaDB.
    let int = if matches!(backend, Backend::Postgres) {
        "BIGINT"
    } else {
        "SIGNED"
    };
    let funnel = app.get_json("/campaigns/spring/funnel").await;
    let list = codes
        .iter()
        .map(|c| format!("'{c}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let sum = |sql: String| async move { db.scalar(&sql).await };
    [
        funnel["clicked"].as_i64().unwrap(),
        sum(format!(
            "SELECT CAST(COALESCE(SUM(humans), 0) AS {int}) FROM ab_arms WHERE code IN ({list})"
        ))
        .await,
        sum(format!(
            "SELECT CAST(COALESCE(SUM(visitors), 0) AS {int}) FROM ab_arms WHERE code IN ({list})"
        ))
        .await,
        sum(format!(
            "SELECT CAST(COALESCE(SUM(visit_count), 0) AS {int}) FROM links WHERE code IN ({list})"
        ))
        .await,
        sum(format!(
            "SELECT CAST(COALESCE(SUM(humans), 0) AS {int}) FROM domain_clicks"
        ))
        .await,
        sum(format!(
            "SELECT COUNT(*) FROM visits WHERE audience = 'human' AND code IN ({list})"
        ))
        .await,
    ]
}

/// The feed's `reclassified` events: (id, visit_id, from, to, audience, reasons), in order.
async fn reclassified(app: &TestApp) -> Vec<Value> {
    let feed = app.api(reqwest::Method::GET, "/visits?limit=1000");
    (ndjson_lines(feed.send().await.unwrap()).await.into_iter())
        .filter(|event| event["type"] == "reclassified")
        .map(|event| {
            json!([
                event["id"],
                event["reclassification"],
                event["audience"],
                event["reasons"]
            ])
        })
        .collect()
}

/// What [`reclassified`] answers for `visits` swept from people to scanners.
fn changes(visits: &[String]) -> Vec<Value> {
    (visits.iter())
        .map(|id| {
            json!([
                format!("rc_human_{id}"),
                {"visit_id": id, "from": "human", "to": "scanner"},
                "scanner",
                ["sweep"]
            ])
        })
        .collect()
}

async fn campaign_links(app: &TestApp, n: usize) -> Vec<String> {
    let mut codes = Vec::new();
    for i in 0..n {
        let link = app
            .create(json!({"url": "https://shop.example/", "campaign": "spring", "ref": format!("r{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    codes
}

/// Judges a batch as the consumer does, stores it with its corrections; answers them.
async fn consume(app: &TestApp, hindsight: &mut Hindsight, batch: &mut [Visit]) -> Vec<Correction> {
    let store = app.visit_store().await;
    let codes = Hindsight::codes(batch);
    let facts = store.link_facts(&codes).await.unwrap();
    let corrections = hindsight.judge(batch, &facts);
    let outcome = store
        .store_corrected(batch, &corrections, false)
        .await
        .unwrap();
    assert_eq!(outcome.reclassified, corrections.len() as u64);
    hindsight.keep(batch.to_vec());
    corrections
}

async fn a_sweep_noticed_afterwards_leaves_every_count_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let db = TestDb::connect(backend, &app.database_url).await;
    let codes = campaign_links(&app, 6).await;
    let mut hindsight = Hindsight::default();
    let t = chrono::Utc::now().timestamp_millis() - 120_000;
    // One scanner's address block fetches four recipients' links: people, so far.
    let mut first: Vec<Visit> = (0..4)
        .map(|i| {
            visit(
                &format!("{t}-{i}"),
                &codes[i],
                t + i as i64 * 200,
                &format!("198.51.100.{}", 10 + i),
                IPHONE,
                None,
            )
        })
        .collect();
    // A person taps the sixth link from elsewhere.
    first.push(visit(
        &format!("{t}-9"),
        &codes[5],
        t + 300,
        "192.0.2.77",
        IPHONE,
        None,
    ));
    assert!(consume(&app, &mut hindsight, &mut first).await.is_empty());
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [5, 5, 5, 5, 5, 5]
    );

    // The fifth recipient's link makes it a sweep: the four stored visits leave every count.
    let mut second = vec![visit(
        &format!("{}-0", t + 1),
        &codes[4],
        t + 900,
        "198.51.100.99",
        IPHONE,
        None,
    )];
    let corrections = consume(&app, &mut hindsight, &mut second).await;
    assert_eq!(corrections.len(), 4);
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [1, 1, 1, 1, 1, 1]
    );
    let scanners = db
        .scalar("SELECT COUNT(*) FROM visits WHERE audience = 'scanner' AND reasons = 64")
        .await;
    assert_eq!(scanners, 5);

    // The feed (and the webhooks reading it) tells of each change after its click.
    let swept: Vec<String> = (0..4).map(|i| format!("{t}-{i}")).collect();
    assert_eq!(reclassified(&app).await, changes(&swept));

    // The same corrections again (a retried batch, a second consumer): nothing moves.
    let store = app.visit_store().await;
    let again = store
        .store_corrected(&[], &corrections, false)
        .await
        .unwrap();
    assert_eq!(again.reclassified, 0);
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [1, 1, 1, 1, 1, 1]
    );
    assert_eq!(reclassified(&app).await, changes(&swept), "told once");
    // From the visits' day: the stats start at the link's creation by default, after the visits'
    // made-up times when the test runs just past midnight.
    let from = chrono::DateTime::from_timestamp_millis(t - 86_400_000)
        .expect("a time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // The campaign's four-way split follows the corrections, as its links' stats do.
    let campaign = app.get_json("/campaigns/spring").await;
    let audience = &campaign["audience"];
    let split = |v: &Value| {
        [&v["humans"], &v["previews"], &v["scanners"], &v["bots"]].map(|n| n.as_i64().unwrap())
    };
    assert_eq!(split(audience), [1, 0, 5, 0], "{campaign}");
    assert_eq!(audience["clicks"], json!(1), "{campaign}");
    let mut summed = [0; 4];
    for code in &codes {
        let stats = app
            .get_json(&format!("/links/{code}/stats?from={from}"))
            .await;
        for (sum, n) in summed.iter_mut().zip(split(&stats["totals"])) {
            *sum += n;
        }
    }
    assert_eq!(split(audience), summed);
    // The campaign's console page shows the same four numbers.
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/campaigns?name=spring").await;
    for key in ["humans", "previews", "scanners", "bots"] {
        let shown = crate::console_numbers::cell(&page, "audience", key);
        assert_eq!(shown, audience[key].as_i64().unwrap(), "{key}");
    }
    let stats = (app.get_json(&format!("/links/{}/stats?from={from}", codes[0]))).await;
    let totals = &stats["totals"];
    assert_eq!(
        (&totals["scanners"], &totals["previews"]),
        (&json!(1), &json!(0)),
        "{stats}"
    );
    assert_eq!(
        (&totals["humans"], &totals["unique_visitors"]),
        (&json!(0), &json!(0)),
        "{stats}"
    );
}

async fn a_click_right_after_delivery_counts_once_its_person_is_confirmed(backend: Backend) {
    let app = spawn_app(backend).await;
    let db = TestDb::connect(backend, &app.database_url).await;
    let codes = campaign_links(&app, 2).await;
    let delivered = chrono::Utc::now() - chrono::Duration::minutes(10);
    let receipt = |code: &str, id: &str| {
        json!({"code": code, "message_id": id, "state": "delivered", "at": delivered.to_rfc3339()})
            .to_string()
    };
    let (status, _) = post_lines(
        &app,
        API_KEY,
        &[receipt(&codes[0], "m1"), receipt(&codes[1], "m2")],
    )
    .await;
    assert_eq!(status, 200);
    let t = delivered.timestamp_millis();
    let mut hindsight = Hindsight::default();
    // A second after delivery, from two clients: no person taps that fast.
    let mut fast = vec![
        visit(
            &format!("{t}-1"),
            &codes[0],
            t + 1_000,
            "198.51.100.5",
            IPHONE,
            None,
        ),
        visit(
            &format!("{t}-2"),
            &codes[1],
            t + 1_500,
            "203.0.113.5",
            IPHONE,
            None,
        ),
    ];
    assert!(consume(&app, &mut hindsight, &mut fast).await.is_empty());
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [0, 0, 0, 0, 0, 0]
    );
    // The second recipient's phone (the same client) taps again a minute later: it was the
    // person, tapping fast; both taps are theirs, the link counted clicked once.
    let mut later = vec![visit(
        &format!("{}-1", t + 60_000),
        &codes[1],
        t + 61_500,
        "203.0.113.5",
        IPHONE,
        None,
    )];
    let corrections = consume(&app, &mut hindsight, &mut later).await;
    assert_eq!(corrections.len(), 1);
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [1, 2, 1, 2, 2, 2]
    );
    let confirmed = db
        .scalar("SELECT COUNT(*) FROM visits WHERE audience = 'human' AND reasons = 160")
        .await;
    assert_eq!(confirmed, 1);
}

/// `visit` as `audience` judged it for `reasons`.
fn judged(visit: &Visit, audience: Audience, reasons: u16) -> Visit {
    let device = match audience {
        Audience::Human => visit.agent.device,
        _ => Device::Bot,
    };
    let mut judged = visit.clone();
    judged.agent = Arc::new(AgentFacts {
        device,
        audience,
        ..AgentFacts::clone(&visit.agent)
    });
    judged.reasons = Reasons(reasons);
    judged
}

/// One batch's corrections, set-wise on every backend: people to scanners (a visitor's first
/// visit and its repeat), a scanner to a person, one whose starting verdict is no longer the
/// stored one, and one twice; each visit's counts move once, by the verdict it starts from.
async fn a_batch_of_corrections_from_several_verdicts_moves_each_count_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let db = TestDb::connect(backend, &app.database_url).await;
    let codes = campaign_links(&app, 3).await;
    let t = chrono::Utc::now().timestamp_millis() - 120_000;
    let at = |id: &str, code: usize, dt: i64, ip: &str| {
        visit(&format!("{t}-{id}"), &codes[code], t + dt, ip, IPHONE, None)
    };
    // A and its repeat D (one visitor), B: people; C: a scanner, on timing alone.
    let a = at("a", 0, 0, "198.51.100.1");
    let d = at("d", 0, 5_000, "198.51.100.1");
    let b = at("b", 1, 100, "198.51.100.2");
    let fast = at("c", 2, 200, "198.51.100.3");
    let c = judged(&fast, Audience::Scanner, Reasons::AFTER_DELIVERY);
    let store = app.visit_store().await;
    let stored = [a.clone(), d.clone(), b.clone(), c.clone()];
    let outcome = store.store_corrected(&stored, &[], false).await.unwrap();
    assert_eq!(outcome.inserted, 4);
    // [clicked, arms' people, arms' visitors, visit counts, domain's people, people's visits]
    assert_eq!(
        counts(&app, (backend, &db), &codes).await,
        [2, 3, 2, 3, 3, 3]
    );

    let swept = |v: &Visit| Correction {
        before: v.clone(),
        after: Verdict::of(&judged(v, Audience::Scanner, Reasons::SWEEP)),
    };
    let confirmed = Correction {
        before: c.clone(),
        after: Verdict::of(&judged(
            &fast,
            Audience::Human,
            Reasons::AFTER_DELIVERY | Reasons::CONFIRMED,
        )),
    };
    // B is stored as a person's: a correction starting from a scanner's changes nothing.
    let stale = Correction {
        before: judged(&b, Audience::Scanner, Reasons::SWEEP),
        after: Verdict::of(&b),
    };
    let batch = [swept(&a), confirmed, swept(&d), stale, swept(&a)];
    let outcome = store.store_corrected(&[], &batch, false).await.unwrap();
    assert_eq!(outcome.reclassified, 3, "A, C and D, each once");
    // A and D leave: c0 unclicked, A's visitor (its first visit) leaves the arm; C joins the
    // people without a visitor of its own (a person's later visit makes one).
    let after = [2, 2, 1, 2, 2, 2];
    assert_eq!(counts(&app, (backend, &db), &codes).await, after);
    let verdicts = db
        .scalar(&format!(
            "SELECT COUNT(*) FROM visits WHERE (event_id IN ('{t}-a', '{t}-d') \
             AND audience = 'scanner' AND reasons = 64) OR (event_id = '{t}-c' \
             AND audience = 'human' AND reasons = 160) OR (event_id = '{t}-b' \
             AND audience = 'human' AND reasons = 0)"
        ))
        .await;
    assert_eq!(verdicts, 4);

    // The same batch again (a retried transaction, a second consumer): nothing moves.
    let again = store.store_corrected(&[], &batch, false).await.unwrap();
    assert_eq!(again.reclassified, 0);
    assert_eq!(counts(&app, (backend, &db), &codes).await, after);
}

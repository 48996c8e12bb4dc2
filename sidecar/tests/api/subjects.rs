//! Personal data requests (issue 56): a subject's export holds exactly what direct SQL finds of
//! them; an erase leaves no visit, conversion, address or `ref` of theirs in the tables it
//! names, keeps their links answering (with the sticky-split hash of the new ref in the
//! record), keeps the campaign's totals as docs/PRIVACY.md says, records counts and never the
//! ref in the audit log, and finishes on a repeat after being cut short by a Redis outage.

use crate::console::Browser;
use crate::conversions::{now_ms, store, visit, IPHONE};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;

crate::on_each_backend!(
    a_subject_is_exported_as_stored_and_erased_without_a_trace,
    an_erase_cut_short_finishes_when_sent_again,
);

const ALICE: &str = "r-alice-4915112345678";
const ALICE_IP: &str = "203.0.113.77";
const BOB: &str = "r-bob";

fn sticky_split() -> Value {
    json!([{"split": {"sticky": true, "variants": [
        {"weight": 1, "url": "https://a.example/"}, {"weight": 1, "url": "https://b.example/"}]}}])
}

/// An erase `key` asks for with `erase`, done (asserted 200): its answer, as JSON and as text.
async fn erased(app: &TestApp, key: &str, erase: &Value) -> (Value, String) {
    let (status, text) = post(app, key, "/subjects/erase", erase).await;
    assert_eq!(status, 200, "{text}");
    (serde_json::from_str(&text).unwrap(), text)
}

/// What an erase's answer says: its state and selector, and the links, visits and conversions
/// it erased.
fn summary(done: &Value) -> (&str, &str, (i64, i64, i64)) {
    let text = |name: &str| done[name].as_str().unwrap_or_default();
    let count = |name: &str| done[name].as_i64().unwrap_or(-1);
    (
        text("state"),
        text("selector"),
        (count("links"), count("visits"), count("conversions")),
    )
}

async fn post(app: &TestApp, key: &str, path: &str, body: &Value) -> (u16, String) {
    let answer = with_key(app, key, Method::POST, path)
        .json(body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

fn ndjson(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The `field` of the export's lines of `kind`.
fn ids(lines: &[Value], kind: &str, field: &str) -> BTreeSet<String> {
    (lines.iter().filter(|line| line["type"] == kind))
        .map(|line| line[field].as_str().unwrap().to_owned())
        .collect()
}

fn quoted(codes: &[&str]) -> String {
    let quoted: Vec<String> = codes.iter().map(|c| format!("'{c}'")).collect();
    quoted.join(", ")
}

async fn texts(app: &TestApp, sql: &str) -> BTreeSet<String> {
    app.db.texts(sql).await.into_iter().collect()
}

struct Made {
    /// The default workspace's admin key (whose links `resolve` answers on `default`'s hosts).
    admin: String,
    /// Another workspace's admin.
    other: String,
    /// Alice's links: spring (sticky split), autumn; Bob's spring link.
    spring: String,
    autumn: String,
    bob: String,
}

/// The default workspace with Alice's two links and Bob's, visits of each (Alice's from her address), a
/// conversion each, and a webhook that receives spring.
async fn made(app: &TestApp) -> Made {
    let operator = operator_key(app).await;
    create_workspace(app, &operator, "brand-b").await;
    let other = workspace_key(app, &operator, "brand-b", "admin").await;
    let admin = API_KEY.to_owned();
    let mut codes = Vec::new();
    for (campaign, reference, rules) in [
        ("spring", ALICE, sticky_split()),
        ("autumn", ALICE, Value::Null),
        ("spring", BOB, Value::Null),
    ] {
        let mut body =
            json!({"url": "https://shop.example/", "campaign": campaign, "ref": reference});
        if !rules.is_null() {
            body["rules"] = rules;
        }
        let (status, text) = post(app, &admin, "/links", &body).await;
        assert_eq!(status, 201, "{text}");
        let link: Value = serde_json::from_str(&text).unwrap();
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    let t = now_ms() - 60_000;
    let mut visits = Vec::new();
    for i in 0..12 {
        let (code, ip) = match i % 3 {
            0 => (&codes[0], ALICE_IP),
            1 => (&codes[1], ALICE_IP),
            _ => (&codes[2], "198.51.100.5"),
        };
        visits.push(visit(
            &format!("1700000000{i:03}-0"),
            code,
            t + i,
            ip,
            IPHONE,
            None,
        ));
    }
    store(app, &visits).await;
    for (click, event) in [("1700000000000-0", "o-alice"), ("1700000000002-0", "o-bob")] {
        let (status, text) = post(
            app,
            &admin,
            "/conversions",
            &json!({"click_id": click, "name": "purchase", "event_id": event}),
        )
        .await;
        assert_eq!(status, 201, "{text}");
    }
    let (status, text) = post(
        app,
        &admin,
        "/webhooks",
        &json!({"name": "crm", "url": "https://hooks.example/in/tok3n", "campaigns": ["spring"],
                "secret": "a-webhook-secret-of-some-length"}),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let [spring, autumn, bob] = <[String; 3]>::try_from(codes).unwrap();
    Made {
        admin,
        other,
        spring,
        autumn,
        bob,
    }
}

async fn a_subject_is_exported_as_stored_and_erased_without_a_trace(backend: Backend) {
    let app = spawn_app(backend).await;
    let m = made(&app).await;
    let alice = [m.spring.as_str(), m.autumn.as_str()];

    // The export is what SQL holds of her: links, visits, conversions; and the webhook.
    let (status, text) = post(&app, &m.admin, "/subjects/export", &json!({"ref": ALICE})).await;
    assert_eq!(status, 200, "{text}");
    let lines = ndjson(&text);
    let sql_codes = texts(
        &app,
        &format!("SELECT code FROM links WHERE recipient_ref = '{ALICE}'"),
    )
    .await;
    assert_eq!(ids(&lines, "link", "code"), sql_codes);
    let sql_visits = texts(
        &app,
        &format!(
            "SELECT event_id FROM visits WHERE code IN ({})",
            quoted(&alice)
        ),
    )
    .await;
    assert_eq!(sql_visits.len(), 8);
    assert_eq!(ids(&lines, "visit", "id"), sql_visits);
    assert!(lines
        .iter()
        .filter(|l| l["type"] == "visit")
        .all(|l| l["ip"] == ALICE_IP && l["device"] == "mobile"));
    let sql_conversions = texts(
        &app,
        &format!(
            "SELECT id FROM conversions WHERE code IN ({})",
            quoted(&alice)
        ),
    )
    .await;
    assert_eq!(sql_conversions.len(), 1);
    assert_eq!(ids(&lines, "conversion", "id"), sql_conversions);
    let hooks: Vec<&Value> = lines.iter().filter(|l| l["type"] == "webhook").collect();
    assert_eq!(hooks.len(), 1, "{text}");
    assert_eq!(hooks[0]["url_origin"], "https://hooks.example");
    assert!(!text.contains(BOB) && !text.contains(&m.bob), "{text}");
    // Campaign + ref narrows to the campaign; another workspace's key finds nothing.
    let (_, text) = post(
        &app,
        &m.admin,
        "/subjects/export",
        &json!({"ref": ALICE, "campaign": "autumn"}),
    )
    .await;
    assert_eq!(
        ids(&ndjson(&text), "link", "code"),
        [m.autumn.clone()].into()
    );
    let (status, text) = post(&app, &m.other, "/subjects/export", &json!({"ref": ALICE})).await;
    assert_eq!((status, text.as_str()), (200, ""));
    for wrong in [
        json!({"campaign": "x"}),
        json!({"ref": ALICE, "code": m.spring}),
        json!({}),
    ] {
        let (status, text) = post(&app, &m.admin, "/subjects/export", &wrong).await;
        assert_eq!(status, 422, "{wrong}: {text}");
    }
    let (status, text) = post(
        &app,
        &m.admin,
        "/subjects/export",
        &json!({"ref": "a\u{1}b"}),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let (status, text) = post(&app, &m.admin, "/subjects/erase", &json!({"ref": ALICE})).await;
    assert_eq!(status, 422, "no request_id: {text}");

    let campaign_before = app_campaign(&app, &m.admin, "spring").await;
    let record_before = app.redis_record(&m.spring).await.unwrap();
    let recipient = |reference: &str| {
        shortlink_wire::rules::recipient(m.spring.as_bytes(), reference.as_bytes()).to_be_bytes()
    };
    assert!(contains(&record_before, &recipient(ALICE)));

    let erase = json!({"request_id": "dsr-1", "ref": ALICE});
    let (done, text) = erased(&app, &m.admin, &erase).await;
    assert_eq!(summary(&done), ("done", "ref", (2, 8, 1)), "{done}");
    let tombstone = done["tombstone"].as_str().unwrap();
    assert!(!text.contains(ALICE), "{text}");

    // Nothing of hers is left in the tables an erase answers for.
    for (sql, what) in [
        (format!("SELECT COUNT(*) FROM links WHERE recipient_ref = '{ALICE}'"), "ref in links"),
        (format!("SELECT COUNT(*) FROM conversions WHERE recipient_ref = '{ALICE}'"), "ref in conversions"),
        (format!("SELECT COUNT(*) FROM visits WHERE ip = '{ALICE_IP}'"), "address in visits"),
        (format!("SELECT COUNT(*) FROM visits WHERE code IN ({})", quoted(&alice)), "visits"),
        (format!("SELECT COUNT(*) FROM conversions WHERE code IN ({})", quoted(&alice)), "conversions"),
        (format!("SELECT COUNT(*) FROM link_visitors WHERE code IN ({})", quoted(&alice)), "visitor set"),
        (format!("SELECT COUNT(*) FROM visit_buckets WHERE code IN ({})", quoted(&alice)), "link rollups"),
        (format!("SELECT COUNT(*) FROM visit_places WHERE code IN ({})", quoted(&alice)), "places"),
        (format!("SELECT COUNT(*) FROM visit_agents WHERE code IN ({})", quoted(&alice)), "agents"),
        (format!("SELECT COUNT(*) FROM visit_sources WHERE code IN ({})", quoted(&alice)), "sources"),
        (format!("SELECT COUNT(*) FROM subject_requests WHERE codes LIKE '%{ALICE}%' OR request_key LIKE '%{ALICE}%'"), "request row"),
        (format!("SELECT COUNT(*) FROM audit_log WHERE action = 'subject.erase' AND changes LIKE '%{ALICE}%'"), "audit row"),
    ] {
        assert_eq!(app.db.scalar(&sql).await, 0, "{what} left after the erase");
    }
    // And across every text column of every table (the audit log's too: a link's rows say only
    // that its ref was set): neither the ref nor the address.
    assert_eq!(
        columns_holding(&app, backend, ALICE).await,
        Vec::<String>::new(),
        "the ref is left nowhere"
    );
    assert_eq!(
        columns_holding(&app, backend, ALICE_IP).await,
        Vec::<String>::new()
    );
    // Bob's are untouched.
    let bob_visits = app
        .db
        .scalar(&format!(
            "SELECT COUNT(*) FROM visits WHERE code = '{}'",
            m.bob
        ))
        .await;
    assert_eq!(bob_visits, 4);
    assert_eq!(
        app.db
            .scalar(&format!(
                "SELECT COUNT(*) FROM conversions WHERE recipient_ref = '{BOB}'"
            ))
            .await,
        1
    );

    // Her links still answer; the record's recipient number is the tombstone's now.
    for code in alice {
        let answer = app.resolve(code).await;
        assert_eq!(answer.status(), 302, "{code}");
        let link: Value = with_key(&app, &m.admin, Method::GET, &format!("/links/{code}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(link["ref"], tombstone);
    }
    let record = app.redis_record(&m.spring).await.unwrap();
    assert!(
        !contains(&record, &recipient(ALICE)),
        "the record keeps her hash"
    );
    assert!(contains(&record, &recipient(tombstone)));
    // The campaign's totals stay (docs/PRIVACY.md): links and the visit counter. Its audience is
    // summed from its links' rollups, and an erased link's rollups were its recipient's.
    let without_audience = |mut campaign: Value| {
        campaign.as_object_mut().unwrap().remove("audience");
        campaign
    };
    let campaign_after = app_campaign(&app, &m.admin, "spring").await;
    assert_eq!(
        campaign_after["audience"]["humans"], 4,
        "Bob's link's visits only"
    );
    assert_eq!(
        without_audience(campaign_after),
        without_audience(campaign_before)
    );
    // One audit row, counts only.
    let audit = app
        .db
        .scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'subject.erase'")
        .await;
    assert_eq!(audit, 1);

    // The same request again: the same answer, nothing done twice.
    let (status, again) = post(&app, &m.admin, "/subjects/erase", &erase).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(serde_json::from_str::<Value>(&again).unwrap(), done);
    let audit = app
        .db
        .scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'subject.erase'")
        .await;
    assert_eq!(audit, 1);
    let (_, text) = post(&app, &m.admin, "/subjects/export", &json!({"ref": ALICE})).await;
    assert_eq!(text, "", "nothing is found of her any more");
    let listed: Value = with_key(&app, &m.admin, Method::GET, "/subjects/requests")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["requests"][0]["id"], done["id"]);
    // The console's Privacy page lists it, without the ref.
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/privacy").await;
    assert!(
        page.contains(done["id"].as_str().unwrap()) && page.contains("dsr-1"),
        "{page}"
    );
    assert!(!page.contains(ALICE), "{page}");
}

async fn an_erase_cut_short_finishes_when_sent_again(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let m = made(&app).await;
    let erase = json!({"request_id": "dsr-2", "code": m.spring});
    // Redis down: the link's record cannot be written, so its ref stays; the request stays
    // `running` with what it had deleted already.
    app.redis.stop();
    let (status, text) = post(&app, &m.admin, "/subjects/erase", &erase).await;
    assert_eq!(status, 503, "{text}");
    let state = app
        .db
        .texts("SELECT state FROM subject_requests WHERE request_key = 'dsr-2'")
        .await;
    assert_eq!(state, ["running"]);
    app.redis.start_again();
    let (done, _) = erased(&app, &m.admin, &erase).await;
    assert_eq!(summary(&done), ("done", "code", (1, 4, 1)), "{done}");
    let left = app
        .db
        .scalar(&format!(
            "SELECT COUNT(*) FROM visits WHERE code = '{}'",
            m.spring
        ))
        .await;
    assert_eq!(left, 0);
    // Only that link: her autumn link keeps its ref and visits.
    let autumn = app
        .db
        .scalar(&format!(
            "SELECT COUNT(*) FROM visits WHERE code = '{}'",
            m.autumn
        ))
        .await;
    assert_eq!(autumn, 4);
    assert_eq!(app.resolve(&m.spring).await.status(), 302);
}

async fn app_campaign(app: &TestApp, key: &str, campaign: &str) -> Value {
    with_key(app, key, Method::GET, &format!("/campaigns/{campaign}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `table.column` of every text column of the database holding `needle`.
async fn columns_holding(app: &TestApp, backend: Backend, needle: &str) -> Vec<String> {
    let columns = match backend {
        Backend::Sqlite => {
            "SELECT m.name || '.' || p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' \
             AND (p.type LIKE '%TEXT%' OR p.type = '')"
        }
        Backend::Postgres => {
            "SELECT table_name || '.' || column_name FROM information_schema.columns \
             WHERE table_schema = current_schema() \
             AND data_type IN ('text', 'character varying', 'jsonb', 'json')"
        }
        Backend::Mariadb => {
            "SELECT CONCAT(table_name, '.', column_name) FROM information_schema.columns \
             WHERE table_schema = DATABASE() \
             AND data_type IN ('varchar', 'char', 'text', 'mediumtext', 'longtext', 'json')"
        }
    };
    let mut holding = Vec::new();
    for column in app.db.texts(columns).await {
        let (table, name) = column.split_once('.').unwrap();
        let value = match backend {
            Backend::Postgres => format!("CAST(\"{name}\" AS TEXT)"),
            Backend::Mariadb => format!("`{name}`"),
            Backend::Sqlite => format!("\"{name}\""),
        };
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {value} LIKE '%{needle}%'");
        if app.db.scalar(&sql).await > 0 {
            holding.push(column);
        }
    }
    holding.sort();
    holding
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

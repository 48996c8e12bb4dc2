//! `POST /links/batch`: per-item results in order, only good items stored (SQL and Redis),
//! NDJSON streamed both ways, metadata filters and campaign aggregates.

use crate::helpers::*;
use crate::on_each_backend;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

on_each_backend!(
    mixed_items_answer_in_order,
    an_alias_already_stored_fails_only_its_item,
    ndjson_batches_stream_one_result_per_line,
    metadata_filters_and_campaign_stats,
    an_alias_in_several_groups_goes_to_its_first_line,
);

#[tokio::test]
async fn json_batches_are_bounded() {
    let app = spawn_app(Backend::Sqlite).await;
    let items: Vec<Value> = (0..10_001)
        .map(|i| json!({"url": format!("https://t.example/{i}")}))
        .collect();
    let response = app.post_batch(&items).await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "batch_too_large");
    let response = app
        .api(Method::POST, "/links/batch")
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    assert_eq!(app.stored().await.links, 0);
}

async fn mixed_items_answer_in_order(backend: Backend) {
    let app = spawn_app(backend).await;
    let items = json!([
        {"url": "https://shop.example/a", "campaign": "spring", "ref": "r-1", "tags": ["sms", "fr"]},
        {"url": "javascript:alert(1)"},
        {"url": "https://shop.example/a", "campaign": "spring", "ref": "r-2"},
        {"url": "https://shop.example/b", "code": "x"},
        {"url": "https://shop.example/c", "code": "spring-promo"},
        {"url": "https://shop.example/d", "code": "spring-promo"},
        {"url": "https://shop.example/e", "colour": "red"},
        "not an object",
        {"url": "https://shop.example/f", "redirect": 303},
        {"url": "https://shop.example/g", "expires_at": "2999-01-01T00:00:00Z", "redirect": 301},
    ]);
    let results = batch_results(&app, &items).await;
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 422, 201, 422, 201, 409, 422, 422, 422, 201]);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i as u64);
    }
    assert_eq!(results[1]["error"]["code"], "unsupported_scheme");
    assert_eq!(results[3]["error"]["code"], "invalid_code");
    assert_eq!(results[5]["error"]["code"], "code_taken");
    assert_eq!(results[6]["error"]["code"], "invalid_body");
    assert_eq!(results[8]["error"]["code"], "invalid_redirect");
    let first = &results[0]["link"];
    assert_eq!(first["campaign"], "spring");
    assert_eq!(first["ref"], "r-1");
    assert_eq!(first["tags"], json!(["sms", "fr"]));
    assert_eq!(results[4]["link"]["code"], "spring-promo");
    // Two links to the same URL, each its own code.
    assert_ne!(results[0]["link"]["code"], results[2]["link"]["code"]);

    let stored = app.stored().await;
    assert_eq!(stored.links, 4, "only the good items are stored");
    assert_eq!(stored.redis_keys, 4);
    for at in [0, 2, 4, 9] {
        let link = &results[at]["link"];
        let code = link["code"].as_str().unwrap();
        let record = app.redis_get(code).await.expect("in redis");
        assert!(record.ends_with(link["url"].as_str().unwrap()), "{record}");
        let read: Value = app.get_link(code).await.json().await.unwrap();
        assert_eq!(&read, link);
        let resolved = app.resolve(code).await;
        assert_eq!(
            resolved.status().as_u16(),
            link["redirect"].as_u64().unwrap() as u16
        );
    }
    assert!(
        app.redis_expiretime(results[9]["link"]["code"].as_str().unwrap())
            .await
            > 0
    );
}

/// The rest of the chunk goes in when one alias is already stored (on PostgreSQL the bulk `COPY`
/// stops at the conflict and the chunk is inserted again, skipping it), and what is read back
/// from SQL is what the batch was given.
async fn an_alias_already_stored_fails_only_its_item(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://shop.example/first", "code": "taken-alias"}))
        .await;
    let items = json!([
        {"url": "https://shop.example/a", "campaign": "spring", "ref": "r-1", "tags": ["sms", "fr"],
         "expires_at": "2999-01-01T00:00:00Z", "redirect": 308, "forward_query": true},
        {"url": "https://shop.example/b", "code": "taken-alias"},
        {"url": "https://shop.example/c", "code": "fresh-alias"},
    ]);
    let results = batch_results(&app, &items).await;
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 409, 201]);
    assert_eq!(results[1]["error"]["code"], "code_taken");

    let stored = app.stored().await;
    assert_eq!(stored.links, 3);
    assert_eq!(stored.redis_keys, 3);
    for at in [0, 2] {
        let link = &results[at]["link"];
        let response = app.get_link(link["code"].as_str().unwrap()).await;
        assert_eq!(response.status(), 200);
        let read: Value = response.json().await.unwrap();
        assert_eq!(&read, link, "read back from SQL as created");
    }
    let first = &results[0]["link"];
    assert_eq!(first["tags"], json!(["sms", "fr"]));
    assert_eq!(first["expires_at"], "2999-01-01T00:00:00Z");
    assert_eq!(first["redirect"], 308);
    let taken = app
        .get_link("taken-alias")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(taken["url"], "https://shop.example/first");
}

async fn ndjson_batches_stream_one_result_per_line(backend: Backend) {
    let app = spawn_app(backend).await;
    const N: usize = 2_500;
    let mut body = String::new();
    for i in 0..N {
        if i % 500 == 7 {
            body.push_str("{\"url\": \n");
        } else {
            body.push_str(&format!(
                "{{\"url\":\"https://t.example/{i}\",\"ref\":\"r{i}\"}}\n"
            ));
        }
        if i % 1000 == 0 {
            body.push('\n'); // blank lines are not items
        }
    }
    let response = send_ndjson(app.api(Method::POST, "/links/batch"), body).await;
    assert_eq!(
        response.headers()["content-type"],
        "application/x-ndjson",
        "NDJSON in, NDJSON out"
    );
    let results = ndjson_lines(response).await;
    assert_eq!(results.len(), N);
    let mut created = 0;
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i as u64);
        if i % 500 == 7 {
            assert_eq!(result["status"], 400, "{result}");
            assert_eq!(result["error"]["code"], "malformed_json");
        } else {
            assert_eq!(result["status"], 201, "{result}");
            assert_eq!(result["link"]["url"], format!("https://t.example/{i}"));
            assert_eq!(result["link"]["ref"], format!("r{i}"));
            created += 1;
        }
    }
    let stored = app.stored().await;
    assert_eq!(stored.links, created);
    assert_eq!(stored.redis_keys, created);
}

async fn metadata_filters_and_campaign_stats(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut items = Vec::new();
    for i in 0..30 {
        let campaign = if i % 3 == 0 { "winter" } else { "spring" };
        let tags = if i % 2 == 0 {
            json!(["even"])
        } else {
            json!([])
        };
        items.push(json!({
            "url": format!("https://t.example/{i}"),
            "campaign": campaign,
            "ref": format!("r{}", i % 10),
            "tags": tags,
        }));
    }
    let body: Value = app.post_batch(&items).await.json().await.unwrap();
    let codes: Vec<String> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["link"]["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(codes.len(), 30);

    // Keyset pagination over a filter: pages of 7, no link twice, all of the campaign.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/links?campaign=spring&limit=7".to_owned();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page: Value = app
            .api(Method::GET, &path)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for link in page["links"].as_array().unwrap() {
            assert_eq!(link["campaign"], "spring");
            seen.push(link["code"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 20);

    let page: Value = app
        .api(Method::GET, "/links?ref=r3&tag=even&limit=100")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let refs: Vec<&Value> = page["links"].as_array().unwrap().iter().collect();
    assert!(refs.is_empty(), "r3 items are odd-numbered: {page}");
    let page: Value = app
        .api(Method::GET, "/links?ref=r4&tag=even&campaign=spring")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let links = page["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "items 4 and 14 ({page})");

    // Update the metadata; revoke one, expire one.
    let response = app
        .patch_link(
            &codes[1],
            &json!({"campaign": "winter", "tags": ["moved"], "ref": null}),
        )
        .await;
    let patched: Value = response.json().await.unwrap();
    assert_eq!(patched["campaign"], "winter");
    assert_eq!(patched["tags"], json!(["moved"]));
    assert_eq!(patched["ref"], Value::Null);
    assert_eq!(app.delete_link(&codes[0]).await.status(), 200);
    app.set_expiry_in_sql(&codes[3], now_secs() - 10).await;

    let stats: Value = app
        .api(Method::GET, "/campaigns/winter")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats,
        json!({"campaign": "winter", "links": 11, "live": 9, "expired": 1, "revoked": 1, "visits": 0,
            "audience": {"humans": 0, "previews": 0, "scanners": 0, "bots": 0, "clicks": 0,
                "unique_visitors": 0}})
    );
    let missing = app
        .api(Method::GET, "/campaigns/nope")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// The per-item results of a JSON batch that was answered 200.
async fn batch_results(app: &TestApp, items: &Value) -> Vec<Value> {
    let response = app.post_batch(items).await;
    assert_eq!(response.status(), 200);
    let mut body: Value = response.json().await.unwrap();
    match body["results"].take() {
        Value::Array(results) => results,
        other => panic!("results is not an array: {other}"),
    }
}

/// Lines a batch writes in one transaction (a group of eight chunks of 1,000).
const GROUP: usize = 8_000;

/// A batch's groups are written at once on PostgreSQL and MariaDB (only their commits take turns):
/// an alias used in several groups goes to its first line and every later use is answered
/// `code_taken`, as in one transaction, even where the later group reaches it first (the first
/// chunk of a group against the last of the one before). The batch ends, every other line
/// created, answered in order: no group waits for the row of one that waits for its turn.
async fn an_alias_in_several_groups_goes_to_its_first_line(backend: Backend) {
    let app = spawn_app(backend).await;
    const LINES: usize = 3 * GROUP;
    let uses: [(&str, &[usize]); 3] = [
        ("shared-one", &[GROUP - 1, GROUP, 2 * GROUP]),
        ("shared-two", &[GROUP + 5, 2 * GROUP + 1]),
        ("shared-three", &[2, LINES - 1]),
    ];
    let alias_at = |line: usize| {
        (uses.iter())
            .find(|(_, lines)| lines.contains(&line))
            .map(|&(alias, lines)| (alias, lines[0] == line))
    };
    let url = |line: usize| format!("https://t.example/{line}");
    let body: String = (0..LINES)
        .map(|line| match alias_at(line) {
            Some((alias, _)) => format!("{}\n", json!({"url": url(line), "code": alias})),
            None => format!("{}\n", json!({"url": url(line)})),
        })
        .collect();
    let response = send_ndjson(app.api(Method::POST, "/links/batch"), body).await;
    let results = ndjson_lines(response).await;
    assert_eq!(results.len(), LINES, "one result per line");
    for (line, result) in results.iter().enumerate() {
        assert_eq!(result["index"], line as u64, "{result}");
        match alias_at(line) {
            Some((_, false)) => {
                assert_eq!(result["status"], 409, "{result}");
                assert_eq!(result["error"]["code"], "code_taken", "{result}");
            }
            Some((alias, true)) => {
                assert_eq!(result["status"], 201, "{result}");
                assert_eq!(result["link"]["code"], alias, "{result}");
            }
            None => assert_eq!(result["status"], 201, "{result}"),
        }
    }
    let later_uses: usize = uses.iter().map(|(_, lines)| lines.len() - 1).sum();
    let stored = app.stored().await;
    assert_eq!(stored.links, (LINES - later_uses) as i64);
    for (alias, lines) in uses {
        let read: Value = app.get_link(alias).await.json().await.unwrap();
        assert_eq!(read["url"], url(lines[0]), "{alias}: its first line's");
        let record = app.redis_get(alias).await.expect("in redis");
        assert!(record.ends_with(&url(lines[0])), "{alias}: {record}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_the_timeout_slows_a_batch_down_on_postgres() {
    a_lock_held_past_the_timeout_slows_a_batch_down(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_the_timeout_slows_a_batch_down_on_mariadb() {
    a_lock_held_past_the_timeout_slows_a_batch_down(Backend::Mariadb).await
}

/// A lock the batch's inserts wait for, held past `--db-timeout` (by a transaction left open, or
/// by the group ahead committing on a loaded machine), slows the batch down and sheds nothing:
/// the group's lock wait runs out, it is written again, and once the lock is let go every line
/// is created. The database answered all along: no line is told 503 "retry later".
async fn a_lock_held_past_the_timeout_slows_a_batch_down(backend: Backend) {
    let app = spawn_app(backend).await;
    // One chunk, so one group.
    const LINES: usize = 1_000;
    let url = |line: usize| format!("https://t.example/{line}");
    let body: String = (0..LINES)
        .map(|line| match line {
            7 => format!("{}\n", json!({"url": url(line), "code": "held-up"})),
            _ => format!("{}\n", json!({"url": url(line)})),
        })
        .collect();
    // No insert into `links` gets past it: PostgreSQL's SHARE lock on the table; InnoDB's
    // next-key lock past the last code of the (empty) table, at REPEATABLE READ. `waits` tells
    // the group's waits for it apart: on PostgreSQL the start of the waiting transaction (the
    // group's bulk insert is a `COPY`); on MariaDB the server's count of lock waits begun, as a
    // group written again may keep its transaction's id and its wait's start in INNODB_TRX
    // (other tests on the server may add to the count: the lock is then let go sooner, and the
    // test proves less, never fails).
    let (held, waits) = match &app.db {
        TestDb::Postgres(pool) => {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("LOCK TABLE links IN SHARE MODE")
                .execute(&mut *tx)
                .await
                .unwrap();
            let waits = "SELECT xact_start::text FROM pg_stat_activity \
                WHERE datname = current_database() AND wait_event_type = 'Lock' \
                AND query LIKE 'COPY links %'";
            (Held::Postgres(tx), waits)
        }
        TestDb::Mysql(pool) => {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("SELECT code FROM links LOCK IN SHARE MODE")
                .execute(&mut *tx)
                .await
                .unwrap();
            let waits = "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_WAITS'";
            (Held::Mysql(tx), waits)
        }
        TestDb::Sqlite(_) => unreachable!("a server backend"),
    };
    let mut seen: HashSet<String> = app.db.texts(waits).await.into_iter().collect();
    let request = app.api(Method::POST, "/links/batch");
    let batch = tokio::spawn(async move { ndjson_lines(send_ndjson(request, body).await).await });
    // Held until the group waits for it a second time (the first wait ran out), or until the
    // batch has answered without waiting again.
    let second_wait = seen.len() + 2;
    while seen.len() < second_wait && !batch.is_finished() {
        seen.extend(app.db.texts(waits).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    held.release().await;
    let results = batch.await.unwrap();
    assert_eq!(results.len(), LINES, "one result per line");
    for (line, result) in results.iter().enumerate() {
        assert_eq!(result["index"], line as u64, "{result}");
        assert_eq!(result["status"], 201, "{result}");
    }
    assert_eq!(app.stored().await.links, LINES as i64);
    let record = app.redis_get("held-up").await.expect("in redis");
    assert!(record.ends_with(&url(7)), "{record}");
}

/// A transaction of the test's own, holding a lock until released.
enum Held {
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    Mysql(sqlx::Transaction<'static, sqlx::MySql>),
}

impl Held {
    async fn release(self) {
        match self {
            Held::Postgres(tx) => tx.rollback().await.unwrap(),
            Held::Mysql(tx) => tx.rollback().await.unwrap(),
        }
    }
}

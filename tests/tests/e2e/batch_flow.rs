//! Large, retried, slow and broken NDJSON batches through nginx's internal API server, the address
//! the README gives campaign tools. nginx passes no more of a request body once the sidecar's answer
//! has started (`sidecar/crates/api/src/batch/spool.rs`), so these run at the sizes the API promises, read
//! the way real clients read, and check afterwards that SQL and Redis agree link for link and that
//! no connection is left open.

use serde_json::Value;
use shortlink_e2e::{http_client, System, API_KEY};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::wait_until;

/// One campaign link per recipient, as the issue's reproduction sends them.
fn ndjson(lines: usize, campaign: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(lines * 90);
    for i in 0..lines {
        writeln!(
            body,
            r#"{{"url":"https://shop.example/sale?r={i}","campaign":"{campaign}","ref":"r{i:07}"}}"#
        )
        .unwrap();
    }
    body
}

/// `query`'s output: through `sqlite3`, or the test process's MariaDB for a system on one.
fn sql(system: &System, query: &str) -> String {
    let url = system.database_url();
    if let Some(rest) = url.strip_prefix("mysql://") {
        // RAND() is MariaDB's random().
        let query = query.replace("random()", "RAND()");
        let database = rest.rsplit('/').next().unwrap();
        return testkit::mariadb().query_in(database, &query).unwrap();
    }
    system.sqlite(query)
}

fn links_in_sql(system: &System) -> usize {
    sql(system, "SELECT COUNT(*) FROM links").parse().unwrap()
}

/// Every link SQL holds has its record in Redis, and Redis holds no link SQL does not: nothing
/// half-written by a batch that stopped.
/// A group that was being written when its client went away still commits (or rolls back and
/// takes its keys back), so the two are compared once they agree, within a bound.
fn assert_sql_and_redis_agree(system: &System) -> usize {
    let in_redis = || -> usize {
        system
            .redis
            .cli_raw(&["EVAL", "return #redis.call('KEYS', 'sl:c:*')", "0"])
            .parse()
            .unwrap()
    };
    let agree = wait_until(Duration::from_secs(30), || {
        links_in_sql(system) == in_redis()
    });
    assert!(
        agree,
        "links in SQL ({}) and records in Redis ({})",
        links_in_sql(system),
        in_redis()
    );
    let in_sql = links_in_sql(system);
    let codes = sql(system, "SELECT code FROM links ORDER BY random() LIMIT 200");
    for code in codes.lines() {
        assert_eq!(
            system.redis.cli(&["EXISTS", &format!("sl:c:{code}")]),
            "(integer) 1",
            "{code} is in SQL but not in Redis"
        );
    }
    in_sql
}

/// Established TCP connections whose local port is `port` (server side).
fn connections_on(port: u16) -> usize {
    let output = Command::new("ss")
        .args(["-Htn", "state", "established", &format!("sport = :{port}")])
        .output()
        .expect("run ss");
    String::from_utf8_lossy(&output.stdout).lines().count()
}

/// Once a broken batch is over, neither nginx nor the sidecar keeps a connection for it: no
/// client connection on the API server, and none between nginx and the sidecar beyond its idle
/// keepalive pool as it was before the batch.
fn assert_no_connection_left(system: &System, sidecar_before: usize) {
    assert!(
        wait_until(Duration::from_secs(30), || {
            connections_on(system.nginx.api_port) == 0
                && connections_on(system.sidecar.port) <= sidecar_before
        }),
        "connections left: {} on the API server, {} on the sidecar (before: {sidecar_before})",
        connections_on(system.nginx.api_port),
        connections_on(system.sidecar.port)
    );
}

fn batch_request(system: &System, body_len: usize, key: Option<&str>) -> Vec<u8> {
    let mut head = format!(
        "POST /api/v1/links/batch HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
         Authorization: Bearer {API_KEY}\r\nContent-Type: application/x-ndjson\r\n\
         Content-Length: {body_len}\r\nConnection: close\r\n",
        system.nginx.api_port
    );
    if let Some(key) = key {
        head.push_str(&format!("Idempotency-Key: {key}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// Posts `body` through the API server and reads the NDJSON answer line by line; returns the
/// parsed results.
fn post_batch(system: &System, body: Vec<u8>, key: Option<&str>) -> Vec<Value> {
    let mut request = http_client()
        .post(format!(
            "http://127.0.0.1:{}/api/v1/links/batch",
            system.nginx.api_port
        ))
        .bearer_auth(API_KEY)
        .header("content-type", "application/x-ndjson")
        .timeout(Duration::from_secs(900))
        .body(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = request.send().expect("reach the API server");
    assert_eq!(response.status(), 200);
    let text = response.text().expect("the whole answer");
    text.lines()
        .map(|line| serde_json::from_str(line).expect("an NDJSON result"))
        .collect()
}

/// A batch of `lines` links as a client is told to send it: a line answered 503 (the database or
/// Redis did not take it in time, on a loaded machine; "not stored; retry later") is sent again,
/// in a batch of such lines, until none is left. Every answer in the place of its line.
fn post_batch_resending_503s(system: &System, lines: usize, campaign: &str) -> Vec<Value> {
    let body = ndjson(lines, campaign);
    let sent: Vec<&[u8]> = body.split_inclusive(|&byte| byte == b'\n').collect();
    let mut results = post_batch(system, body.clone(), None);
    for _ in 0..5 {
        let unstored: Vec<usize> = (results.iter().enumerate())
            .filter(|(_, result)| result["status"] == 503)
            .map(|(index, _)| index)
            .collect();
        if unstored.is_empty() {
            break;
        }
        let again = post_batch(
            system,
            unstored.iter().flat_map(|&i| sent[i]).copied().collect(),
            None,
        );
        assert_eq!(
            again.len(),
            unstored.len(),
            "one result per line sent again"
        );
        for (mut result, index) in again.into_iter().zip(unstored) {
            result["index"] = index.into();
            results[index] = result;
        }
    }
    results
}

#[test]
fn a_million_line_batch_goes_through_the_api_server() {
    a_large_batch_goes_through_the_api_server_of(System::start(), 1_000_000);
}

/// The same on MariaDB, whose batches are multi-row `INSERT`s rather than SQLite's: a quarter of
/// the lines, still thousands of groups through that path. The million lines are the spool's and
/// nginx's bound, which the database does not change; each million was three minutes of both
/// cores in CI.
#[test]
fn a_large_batch_on_mariadb_goes_through_the_api_server() {
    let database = testkit::mariadb().fresh_database_url();
    a_large_batch_goes_through_the_api_server_of(System::start_on_database(&database), 250_000);
}

fn a_large_batch_goes_through_the_api_server_of(system: System, lines: usize) {
    let results = post_batch_resending_503s(&system, lines, "bf");
    assert_eq!(results.len(), lines, "one result per line");
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i, "results in order");
        assert_eq!(result["status"], 201, "{result}");
    }
    assert_eq!(assert_sql_and_redis_agree(&system), lines);
    // Links from the start, the middle and the end of the batch redirect on the redirect server.
    for i in [0, 1, lines / 2 - 1, lines / 2, lines - 1] {
        let code = results[i]["link"]["code"].as_str().unwrap();
        let response = system.nginx.get("s2.test", &format!("/{code}"));
        assert_eq!(response.status(), 302, "line {i}");
        assert_eq!(
            response.headers()["location"],
            format!("https://shop.example/sale?r={i}").as_str()
        );
    }
}

/// A busy machine slows a batch down and never sheds its lines (issue 82): with every core kept
/// busy by spinning processes, SQLite's one writer is held past `--db-timeout` by the group before
/// it (and the checkpointer), and each group that waited longer used to answer its 8,000 lines 503
/// "not stored; retry later" while the database was answering all along. Every line is stored
/// the first time. A `--db-timeout` of 100 ms stands for the load of twenty that made a group's
/// transaction outlast the default 3 s: whatever the machine's speed, the group after waits past it.
#[test]
fn a_batch_on_a_busy_machine_stores_every_line_the_first_time() {
    let options = shortlink_e2e::NginxOptions::default();
    let short_wait = ["--db-timeout", "100ms"];
    let system = System::start_on_with(testkit::RedisServer::start(), options, &short_wait);
    let lines = 200_000;
    let body = ndjson(lines, "busy");
    let hogs = testkit::CpuHogs::on_every_core();
    let results = post_batch(&system, body, None);
    drop(hogs);
    assert_eq!(results.len(), lines, "one result per line");
    let shed = (results.iter()).filter(|result| result["status"] != 201);
    let shed: Vec<&Value> = shed.collect();
    assert!(
        shed.is_empty(),
        "{} lines not stored, the first: {}",
        shed.len(),
        shed[0]
    );
    assert_eq!(assert_sql_and_redis_agree(&system), lines);
}

#[test]
fn a_retried_batch_with_its_idempotency_key_answers_the_same_through_nginx() {
    let system = System::start();
    let body = ndjson(25_000, "retry");
    let first = post_batch(&system, body.clone(), Some("campaign-42"));
    assert!(first.iter().all(|result| result["status"] == 201));
    let stored = assert_sql_and_redis_agree(&system);
    let again = post_batch(&system, body, Some("campaign-42"));
    assert_eq!(again.len(), first.len());
    for (first, again) in first.iter().zip(&again) {
        assert_eq!(first["link"]["code"], again["link"]["code"], "{again}");
    }
    assert_eq!(assert_sql_and_redis_agree(&system), stored, "nothing new");
}

#[test]
fn a_reader_at_100_kb_per_second_gets_every_result() {
    let system = System::start();
    let lines = 2_500;
    let body = ndjson(lines, "slow");
    let mut stream = TcpStream::connect(("127.0.0.1", system.nginx.api_port)).unwrap();
    stream
        .write_all(&batch_request(&system, body.len(), None))
        .unwrap();
    stream.write_all(&body).unwrap();
    // 100 KB/s: 10 KB, then wait out the rest of its 100 ms.
    let mut answer = Vec::new();
    let mut buffer = [0u8; 10_000];
    loop {
        let started = Instant::now();
        let read = stream.read(&mut buffer).unwrap();
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..read]);
        std::thread::sleep(Duration::from_millis(100).saturating_sub(started.elapsed()));
    }
    let response = shortlink_e2e::raw::parse_response(&answer);
    assert_eq!(response.status, 200);
    let results: Vec<Value> = String::from_utf8(response.body)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(results.len(), lines);
    assert!(results.iter().all(|result| result["status"] == 201));
    assert_eq!(assert_sql_and_redis_agree(&system), lines);
}

#[test]
fn a_client_gone_mid_upload_leaves_whole_groups_and_a_retry_finishes_the_batch() {
    let system = System::start();
    let sidecar_before = connections_on(system.sidecar.port);
    let lines = 200_000;
    let body = ndjson(lines, "gone-up");
    let mut stream = TcpStream::connect(("127.0.0.1", system.nginx.api_port)).unwrap();
    stream
        .write_all(&batch_request(&system, body.len(), Some("gone-up")))
        .unwrap();
    // Half the body, cut in the middle of a line, then the client is gone.
    stream.write_all(&body[..body.len() / 2 + 17]).unwrap();
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);

    assert_no_connection_left(&system, sidecar_before);
    let stored = assert_sql_and_redis_agree(&system);
    assert!(stored < lines, "the batch did not go on without its body");

    let kept = sql(&system, "SELECT recipient_ref, code FROM links");
    let results = post_batch(&system, body, Some("gone-up"));
    assert_eq!(results.len(), lines);
    assert!(results.iter().all(|result| result["status"] == 201));
    // What the first try stored keeps its code; the rest is created once.
    for row in kept.lines() {
        let (recipient, code) = row.split_once('|').unwrap();
        let index: usize = recipient.trim_start_matches('r').parse().unwrap();
        assert_eq!(results[index]["link"]["code"], code, "line {index}");
    }
    assert_eq!(assert_sql_and_redis_agree(&system), lines);
}

#[test]
fn a_client_gone_mid_answer_keeps_what_it_was_told() {
    let system = System::start();
    let sidecar_before = connections_on(system.sidecar.port);
    let lines = 100_000;
    let body = ndjson(lines, "gone-down");
    let mut stream = TcpStream::connect(("127.0.0.1", system.nginx.api_port)).unwrap();
    stream
        .write_all(&batch_request(&system, body.len(), Some("gone-down")))
        .unwrap();
    stream.write_all(&body).unwrap();
    // About 2,000 results, then the client is gone.
    let mut answer = vec![0u8; 800_000];
    stream.read_exact(&mut answer).unwrap();
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);

    assert_no_connection_left(&system, sidecar_before);
    let stored = assert_sql_and_redis_agree(&system);
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{:?}", &answer[..40]);
    // The result lines read whole; the chunked framing's size lines are not JSON, and a line that
    // a chunk boundary (or the cut) splits is skipped: results are matched by their index.
    let told: Vec<Value> = answer
        .split(|&byte| byte == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(|result| result.get("index").is_some())
        .collect();
    assert!(told.iter().all(|result| result["status"] == 201));
    assert!(told.len() >= 100, "{} results read", told.len());
    assert!(stored >= told.len() && stored <= lines);
    // Every link the client was told about redirects where it was told.
    for result in told.iter().step_by(97) {
        let code = result["link"]["code"].as_str().unwrap();
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status(), 302, "{result}");
        assert_eq!(
            response.headers()["location"],
            result["link"]["url"].as_str().unwrap()
        );
    }

    let results = post_batch(&system, body, Some("gone-down"));
    assert_eq!(results.len(), lines);
    for told in &told {
        let index = told["index"].as_u64().unwrap() as usize;
        assert_eq!(told["link"]["code"], results[index]["link"]["code"]);
    }
    assert_eq!(assert_sql_and_redis_agree(&system), lines);
}

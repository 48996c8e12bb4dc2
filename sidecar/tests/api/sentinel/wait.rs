//! `WAIT` short of replicas refuses the write and stores nothing; the settings from the file.

use super::*;
use shortlink_store::LinkFilter;
use testkit::RedisServer;

/// `--redis-wait-replicas` more than the replicas that hold a write: 503, and the link is in
/// neither SQL nor Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_refuse_the_write_and_store_nothing() {
    let primary = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&primary);
    let sidecar = start_sidecar(
        &primary.url(),
        &[
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "200ms",
        ],
    )
    .await;
    let client = client();
    let (status, body) = post(&client, &sidecar.address, "https://a.example/").await;
    assert_eq!(status, 201, "{body}");
    let code = body["code"].as_str().unwrap().to_owned();
    let replicated = replica.cli_raw(&["GET", &format!("sl:c:{code}")]);
    assert!(
        replicated.ends_with("|https://a.example/"),
        "WAIT returned once the replica had it: {replicated:?}"
    );

    replica.kill();
    // The primary notices the replica gone when its connection drops.
    assert!(
        testkit::wait_until(Duration::from_secs(10), || primary
            .cli_raw(&["INFO", "replication"])
            .contains("connected_slaves:0")),
        "the primary still counts the replica"
    );
    let (status, body) = post(&client, &sidecar.address, "https://b.example/").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "redis_unavailable", "{body}");
    assert!(
        !body.to_string().contains("replica"),
        "no internals in the answer: {body}"
    );
    let in_sql = sidecar
        .storage
        .scan_links(&LinkFilter::all_workspaces(), None, 100)
        .await
        .unwrap();
    assert_eq!(in_sql.len(), 1, "the refused link is not in SQL");
    assert_eq!(
        primary.cli_raw(&["KEYS", "sl:c:*"]),
        format!("sl:c:{code}"),
        "the refused link's record was taken back from the primary"
    );

    // A batch: every item refused, none stored.
    let response = client
        .post(format!("{}/api/v1/links/batch", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!([{"url": "https://c.example/"}, {"url": "https://d.example/"}]))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert!(text.contains("redis_unavailable"), "{text}");
    // An update: refused, and the record as before (SQL keeps the old target too).
    let before = primary.cli_raw(&["GET", &format!("sl:c:{code}")]);
    let response = client
        .patch(format!("{}/api/v1/links/{code}", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!({"url": "https://e.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        primary.cli_raw(&["GET", &format!("sl:c:{code}")]),
        before,
        "the unreplicated update was taken back"
    );
    let links = sidecar
        .storage
        .scan_links(&LinkFilter::all_workspaces(), None, 100)
        .await
        .unwrap();
    assert_eq!(links.len(), 1, "nothing of the batch is in SQL");
    assert_eq!(
        links[0].target, "https://a.example/",
        "SQL keeps the old target"
    );
    assert_eq!(
        primary.cli_raw(&["KEYS", "sl:c:*"]),
        format!("sl:c:{code}"),
        "nothing of the batch is in Redis"
    );

    // Preview cards go with their records: a refused create, batch item or update leaves none.
    let card = json!({"title": "T", "description": "D", "image": "https://i.example/a.png"});
    for (method, path, body) in [
        (
            reqwest::Method::POST,
            "/links".to_owned(),
            json!({"url": "https://f.example/", "preview": card}),
        ),
        (
            reqwest::Method::POST,
            "/links/batch".to_owned(),
            json!([{"url": "https://g.example/", "preview": card}]),
        ),
        (
            reqwest::Method::PATCH,
            format!("/links/{code}"),
            json!({"preview": card}),
        ),
    ] {
        let response = client
            .request(method, format!("{}/api/v1{path}", sidecar.address))
            .bearer_auth(API_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        assert!(text.contains("redis_unavailable"), "{path}: {text}");
    }
    assert_eq!(
        primary.cli_raw(&["KEYS", "sl:p:*"]),
        "",
        "no card left behind"
    );
    assert_eq!(
        primary.cli_raw(&["GET", &format!("sl:c:{code}")]),
        before,
        "the record as before"
    );
}

/// The Sentinel settings from the `--config` file, as every other setting.
#[test]
fn sentinel_settings_come_from_the_config_file() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("sidecar.toml");
    std::fs::write(
        &path,
        "redis_sentinels = [\"10.0.0.1:26379\", \"redis://:pw@10.0.0.2:26379\"]\n\
         redis_sentinel_service = \"links\"\nredis_wait_replicas = 2\n\
         redis_wait_timeout = \"250ms\"\n",
    )
    .unwrap();
    let cli = shortlink_sidecar::config_file::parse_from([
        "shortlink-sidecar",
        "--config",
        path.to_str().unwrap(),
    ])
    .expect("a valid file");
    let config = cli.config;
    assert_eq!(
        config.redis_sentinels,
        ["10.0.0.1:26379", "redis://:pw@10.0.0.2:26379"]
    );
    assert_eq!(config.redis_sentinel_service, "links");
    assert_eq!(config.redis_wait_replicas, 2);
    assert_eq!(config.redis_wait_timeout, Duration::from_millis(250));
    assert!(
        !format!("{config:?}").contains(":pw@"),
        "sentinel passwords stay out of logs"
    );

    // `check-config` names an address that is not one.
    let cli = shortlink_sidecar::config_file::parse_from([
        "shortlink-sidecar",
        "--redis-sentinels",
        "10.0.0.1:26379,10.0.0.2:notaport",
    ])
    .expect("flags parse");
    let problems: Vec<String> = shortlink_sidecar::cli::config_problems(&cli.config)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("--redis-sentinels") && p.contains("notaport")),
        "{problems:?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("10.0.0.1:26379")),
        "{problems:?}"
    );
}

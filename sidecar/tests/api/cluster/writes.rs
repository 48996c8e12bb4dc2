//! Creates, a batch, an update and a revoke on a cluster: each record on the primary that owns
//! its slot (found by the test from `CLUSTER NODES`), as SQL has it; every slot's marker set.

use super::*;
use crate::helpers::{batch_answer, eventually, API_KEY};
use crate::sentinel::client;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// Revokes `code` through `sidecar`'s API (panics unless 200).
async fn revoke(http: &reqwest::Client, sidecar: &Sidecar, code: &str) {
    let response = http
        .delete(format!("{}/api/v1/links/{code}", sidecar.address))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_land_on_the_owning_primary_and_every_slot_gets_its_marker() {
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let http = client();

    let mut codes = create(&sidecar, 12, "t").await;
    let items: Vec<Value> = (0..40)
        .map(|i| json!({ "url": format!("https://b.example/{i}") }))
        .collect();
    let body = batch_answer(
        http.post(format!("{}/api/v1/links/batch", sidecar.address))
            .bearer_auth(API_KEY)
            .json(&items),
    )
    .await;
    for result in body["results"].as_array().unwrap() {
        codes.push(result["link"]["code"].as_str().unwrap().to_owned());
    }
    assert_eq!(codes.len(), 52, "{body}");

    let patched = &codes[0];
    let response = http
        .patch(format!("{}/api/v1/links/{patched}", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!({ "url": "https://t.example/moved", "redirect": 308 }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let revoked = &codes[13];
    revoke(&http, &sidecar, revoked).await;

    let mut owners = BTreeSet::new();
    for code in &codes {
        let link = sidecar.storage.link_by_code(code).await.unwrap().unwrap();
        let (owner, record) = record_on_owner(&cluster, code);
        assert_eq!(
            record,
            String::from_utf8(encode_record(&link, RecordWorkspace::DEFAULT)).unwrap(),
            "{code} on its owner, node {owner}"
        );
        owners.insert(owner);
    }
    assert_eq!(owners.len(), 3, "52 links spread over the 3 primaries");
    assert!(record_on_owner(&cluster, patched)
        .1
        .contains("https://t.example/moved"));
    assert_eq!(
        record_on_owner(&cluster, revoked).1,
        shortlink_core::projection::TOMBSTONE
    );

    // The keeper set every slot's marker, each on the primary serving its slot.
    assert!(
        eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await,
        "markers on the primaries: {}",
        markers_on_primaries(&cluster)
    );
    for primary in cluster.primaries() {
        let marker = cluster.nodes()[primary]
            .cli_raw(&["KEYS", "sl:meta:projection:*"])
            .lines()
            .next()
            .unwrap()
            .to_owned();
        assert_eq!(cluster.owner_of(key_slot(marker.as_bytes())), Some(primary));
    }
}

/// Preview cards (issue 35) on a cluster: each card key is written, replaced and removed on the
/// primary owning its own slot, which is often not its record's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_land_on_the_primary_owning_their_own_slot() {
    use shortlink_wire::keys::preview_key;
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let http = client();
    let card = json!({"title": "T", "description": "D", "image": "https://i.example/a.png"});
    let items: Vec<Value> = (0..24)
        .map(|i| json!({ "url": format!("https://c.example/{i}"), "preview": card }))
        .collect();
    let body: Value = http
        .post(format!("{}/api/v1/links/batch", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&items)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let codes: Vec<String> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| {
            result["link"]["code"]
                .as_str()
                .unwrap_or_else(|| panic!("{result}"))
                .to_owned()
        })
        .collect();
    let card_on_owner = |code: &str| {
        let key = preview_key(code);
        let owner = cluster.owner_of(key_slot(key.as_bytes())).unwrap();
        (owner, cluster.nodes()[owner].cli_raw(&["EXISTS", &key]))
    };
    let mut apart = 0;
    for code in &codes {
        let (owner, exists) = card_on_owner(code);
        assert_eq!(exists, "1", "{code}'s card on its owner, node {owner}");
        apart += usize::from(owner != record_on_owner(&cluster, code).0);
    }
    assert!(
        apart > 0,
        "some cards live on another primary than their record"
    );

    let (removed, revoked) = (&codes[0], &codes[1]);
    let response = http
        .patch(format!("{}/api/v1/links/{removed}", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!({ "preview": null }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    revoke(&http, &sidecar, revoked).await;
    assert_eq!(card_on_owner(removed).1, "0");
    assert_eq!(card_on_owner(revoked).1, "0");
}

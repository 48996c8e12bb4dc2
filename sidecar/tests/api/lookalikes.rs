//! Look-alikes of a workspace's own domains (issue 79): a punycode or confusable host imitating
//! one of the short domains the issuing list names in the caller's workspace is refused at create
//! (422 `unsafe_target`, feed `lookalike`), as the operator's `--threat-brand-hosts` are; another
//! workspace's domains do not concern it.

use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use serde_json::{json, Value};

/// The issuing list as nginx sends it: each workspace's part, and every domain.
const LISTS: &str = "https://s1.example [brand-a] https://mybrand.example \
                     [brand-b] https://shop-b.example";
const ALL: &str = "s1.example mybrand.example shop-b.example";

/// Creates `url` with `key` through nginx's headers: the answer's status and error code.
async fn create(app: &TestApp, key: &str, url: &str) -> (u16, Value) {
    let answer = with_key(app, key, reqwest::Method::POST, "/links")
        .header("X-Shortlink-Public-Base", LISTS)
        .header("X-Shortlink-Pool", ALL)
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

#[tokio::test]
async fn a_look_alike_of_the_workspaces_own_domain_is_refused_and_anothers_is_not_its_concern() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "issuer").await;
    let b = workspace_key(&app, &operator, "brand-b", "issuer").await;
    // The list arrives with a first request, as nginx sends it with every one.
    assert_eq!(create(&app, &a, "https://shop.example/").await.0, 201);

    // A Cyrillic `а` (punycode) and `rn` for `m`: A's own domain imitated.
    for imitation in [
        "https://mybr\u{430}nd.example/",
        "https://login.rnybrand.example/",
    ] {
        let (status, body) = create(&app, &a, imitation).await;
        assert_eq!(status, 422, "{imitation}: {body}");
        assert_eq!(body["error"]["code"], "unsafe_target");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("\"lookalike\""), "{message}");
        assert!(message.contains("\"mybrand.example\""), "{message}");
    }
    // An imitation of B's domain is not A's concern.
    assert_eq!(create(&app, &a, "https://shop-b.exarnple/").await.0, 201);
    // B's imitation is refused for B.
    let (status, body) = create(&app, &b, "https://shop-b.exarnple/").await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("shop-b.example"));
    // Nothing of the refused stored.
    assert_eq!(app.stored().await.links, 2);
}

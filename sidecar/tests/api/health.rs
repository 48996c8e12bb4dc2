//! Health endpoints and the OpenAPI document.

use crate::helpers::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let app = spawn_app(Backend::Sqlite).await;
    let response = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    let response = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"status": "ready", "database": "ok", "redis": "ok"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_describes_the_api() {
    let app = spawn_app(Backend::Sqlite).await;
    let response = app
        .api(reqwest::Method::GET, "/openapi.json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/api/v1/links", &["get", "post"][..]),
        ("/api/v1/links/{code}", &["get", "patch", "delete"][..]),
        ("/api/v1/resolve/{code}", &["get"][..]),
        ("/healthz", &["get"][..]),
        ("/readyz", &["get"][..]),
    ] {
        for method in methods {
            assert!(
                paths[path][method].is_object(),
                "{method} {path} documented"
            );
        }
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for schema in [
        "CreateLinkRequest",
        "UpdateLinkRequest",
        "LinkView",
        "LinkPage",
        "ErrorBody",
    ] {
        assert!(schemas.contains_key(schema), "schema {schema}");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["api_key"]["scheme"],
        "bearer"
    );
    // What the schema must say for every request it calls valid to be accepted (issue 32).
    for request in ["CreateLinkRequest", "UpdateLinkRequest"] {
        assert_eq!(
            schemas[request]["properties"]["redirect"]["enum"],
            serde_json::json!([301, 302, 307, 308, null]),
            "{request}"
        );
    }
    // The byte bounds a schema cannot state, named beside the field for the contract test's
    // hooks (`tests/contract/hooks.py`), from the validator's own constants.
    let create = &schemas["CreateLinkRequest"]["properties"];
    assert_eq!(
        create["campaign"]["x-max-bytes"],
        shortlink_model::schema::MAX_META_LEN,
        "{create}"
    );
    assert_eq!(
        create["tags"]["items"]["x-max-bytes"],
        shortlink_model::schema::MAX_TAG_LEN
    );
    assert_eq!(
        create["url"]["x-max-normalised-bytes"],
        shortlink_model::schema::MAX_URL_LENGTH
    );
    // The stats range's bound, a rule between two values, named on each stats operation.
    for path in ["/api/v1/stats", "/api/v1/links/{code}/stats"] {
        let operation = &doc["paths"][path]["get"];
        assert_eq!(
            operation["x-max-intervals"],
            shortlink_api::stats::MAX_POINTS,
            "{path}"
        );
    }
    let update = &schemas["UpdateLinkRequest"];
    assert_eq!(update["minProperties"], 1, "{update}");
    assert!(update.get("maxProperties").is_none(), "{update}");
    assert_eq!(
        schemas["State"]["enum"],
        serde_json::json!([
            "unknown",
            "healthy",
            "degraded",
            "suspected-blocked",
            "unreachable"
        ])
    );
}

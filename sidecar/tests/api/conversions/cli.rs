//! `shortlink-sidecar conversions import <file>`: the API's path from a file, idempotent when
//! run again, failing (after every line) when a line is refused.

use super::*;

#[tokio::test]
async fn conversions_import_records_a_file_once() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = link(&app, "spring", "r-1").await;
    store(&app, &[first_click(&code)]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversions.ndjson");
    let lines = [
        json!({"click_id": "1700000000001-0", "name": "purchase", "value": "3.10", "currency": "EUR", "event_id": "f-1"}),
        json!({"code": code, "ref": "r-1", "name": "lead", "event_id": "f-2"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n") + "\n").unwrap();
    let path = file.to_str().unwrap();
    app.run_cli(&["conversions", "import", path]).await;
    assert_eq!(conversion_rows(&app).await, 2);
    // Again: every line a duplicate, nothing added.
    app.run_cli(&["conversions", "import", path]).await;
    assert_eq!(conversion_rows(&app).await, 2);
    // A refused line fails the run, after the others went in.
    std::fs::write(
        &file,
        [
            json!({"click_id": "1700000000009-0", "name": "lead", "event_id": "f-3"}).to_string(),
            json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "f-4"}).to_string(),
        ]
        .join("\n"),
    )
    .unwrap();
    let cli = app.cli(&["conversions", "import", path]);
    let error = shortlink_sidecar::cli::run(cli).await.unwrap_err();
    assert!(
        error.to_string().contains("1 of 2 conversions refused"),
        "{error}"
    );
    assert_eq!(conversion_rows(&app).await, 3);
}

//! Files: the generic CSV (collisions, codes kept as they are, a code of our generated shape,
//! --dry-run, a second run), Shlink's and Bitly's CSV exports.

use super::{fixture, import, link_row, skipped};
use crate::helpers::*;
use crate::on_each_backend;
use serde_json::{json, Value};

on_each_backend!(
    an_import_runs_twice_on_every_backend,
    issuer_skips_an_imported_code_of_our_shape
);

/// The import's own table on each backend: recorded, read back (a second run finds every link
/// already imported), the visit total raised once; the codes' case kept.
async fn an_import_runs_twice_on_every_backend(backend: Backend) {
    let app = spawn_app(backend).await;
    let dir = testkit::temp_dir();
    let file = write(
        &dir,
        "links.csv",
        "code,url,domain,visits,tags\n\
         Ab,https://old.example/upper,s.old.example,7,x|y\n\
         ab,https://old.example/lower,s.old.example,0,\n\
         x.y~,https://old.example/dot,t.old.example,2,\n",
    );
    for run in 0..2 {
        let (outcome, report) = import(&app, &["--from", "csv", &file]).await;
        outcome.unwrap();
        let (imported, already) = if run == 0 { (3, 0) } else { (0, 3) };
        assert_eq!(report["imported"], imported, "{report}");
        assert_eq!(skipped(&report, "already_imported"), already, "{report}");
    }
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM imported_links").await,
        3
    );
    let upper: Value = app.get_json("/links/Ab").await;
    assert_eq!(upper["url"], "https://old.example/upper");
    assert_eq!(upper["visit_count"], 7);
    assert_eq!(upper["tags"], json!(["x", "y"]));
    let lower: Value = app.get_json("/links/ab").await;
    assert_eq!(lower["url"], "https://old.example/lower");
    assert_eq!(app.get_json("/links/x.y~").await["visit_count"], 2);
    assert!(app.redis_record("x.y~").await.is_some());
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The sequence number our issuer hands out next (nothing leased yet on a fresh app).
async fn next_sequence(app: &TestApp) -> u64 {
    app.db
        .scalar("SELECT next_value FROM sequence_blocks WHERE name = 'links'")
        .await as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_csv_keeps_codes_and_reports_collisions() {
    let app = spawn_app(Backend::Sqlite).await;
    let ours = app
        .create(json!({"url": "https://ours.example/", "code": "promo-x"}))
        .await;
    assert_eq!(ours["code"], "promo-x");
    let dir = testkit::temp_dir();
    let file = write(
        &dir,
        "links.csv",
        "code,url,domain,created_at,expires_at,title,tags,visits\n\
         a,https://old.example/one-char,s.old.example,2021-01-01T00:00:00Z,,One,x;y,3\n\
         AbC,https://old.example/upper,s.old.example,2021-01-02T00:00:00Z,,,,0\n\
         abc,https://old.example/lower,s.old.example,2021-01-03T00:00:00Z,,,,0\n\
         x.y~z,https://old.example/dot-tilde,s.old.example,2021-01-04T00:00:00Z,2031-01-01T00:00:00Z,,,0\n\
         promo-x,https://old.example/collides-with-ours,s.old.example,,,,,0\n\
         a,https://old.example/again,t.old.example,,,,,0\n\
         a/b,https://old.example/slash,s.old.example,,,,,0\n\
         bad-url,javascript:alert(1),s.old.example,,,,,0\n\
         no-time,https://old.example/t,s.old.example,yesterday,,,,0\n",
    );
    let stored_before = app.stored().await;
    let (outcome, dry) = import(&app, &["--from", "csv", &file, "--dry-run"]).await;
    outcome.unwrap();
    assert_eq!(dry["imported"], 4, "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        app.stored().await,
        stored_before,
        "a dry run writes nothing"
    );

    let (outcome, report) = import(&app, &["--from", "csv", &file]).await;
    outcome.unwrap();
    assert_eq!(report["read"], 9, "{report}");
    assert_eq!(report["imported"], 4, "{report}");
    assert_eq!(skipped(&report, "collision"), 2, "{report}");
    assert_eq!(skipped(&report, "invalid_code"), 1, "{report}");
    assert_eq!(skipped(&report, "invalid"), 1, "{report}");
    assert_eq!(skipped(&report, "unreadable"), 1, "{report}");
    let problems: Vec<(String, String)> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["code"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        problems.contains(&("promo-x".into(), "collision".into())),
        "{problems:?}"
    );
    assert!(
        problems.contains(&("a".into(), "collision".into())),
        "{problems:?}"
    );

    // Kept exactly: one character, case, `.` and `~`; ours untouched.
    assert_eq!(
        link_row(&app, "a").await.unwrap(),
        ("https://old.example/one-char".into(), 0, 3)
    );
    assert_eq!(
        link_row(&app, "AbC").await.unwrap().0,
        "https://old.example/upper"
    );
    assert_eq!(
        link_row(&app, "abc").await.unwrap().0,
        "https://old.example/lower"
    );
    assert_eq!(
        link_row(&app, "x.y~z").await.unwrap().0,
        "https://old.example/dot-tilde"
    );
    assert_eq!(
        link_row(&app, "promo-x").await.unwrap().0,
        "https://ours.example/"
    );
    for code in ["a", "AbC", "abc", "x.y~z"] {
        assert!(
            app.redis_record(code).await.is_some(),
            "{code} written through to Redis"
        );
    }
    assert_eq!(app.resolve("x.y~z").await.status(), 302);
    assert_eq!(app.resolve("a").await.status(), 302);

    // Listed one by one: a cursor can stand on an imported code (`x.y~z`).
    let mut listed = Vec::new();
    let mut path = "/links?limit=1".to_owned();
    loop {
        let page: Value = app.get_json(&path).await;
        listed.extend(
            page["links"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["code"].clone()),
        );
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        path = format!("/links?limit=1&cursor={cursor}");
    }
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(listed.contains(&json!("x.y~z")), "{listed:?}");

    // A second run: nothing changes.
    let stored = app.stored().await;
    let (outcome, again) = import(&app, &["--from", "csv", &file]).await;
    outcome.unwrap();
    assert_eq!(again["imported"], 0, "{again}");
    assert_eq!(skipped(&again, "already_imported"), 4, "{again}");
    assert_eq!(app.stored().await, stored);

    // Another source's link on a code imported from the CSV is a collision, not an overwrite.
    let other = write(
        &dir,
        "other.csv",
        "code,url,domain\nAbC,https://elsewhere.example/,u.old.example\n",
    );
    let (outcome, report) = import(&app, &["--from", "csv", &other]).await;
    outcome.unwrap();
    assert_eq!(skipped(&report, "collision"), 1, "{report}");
    assert_eq!(
        link_row(&app, "AbC").await.unwrap().0,
        "https://old.example/upper"
    );
}

/// An imported code that is exactly the code our issuer hands out next (a Bitly code has our
/// shape and a valid check 1 time in 62): kept, and the issuer skips it, for a single create and
/// for a batch.
async fn issuer_skips_an_imported_code_of_our_shape(backend: Backend) {
    for batch in [false, true] {
        let app = spawn_app(backend).await;
        let next = next_sequence(&app).await;
        let taken: Vec<String> = (next..next + 3)
            .map(|n| app.scheme.encode(n).unwrap())
            .collect();
        assert_eq!(
            app.scheme.shape(taken[0].as_bytes()),
            shortcode::Shape::Generated
        );
        let dir = testkit::temp_dir();
        let rows: String = taken
            .iter()
            .map(|code| format!("{code},https://bitly-era.example/{code},bit.ly\n"))
            .collect();
        let file = write(&dir, "bitly.csv", &format!("code,url,domain\n{rows}"));
        let (outcome, report) = import(&app, &["--from", "csv", &file]).await;
        outcome.unwrap();
        assert_eq!(report["imported"], 3, "{report}");
        // The sequence did not move to the imported codes' numbers (nor past them).
        assert_eq!(next_sequence(&app).await, next);

        let codes: Vec<String> = if batch {
            let items: Vec<Value> = (0..5)
                .map(|i| json!({"url": format!("https://new.example/{i}")}))
                .collect();
            let response = app.post_batch(&items).await;
            assert_eq!(response.status(), 200);
            let body: Value = response.json().await.unwrap();
            body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r["link"]["code"]
                        .as_str()
                        .expect("every item created")
                        .to_owned()
                })
                .collect()
        } else {
            let mut codes = Vec::new();
            for i in 0..5 {
                let link = app
                    .create(json!({"url": format!("https://new.example/{i}")}))
                    .await;
                codes.push(link["code"].as_str().unwrap().to_owned());
            }
            codes
        };
        for code in &codes {
            assert!(
                !taken.contains(code),
                "issued {code}, an imported code (batch: {batch})"
            );
        }
        // The next numbers after the imported ones, in some order.
        let mut want: Vec<String> = (next + 3..next + 8)
            .map(|n| app.scheme.encode(n).unwrap())
            .collect();
        let mut got = codes.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "batch: {batch}");
        for code in &taken {
            let link: Value = app.get_json(&format!("/links/{code}")).await;
            assert_eq!(link["url"], format!("https://bitly-era.example/{code}"));
        }
    }
}

/// `export` then `import` (a restore onto a fresh database) keeps imported codes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_codes_survive_export_and_import() {
    let app = spawn_app(Backend::Sqlite).await;
    let dir = testkit::temp_dir();
    let file = write(
        &dir,
        "links.csv",
        "code,url,domain\nq,https://old.example/q,s.old.example\nx.y~z,https://old.example/dot,s.old.example\n",
    );
    let (outcome, _) = import(&app, &["--from", "csv", &file]).await;
    outcome.unwrap();
    let export = dir.path().join("export.csv");
    app.run_cli(&["export", "--output", export.to_str().unwrap()])
        .await;

    let restored = spawn_app(Backend::Sqlite).await;
    restored
        .run_cli(&["import", export.to_str().unwrap()])
        .await;
    assert_eq!(
        link_row(&restored, "q").await.unwrap().0,
        "https://old.example/q"
    );
    assert_eq!(
        link_row(&restored, "x.y~z").await.unwrap().0,
        "https://old.example/dot"
    );
    assert_eq!(restored.resolve("x.y~z").await.status(), 302);
    // Not through the public API's alias rule, though.
    let response = restored
        .post_link(&json!({"url": "https://new.example/", "code": "n.ew"}))
        .await;
    assert_eq!(response.status(), 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shlink_and_bitly_csv_exports_are_read() {
    let app = spawn_app(Backend::Sqlite).await;
    let shlink = fixture("shlink-export.csv");
    let (outcome, report) = import(&app, &["--from", "shlink", shlink.to_str().unwrap()]).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 2, "{report}");
    let (target, flags, visits) = link_row(&app, "csv-one").await.unwrap();
    assert_eq!(
        (target.as_str(), flags & 1, visits),
        ("https://shop.example/csv-one", 1, 12)
    );
    assert!(link_row(&app, "q").await.is_some(), "a one-character code");
    let link: Value = app.get_json("/links/csv-one").await;
    assert_eq!(link["tags"], json!(["a", "b"]));

    let bitly = fixture("bitly-export.csv");
    let (outcome, report) = import(&app, &["--from", "bitly", bitly.to_str().unwrap()]).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 2, "{report}");
    let (target, flags, visits) = link_row(&app, "Bx7kQ2").await.unwrap();
    assert_eq!(
        (target.as_str(), flags & 1, visits),
        ("https://brand.example/csv", 1, 40)
    );
    let domains = app
        .db
        .texts("SELECT domain FROM imported_links WHERE source = 'bitly' ORDER BY code")
        .await;
    assert_eq!(domains, ["bit.ly", "bit.ly"]);
}

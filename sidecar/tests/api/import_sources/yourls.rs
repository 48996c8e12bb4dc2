//! YOURLS 1.9 from its database: a real MariaDB (testkit) loaded with YOURLS's own schema
//! (yourls-install.php, 1.9), its click log read visit by visit.

use super::{import, link_row, skipped};
use crate::helpers::*;
use sqlx::mysql::MySqlPoolOptions;

const ROWS: [&str; 2] = [
    "INSERT INTO yourls_url (keyword, url, title, timestamp, ip, clicks) VALUES
        ('1', 'https://yourls-target.example/one', 'One', '2019-04-01 10:00:00', '203.0.113.9', 2),
        ('Promo', 'https://yourls-target.example/promo?a=1', 'Promo page', '2019-05-01 11:00:00', '203.0.113.9', 40),
        ('promo', 'https://yourls-target.example/lower', '', '2019-05-02 12:00:00', '203.0.113.9', 0),
        ('bad key', 'https://yourls-target.example/space', '', '2019-05-03 12:00:00', '203.0.113.9', 0)",
    "INSERT INTO yourls_log (click_time, shorturl, referrer, user_agent, ip_address, country_code) VALUES
        ('2019-04-02 08:00:00', '1', 'direct', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/74.0.3729.169 Safari/537.36', '198.51.100.7', 'FR'),
        ('2019-04-03 09:30:00', '1', 'https://t.co/abc', 'Mozilla/5.0 (iPhone; CPU iPhone OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1 Mobile/15E148 Safari/604.1', '198.51.100.8', 'BE'),
        ('2019-05-03 10:00:00', 'Promo', 'direct', 'Mozilla/5.0 (X11; Linux x86_64; rv:66.0) Gecko/20100101 Firefox/66.0', '198.51.100.9', '')",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yourls_database_links_and_log_are_kept() {
    let yourls = testkit::mariadb().fresh_database_url();
    let pool = MySqlPoolOptions::new().connect(&yourls).await.unwrap();
    for sql in testkit::yourls::SCHEMA.iter().chain(&ROWS) {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let app = spawn_app(Backend::Sqlite).await;
    let args = [
        "--from",
        "yourls",
        "--source-database",
        &yourls,
        "--source-domain",
        "y.old.example",
        "--page-size",
        "2",
    ];
    let (outcome, report) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(report["read"], 4, "{report}");
    assert_eq!(report["imported"], 3, "{report}");
    assert_eq!(skipped(&report, "invalid_code"), 1, "{report}");
    assert_eq!(report["visits_imported"], 3, "{report}");

    // `Promo` and `promo` are two links (YOURLS's keyword is binary); YOURLS does not forward.
    assert_eq!(
        link_row(&app, "Promo").await.unwrap(),
        ("https://yourls-target.example/promo?a=1".into(), 0, 40)
    );
    assert_eq!(
        link_row(&app, "promo").await.unwrap().0,
        "https://yourls-target.example/lower"
    );
    assert_eq!(link_row(&app, "1").await.unwrap().2, 2);
    let link: serde_json::Value = app.get_json("/links/Promo").await;
    assert_eq!(link["redirect"], 301);
    assert_eq!(link["created_at"], "2019-05-01T11:00:00Z");
    let countries = app
        .db
        .texts("SELECT country FROM visits WHERE code = '1' ORDER BY visited_at")
        .await;
    assert_eq!(countries, ["FR", "BE"]);
    let referrers = app
        .db
        .texts("SELECT referrer_host FROM visits WHERE referrer_host IS NOT NULL")
        .await;
    assert_eq!(referrers, ["t.co"]);
    let domains = app
        .db
        .texts("SELECT DISTINCT domain FROM imported_links")
        .await;
    assert_eq!(domains, ["y.old.example"]);

    // Interrupted after the links, before the visits: the next run stores only what is missing.
    app.db
        .execute("DELETE FROM visits WHERE code = 'Promo'")
        .await;
    let (outcome, again) = import(&app, &args).await;
    outcome.unwrap();
    assert_eq!(again["imported"], 0, "{again}");
    assert_eq!(skipped(&again, "already_imported"), 3, "{again}");
    assert_eq!(again["visits_imported"], 1, "{again}");
}

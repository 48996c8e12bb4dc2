//! Feeds served by a local HTTP server in their public formats: loaded, refreshed with
//! conditional requests, held back when they shrink, and a million entries measured.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use shortlink_threats::feed::Spec;
use shortlink_threats::{Refusal, Settings, Threats};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One feed file, its version in the ETag, and how many requests were answered 304.
#[derive(Default)]
struct Served {
    body: Mutex<(u32, String)>,
    not_modified: AtomicUsize,
}

async fn serve(served: Arc<Served>) -> String {
    let app = Router::new().route(
        "/feed",
        get(move |headers: HeaderMap| {
            let served = served.clone();
            async move {
                let (version, body) = served.body.lock().unwrap().clone();
                let etag = format!("\"v{version}\"");
                if headers
                    .get(header::IF_NONE_MATCH)
                    .and_then(|v| v.to_str().ok())
                    == Some(&etag)
                {
                    served.not_modified.fetch_add(1, Ordering::SeqCst);
                    return StatusCode::NOT_MODIFIED.into_response();
                }
                ([(header::ETAG, etag)], body).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/feed")
}

fn threats(specs: &[String], brands: &[&str]) -> Threats {
    let settings = Settings {
        feeds: specs
            .iter()
            .map(|spec| spec.parse::<Spec>().unwrap())
            .collect(),
        refresh_every: Duration::from_secs(60),
        max_bytes: 64 << 20,
        shorteners: vec!["short.corp.example".into()],
        brand_hosts: brands.iter().map(|b| b.to_string()).collect(),
    };
    Threats::new(settings, client(), None)
}

/// Plain HTTP only; reqwest is built without a TLS provider of its own.
fn client() -> reqwest::Client {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .unwrap()
}

fn refused(feed: &str, entry: &str) -> Option<Refusal> {
    Some(Refusal {
        feed: feed.into(),
        entry: entry.into(),
    })
}

const URLHAUS: &str = "# abuse.ch URLhaus Database Dump (CSV - recent URLs only)\n\
# id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter\n\
\"3210001\",\"2026-11-28 10:00:04\",\"http://malware.example/bin.sh\",\"online\",\"\",\"malware_download\",\"elf\",\"https://urlhaus.abuse.ch/url/3210001/\",\"r\"\n";

#[tokio::test]
async fn feeds_refuse_their_entries_and_refresh_only_when_changed() {
    let served = Arc::new(Served::default());
    *served.body.lock().unwrap() = (1, URLHAUS.to_owned());
    let url = serve(served.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.txt");
    std::fs::write(&hosts, "0.0.0.0 phish.example\n||ads.example^\n").unwrap();
    let threats = threats(
        &[
            format!("urlhaus=urlhaus-csv:{url}"),
            format!("corp=hosts:{}", hosts.display()),
        ],
        &["mybank.example"],
    );
    assert_eq!(threats.refresh().await, ["urlhaus", "corp"]);
    assert_eq!(
        threats.check("http://malware.example/bin.sh"),
        refused("urlhaus", "http://malware.example/bin.sh")
    );
    assert_eq!(threats.check("http://malware.example/other"), None);
    assert_eq!(
        threats.check("https://login.phish.example/x"),
        refused("corp", "phish.example")
    );
    assert_eq!(
        threats.check("https://bit.ly/abc"),
        refused("shorteners", "bit.ly")
    );
    assert_eq!(
        threats.check("https://short.corp.example/abc"),
        refused("shorteners", "short.corp.example")
    );
    assert_eq!(
        threats.check(&format!(
            "https://{}/",
            shortlink_threats::normalize::host("mybаnk.example").unwrap()
        )),
        refused("lookalike", "mybank.example")
    );
    assert_eq!(threats.check("https://mybank.example/"), None);

    // Nothing changed: one 304, and the file's unchanged modification time.
    assert!(threats.refresh().await.is_empty());
    assert_eq!(served.not_modified.load(Ordering::SeqCst), 1);

    // A new entry is picked up on the next refresh.
    let added = format!(
        "{URLHAUS}\"3210002\",\"2026-11-28 11:00:00\",\"https://new.example/p\",\"online\",\"\",\"malware_download\",\"\",\"\",\"r\"\n"
    );
    *served.body.lock().unwrap() = (2, added);
    assert_eq!(threats.refresh().await, ["urlhaus"]);
    assert_eq!(
        threats.check("https://new.example/p"),
        refused("urlhaus", "https://new.example/p")
    );
    assert!(threats.lists("urlhaus", "https://new.example/p"));
}

#[tokio::test]
async fn a_feed_that_shrinks_by_more_than_half_is_held_back() {
    let served = Arc::new(Served::default());
    let list: String = (0..10)
        .map(|i| format!("https://p{i}.example/x\n"))
        .collect();
    *served.body.lock().unwrap() = (1, list);
    let url = serve(served.clone()).await;
    let threats = threats(&[format!("openphish=urls:{url}")], &[]);
    assert_eq!(threats.refresh().await, ["openphish"]);
    *served.body.lock().unwrap() = (2, "https://p0.example/x\n".into());
    assert!(threats.refresh().await.is_empty());
    // The previous copy still answers.
    assert_eq!(
        threats.check("https://p9.example/x"),
        refused("openphish", "https://p9.example/x")
    );
}

#[tokio::test]
async fn a_million_entries_load_and_answer_in_microseconds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("million.txt");
    let body: String = (0..1_000_000)
        .map(|i| format!("0.0.0.0 host{i}.bad{}.example\n", i % 997))
        .collect();
    std::fs::write(&path, body).unwrap();
    let threats = threats(&[format!("big=hosts:{}", path.display())], &[]);
    let started = Instant::now();
    assert_eq!(threats.refresh().await, ["big"]);
    let load = started.elapsed();
    assert_eq!(threats.feeds(), [("big".to_string(), 1_000_000)]);
    let lookups = 100_000;
    let started = Instant::now();
    let mut hits = 0;
    for i in 0..lookups {
        let target = format!("https://www.host{i}.bad{}.example/path?q=1", i % 997);
        hits += usize::from(threats.check(&target).is_some());
    }
    let per_lookup = started.elapsed() / lookups as u32;
    assert_eq!(hits, lookups);
    println!(
        "1M-entry hosts feed: loaded in {load:?}, {} MB of hashes, {per_lookup:?} per check \
         (the URL, its host and 2 parents, the shorteners)",
        1_000_000 * 8 / (1 << 20)
    );
}

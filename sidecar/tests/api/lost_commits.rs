//! A commit whose answer never reaches the sidecar: the database took it (or not), then the
//! connection dropped. The sidecar reads the outcome back instead of guessing, so a link is never
//! left in SQL without its Redis record (a retried create would hand out a code answering 404),
//! nor in Redis without its row.
//!
//! A proxy between the sidecar and the database cuts the connection of the transaction that
//! carries a marker, either after the server answered its COMMIT or before the COMMIT reached it.

use crate::helpers::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_answer_is_read_back_on_postgres() {
    a_lost_commit_answer_is_read_back(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_answer_is_read_back_on_mariadb() {
    a_lost_commit_answer_is_read_back(Backend::Mariadb).await
}

const MARKER: &str = "lost-commit";

async fn a_lost_commit_answer_is_read_back(backend: Backend) {
    let dir = testkit::temp_dir();
    let direct = backend.fresh_database_url(dir.path());
    let proxy = CommitCutter::start(&direct).await;
    let app = spawn_app_at(backend, proxy.url.clone(), dir, &[]).await;
    let direct_db = TestDb::connect(backend, &direct).await;
    let target_in_sql = |code: &str| {
        let sql = format!("SELECT target FROM links WHERE code = '{code}'");
        let db = &direct_db;
        async move { db.texts(&sql).await }
    };

    // Taken by the server, answer lost: the create stands, in both stores.
    proxy.arm(Cut::AfterCommit);
    let response = app
        .post_link(&json!({"url": "https://a.example/", "code": format!("{MARKER}-a")}))
        .await;
    assert_eq!(proxy.cuts(), 1, "the commit was cut");
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let code = format!("{MARKER}-a");
    assert_eq!(target_in_sql(&code).await, ["https://a.example/"]);
    assert_eq!(
        app.redis_get(&code).await.as_deref(),
        Some("1|L|302|0|0|https://a.example/")
    );

    // The same for a change of target: Redis keeps the new record SQL holds.
    proxy.arm(Cut::AfterCommit);
    let response = app
        .patch_link(
            &code,
            &json!({"url": format!("https://b.example/{MARKER}")}),
        )
        .await;
    assert_eq!(proxy.cuts(), 2, "the commit was cut");
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let moved = format!("https://b.example/{MARKER}");
    assert_eq!(target_in_sql(&code).await, [moved.as_str()]);
    assert_eq!(
        app.redis_get(&code).await,
        Some(format!("1|L|302|0|0|{moved}"))
    );

    // A batch whose commit was taken: every link of it answers.
    proxy.arm(Cut::AfterCommit);
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"url": format!("https://c.example/{i}"), "code": format!("{MARKER}-c{i}")}))
        .collect();
    let response = app.post_batch(&items).await;
    assert_eq!(response.status(), 200);
    // The answer streams: it ends once the group is committed.
    let body = response.text().await.unwrap();
    assert_eq!(proxy.cuts(), 3, "the commit was cut");
    for i in 0..3 {
        let code = format!("{MARKER}-c{i}");
        let target = format!("https://c.example/{i}");
        assert_eq!(target_in_sql(&code).await, [target.as_str()], "{body}");
        assert_eq!(
            app.redis_get(&code).await,
            Some(format!("1|L|302|0|0|{target}")),
            "{body}"
        );
    }

    // Never reached the server: rolled back there, so nothing stays in Redis either.
    proxy.arm(Cut::BeforeCommit);
    let response = app
        .post_link(&json!({"url": "https://d.example/", "code": format!("{MARKER}-d")}))
        .await;
    assert_eq!(proxy.cuts(), 4, "the commit was cut");
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "database_unavailable", "{body}");
    let code = format!("{MARKER}-d");
    assert!(target_in_sql(&code).await.is_empty());
    assert_eq!(app.redis_get(&code).await, None);
    // And the sidecar goes on.
    app.create(json!({"url": "https://e.example/"})).await;
}

#[derive(Clone, Copy)]
#[repr(u8)]
enum Cut {
    Disarmed = 0,
    /// The COMMIT goes through and the server's answer is swallowed.
    AfterCommit = 1,
    /// The connection drops instead of sending the COMMIT.
    BeforeCommit = 2,
}

/// A TCP proxy in front of a database that cuts, once per [`CommitCutter::arm`], the connection
/// whose transaction sent [`MARKER`], at its COMMIT.
struct CommitCutter {
    /// The database URL through the proxy.
    url: String,
    armed: Arc<AtomicU8>,
    cuts: Arc<AtomicUsize>,
}

impl CommitCutter {
    async fn start(database_url: &str) -> Self {
        let mut url = url::Url::parse(database_url).unwrap();
        let upstream = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        url.set_port(Some(listener.local_addr().unwrap().port()))
            .unwrap();
        let armed = Arc::new(AtomicU8::new(Cut::Disarmed as u8));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (armed_, cuts_) = (armed.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, armed_.clone(), cuts_.clone()));
            }
        });
        CommitCutter {
            url: url.into(),
            armed,
            cuts,
        }
    }

    fn arm(&self, cut: Cut) {
        self.armed.store(cut as u8, Ordering::SeqCst);
    }

    fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

/// One connection: bytes both ways, until a cut drops both sockets.
async fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    armed: Arc<AtomicU8>,
    cuts: Arc<AtomicUsize>,
) {
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let swallow = AtomicU8::new(0);
    let up = async {
        let mut buffer = vec![0; 64 * 1024];
        let mut marked = false;
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let chunk = &buffer[..n];
            // A transaction begins unmarked (an earlier statement outside one does not count).
            if contains(chunk, b"BEGIN") || contains(chunk, b"START TRANSACTION") {
                marked = false;
            }
            marked |= contains(chunk, MARKER.as_bytes());
            if marked && contains(chunk, b"COMMIT") {
                marked = false;
                let cut = armed.swap(Cut::Disarmed as u8, Ordering::SeqCst);
                if cut == Cut::BeforeCommit as u8 {
                    cuts.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                if cut == Cut::AfterCommit as u8 {
                    swallow.store(1, Ordering::SeqCst);
                }
            }
            if server_write.write_all(chunk).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            // The server answered the COMMIT: it is taken, and its answer is lost.
            if swallow.load(Ordering::SeqCst) == 1 {
                cuts.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

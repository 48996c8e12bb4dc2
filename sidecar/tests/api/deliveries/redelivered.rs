//! Receipts survive a callback URL that fails for a while (issue 77): Kannel's smsbox, set as
//! `deploy/kannel/kannel.conf` sets it (`http-request-retry`, `http-queue-delay`), tries a
//! report's `dlr-url` again after a failed fetch. A front stands where nginx would: it answers the
//! job's ping, fails the first reports' fetches as a restarting nginx or sidecar would, then
//! passes them on to the sidecar.

use super::gateway::{compose_and_send, finished, gateway_app, put_gateway_back, recipient};
use super::stand_in::request_target;
use super::*;
use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::Verdict;

/// Reports whose fetch the front fails before it passes any on.
const FAILED_FETCHES: usize = 3;

/// The front: its base URL and the reports' fetches it failed.
fn flaky_front(sidecar: &str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let failed = Arc::new(AtomicUsize::new(0));
    let (counted, sidecar) = (
        Arc::clone(&failed),
        sidecar.trim_start_matches("http://").to_owned(),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (counted, sidecar) = (Arc::clone(&counted), sidecar.clone());
            std::thread::spawn(move || pass_or_fail(stream, &counted, &sidecar));
        }
    });
    (base, failed)
}

fn pass_or_fail(mut stream: TcpStream, failed: &AtomicUsize, sidecar: &str) {
    let Some(target) = request_target(&mut BufReader::new(&stream)) else {
        return;
    };
    let answer = if target == "/callbacks/ping" {
        "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
            .as_bytes()
            .to_vec()
    } else if failed.fetch_add(1, Ordering::SeqCst) < FAILED_FETCHES {
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .as_bytes()
            .to_vec()
    } else {
        failed.fetch_sub(1, Ordering::SeqCst);
        // A GET: its line and a host are all the sidecar needs.
        let mut upstream = TcpStream::connect(sidecar).unwrap();
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {sidecar}\r\nConnection: close\r\n\r\n");
        upstream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = upstream.read_to_end(&mut answer);
        answer
    };
    let _ = stream.write_all(&answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kannel_fetches_a_failed_report_again_and_every_report_arrives() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let (_smsc, kannel) = kannel_on_smsc(|_| Verdict::Deliver);
    let (front, failed) = flaky_front(&app.address);
    let (status, body) = put_gateway_back(&app, &kannel.sendsms_url(), 3, &front).await;
    assert_eq!(status, 200, "{body}");
    let recipients: Vec<Value> = (0..2).map(|i| recipient(i, "sale")).collect();
    let (_, job) = compose_and_send(&app, PUBLIC_BASE, &recipients).await;
    let job = finished(&app, &job).await;
    assert_eq!(job["outcomes"], json!({"accepted": 2}), "{job}");
    let delivered = || async {
        (app.db)
            .scalar("SELECT COUNT(*) FROM delivery_messages WHERE state = 'delivered'")
            .await
            == 2
    };
    assert!(
        eventually(Duration::from_secs(60), delivered).await,
        "every report came back\n{}",
        kannel.logs()
    );
    assert!(
        failed.load(Ordering::SeqCst) >= FAILED_FETCHES,
        "the first fetches failed"
    );
}

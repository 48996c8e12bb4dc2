//! Domain rotation: one edit of the pool include and a reload, under load, with no failed request.

use serde_json::json;
use shortlink_e2e::System;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::wait_until;

#[test]
fn a_domain_added_to_the_pool_serves_after_reload_without_failing_requests() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/rotate"}));
    let path = format!("/{code}");
    assert_eq!(system.nginx.get("s3.test", &path).status(), 404);

    let running = Arc::new(AtomicBool::new(true));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let retried = Arc::new(AtomicU64::new(0));
    let load = {
        let (running, ok, failed) = (running.clone(), ok.clone(), failed.clone());
        let retried = retried.clone();
        let url = format!("http://127.0.0.1:{}{path}", system.nginx.redirect_port);
        std::thread::spawn(move || {
            let client = shortlink_e2e::http_client();
            // Bounded: stops when told, or after 20,000 requests.
            for _ in 0..20_000 {
                if !running.load(Ordering::Relaxed) {
                    break;
                }
                let send = || client.get(&url).header("Host", "s1.test").send();
                // An idle keep-alive connection that an old worker closes as it exits can race
                // with the next request on it; clients retry such a request once, as browsers do.
                let result = send().or_else(|_| {
                    retried.fetch_add(1, Ordering::Relaxed);
                    send()
                });
                match result {
                    Ok(response) if response.status() == 302 => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    assert!(wait_until(Duration::from_secs(10), || ok
        .load(Ordering::Relaxed)
        > 50));

    let domains = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    let domains = domains.replace("s1.test s2.test", "s1.test s2.test s3.test");
    std::fs::write(system.nginx.domains_file(), domains).unwrap();
    system.nginx.reload();
    let served = wait_until(Duration::from_secs(10), || {
        system.nginx.get("s3.test", &path).status() == 302
    });
    assert!(
        served,
        "the new domain does not serve; log:\n{}",
        system.nginx.error_log()
    );
    let seen = ok.load(Ordering::Relaxed);
    assert!(wait_until(Duration::from_secs(10), || ok
        .load(Ordering::Relaxed)
        > seen + 50));

    running.store(false, Ordering::Relaxed);
    load.join().unwrap();
    println!(
        "reload under load: {} redirects, {} failed, {} retried once",
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0);
}

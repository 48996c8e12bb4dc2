//! Click webhooks end to end (issue 36): clicks through nginx and the module, the visit stream,
//! the sidecar's consumer and its deliverer, to a receiver on loopback that checks every
//! signature; the sidecar killed (SIGKILL) mid-delivery and started again loses nothing.

use serde_json::{json, Value};
use shortlink_e2e::{NginxOptions, System};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::{wait_until, RedisServer, Signal};

const SECRET: &str = "e2e-webhook-secret-0123456789";
/// Clicks sent, half before the sidecar is killed and half while it is down (issue 36's 10,000).
const CLICKS: usize = 10_000;
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

#[derive(Default)]
struct Received {
    /// Every event id acknowledged, repeats included, and the events themselves.
    ids: Vec<String>,
    events: Vec<Value>,
    bad_signatures: usize,
}

/// `t=<seconds>,sha256=<hex>` checked as docs/WEBHOOKS.md shows a receiver doing it.
fn verified(header: &str, body: &[u8]) -> bool {
    use hmac::{Hmac, Mac};
    let Some((t, hex)) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",sha256="))
    else {
        return false;
    };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let expected: String = (mac.finalize().into_bytes().iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    expected == hex
}

/// One kept-alive connection: requests with a `Content-Length` body, answered 204 (401 for a
/// bad signature).
fn serve(stream: TcpStream, received: &Mutex<Received>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let (mut length, mut signature) = (0, String::new());
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "x-shortlink-signature" => signature = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let status = {
            let mut r = received.lock().unwrap();
            if verified(&signature, &body) {
                let body: Value = serde_json::from_slice(&body).unwrap();
                for event in body["events"].as_array().unwrap() {
                    r.ids.push(event["id"].as_str().unwrap().to_owned());
                    r.events.push(event.clone());
                }
                "204 No Content"
            } else {
                r.bad_signatures += 1;
                "401 Unauthorized"
            }
        };
        write!(writer, "HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n")?;
    }
}

/// A receiver on 127.0.0.1:0, one thread per connection.
fn receiver() -> (String, Arc<Mutex<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/clicks", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Received::default()));
    let kept = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (url, received)
}

fn click(client: &reqwest::blocking::Client, system: &System, code: &str, n: usize) {
    let url = format!("http://127.0.0.1:{}/{code}", system.nginx.redirect_port);
    let response = client
        .get(url)
        .header("Host", "s1.test")
        .header("X-Forwarded-For", format!("203.0.113.{}", n % 250 + 1))
        .header("User-Agent", IPHONE)
        .header("Accept-Language", "en")
        .send()
        .expect("reach nginx");
    assert_eq!(response.status(), 302);
}

#[test]
fn every_click_through_nginx_reaches_the_receiver_across_a_killed_sidecar() {
    let flags = [
        "--webhook-allow-private",
        "--webhook-poll",
        "50ms",
        "--webhook-lease",
        "2s",
        "--webhook-timeout",
        "1s",
    ];
    let mut system = System::start_on_with(RedisServer::start(), NginxOptions::default(), &flags);
    let code = system
        .create(json!({"url": "https://shop.example/spring", "campaign": "spring", "ref": "r-7"}));
    let other = system.create(json!({"url": "https://shop.example/autumn", "campaign": "autumn"}));
    let (url, received) = receiver();
    let (status, subscription) = system.api().post(
        "/webhooks",
        &json!({"url": url, "secret": SECRET, "campaigns": ["spring"], "batch_size": 20, "batch_ms": 10}),
    );
    assert_eq!(status, 201, "{subscription}");

    let client = shortlink_e2e::http_client();
    for n in 0..CLICKS / 2 {
        click(&client, &system, &code, n);
    }
    click(&client, &system, &other, 0);
    let under_way = wait_until(Duration::from_secs(30), || {
        received.lock().unwrap().ids.len() >= 100
    });
    assert!(under_way, "no delivery started");
    system.sidecar.process.signal(Signal::Kill);
    for n in CLICKS / 2..CLICKS {
        click(&client, &system, &code, n);
    }
    system.restart_sidecar();

    let unique = || {
        received
            .lock()
            .unwrap()
            .ids
            .iter()
            .cloned()
            .collect::<HashSet<_>>()
    };
    let all = wait_until(Duration::from_secs(180), || unique().len() >= CLICKS);
    let r = received.lock().unwrap();
    assert!(all, "{} of {CLICKS} clicks delivered", unique_len(&r));
    assert_eq!(r.bad_signatures, 0);
    // Exactly once after de-duplication, and the other campaign's click never sent.
    assert_eq!(unique_len(&r), CLICKS);
    assert!(r.events.iter().all(|e| e["code"] == code.as_str()));
    let first = &r.events[0];
    assert_eq!(first["campaign"], "spring");
    assert_eq!(first["ref"], "r-7");
    assert_eq!(first["short_domain"], "s1.test");
    assert_eq!(first["target"], "https://shop.example/spring");
    assert_eq!(first["status"], 302);
    assert_eq!(first["device"], "mobile");
}

fn unique_len(r: &Received) -> usize {
    r.ids.iter().collect::<HashSet<_>>().len()
}

//! The domain health job's certificate probe against a TLS edge in the test: certificates minted
//! by a test root with a chosen notAfter, served by SNI and swapped while the job runs. A
//! certificate 5 days from expiry → degraded with its date shown; one for another name →
//! unreachable, as are an expired one, one from an unknown root and none; fresh certificates
//! → healthy again. Bad `--certificate-ca` settings stop the start. The state-change webhook
//! over https://, verified against `--domain-webhook-ca`, retried after a refusal.

use crate::helpers::*;
use reqwest::Method;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A root and the leaf certificates it signs.
struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        Self {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// A certificate for `name` valid from 30 days ago until `days` from now.
    fn leaf(&self, name: &str, days: i64) -> Arc<CertifiedKey> {
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(30);
        params.not_after = now + time::Duration::days(days);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = rustls::crypto::ring::sign::any_supported_type(&key).unwrap();
        Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing))
    }
}

/// The edge's certificates by SNI, replaceable while it serves.
#[derive(Debug, Default)]
struct Certificates(Mutex<HashMap<String, Arc<CertifiedKey>>>);

impl Certificates {
    fn set(&self, domain: &str, key: Arc<CertifiedKey>) {
        self.0.lock().unwrap().insert(domain.to_owned(), key);
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No SNI (a client reaching an IP address): the certificate kept under "".
        let name = hello.server_name().unwrap_or("");
        self.0.lock().unwrap().get(name).cloned()
    }
}

/// A listener on 127.0.0.1, port 0, with the acceptor that answers its handshakes with the
/// certificate for the SNI: the acceptor, the listener and its address.
async fn tls_listener(
    certificates: Arc<Certificates>,
) -> (tokio_rustls::TlsAcceptor, TcpListener, SocketAddr) {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_cert_resolver(certificates);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (acceptor, listener, addr)
}

/// A TLS listener on port 0 that completes handshakes with the certificate for the SNI.
async fn tls_edge(certificates: Arc<Certificates>) -> SocketAddr {
    let (acceptor, listener, addr) = tls_listener(certificates).await;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            // The probe only needs the handshake; a failed one is the probe's finding.
            tokio::spawn(async move {
                let _ = acceptor.accept(tcp).await;
            });
        }
    });
    addr
}

async fn domains(app: &TestApp) -> HashMap<String, Value> {
    let response = app.api(Method::GET, "/domains").send().await.unwrap();
    let list: Value = response.json().await.unwrap();
    let list = list["domains"].as_array().cloned().unwrap_or_default();
    list.into_iter()
        .filter_map(|d| Some((d["domain"].as_str()?.to_owned(), d)))
        .collect()
}

/// Days from now to the domain's `certificate_expires_at`.
fn days_left(status: &Value) -> f64 {
    let at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(status["certificate_expires_at"].clone()).expect("an expiry");
    (at - chrono::Utc::now()).num_seconds() as f64 / 86_400.0
}

/// A sidecar probing `domains` every 100 ms through `edge`, trusting `ca_file` if given, with
/// `extra` flags.
async fn spawn_probing(
    domains: &str,
    edge: &str,
    ca_file: Option<&Path>,
    extra: &[&str],
) -> TestApp {
    let mut args = vec![
        "--short-domains",
        domains,
        "--domain-health-every",
        "100ms",
        "--certificate-edge",
        edge,
    ];
    if let Some(ca_file) = ca_file {
        args.extend(["--certificate-ca", ca_file.to_str().unwrap()]);
    }
    args.extend(extra);
    spawn_app_with(Backend::Sqlite, &args).await
}

#[tokio::test]
async fn an_expiring_or_misnamed_certificate_shows_and_recovers_when_replaced() {
    let ca = TestCa::new("shortlink test root");
    let dir = testkit::temp_dir();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.issuer.pem()).unwrap();
    let certificates = Arc::new(Certificates::default());
    certificates.set("s1.example", ca.leaf("s1.example", 5));
    certificates.set("s2.example", ca.leaf("s2.example", 90));
    certificates.set("s3.example", ca.leaf("other.example", 90));
    let edge = tls_edge(Arc::clone(&certificates)).await.to_string();
    let domains_list = "s1.example,s2.example,s3.example";
    let app = spawn_probing(domains_list, &edge, Some(ca_file.as_path()), &[]).await;

    let settled = eventually(Duration::from_secs(10), || async {
        let d = domains(&app).await;
        let state = |name: &str| d.get(name).map(|s| s["state"].clone());
        state("s1.example") == Some("degraded".into())
            && state("s2.example") == Some("healthy".into())
            && state("s3.example") == Some("unreachable".into())
    })
    .await;
    let d = domains(&app).await;
    assert!(settled, "{d:?}");
    let s1 = &d["s1.example"];
    assert!((4.9..=5.0).contains(&days_left(s1)), "{s1}");
    let reason = s1["reasons"][0].as_str().unwrap();
    assert!(reason.starts_with("certificate: expires in 4 days"), "{s1}");
    let s2 = &d["s2.example"];
    assert!((89.9..=90.0).contains(&days_left(s2)), "{s2}");
    assert_eq!(s2["reasons"], serde_json::json!([]), "{s2}");
    let s3 = &d["s3.example"];
    assert_eq!(
        s3["reasons"][0], "certificate: not valid for s3.example",
        "{s3}"
    );
    // The expiry of a certificate that is refused still shows: what the edge presents.
    assert!((89.9..=90.0).contains(&days_left(s3)), "{s3}");

    let page = reqwest::get(app.metrics_url()).await.unwrap();
    let page = page.text().await.unwrap();
    assert!(
        page.lines().any(|l| l.starts_with(
            "shortlink_domain_certificate_expiry_timestamp_seconds{domain=\"s1.example\"}"
        )),
        "{page}"
    );

    // The operator renews s1 and fixes s3's certificate: both healthy on a later probe.
    certificates.set("s1.example", ca.leaf("s1.example", 90));
    certificates.set("s3.example", ca.leaf("s3.example", 60));
    let recovered = eventually(Duration::from_secs(10), || async {
        let d = domains(&app).await;
        ["s1.example", "s2.example", "s3.example"]
            .iter()
            .all(|name| d.get(*name).is_some_and(|s| s["state"] == "healthy"))
    })
    .await;
    let d = domains(&app).await;
    assert!(recovered, "{d:?}");
    assert!(
        (89.9..=90.0).contains(&days_left(&d["s1.example"])),
        "{d:?}"
    );
    assert!(
        (59.9..=60.0).contains(&days_left(&d["s3.example"])),
        "{d:?}"
    );
}

#[tokio::test]
async fn an_untrusted_expired_or_missing_certificate_is_unreachable() {
    // Another name: a root of the same name would be tried and fail as a bad signature.
    let (trusted, stranger) = (TestCa::new("shortlink test root"), TestCa::new("stranger"));
    let dir = testkit::temp_dir();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, trusted.issuer.pem()).unwrap();
    let certificates = Arc::new(Certificates::default());
    certificates.set("s1.example", stranger.leaf("s1.example", 90));
    certificates.set("s3.example", trusted.leaf("s3.example", -2));
    let edge = tls_edge(certificates).await.to_string();
    // s2 has no certificate on the edge: the handshake fails.
    let domains_list = "s1.example,s2.example,s3.example";
    let app = spawn_probing(domains_list, &edge, Some(ca_file.as_path()), &[]).await;
    let settled = eventually(Duration::from_secs(10), || async {
        let d = domains(&app).await;
        ["s1.example", "s2.example", "s3.example"]
            .iter()
            .all(|name| d.get(*name).is_some_and(|s| s["state"] == "unreachable"))
    })
    .await;
    let d = domains(&app).await;
    assert!(settled, "{d:?}");
    assert_eq!(
        d["s1.example"]["reasons"][0], "certificate: not issued by a trusted root",
        "{d:?}"
    );
    let s3 = &d["s3.example"];
    let reason = s3["reasons"][0].as_str().unwrap();
    assert!(reason.starts_with("certificate: expired ("), "{s3}");
    assert!(days_left(s3) < -1.9, "{s3}");
    let s2 = &d["s2.example"];
    assert!(
        s2["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("certificate: TLS handshake with the edge failed"),
        "{s2}"
    );
    assert!(s2["certificate_expires_at"].is_null(), "{s2}");
}

#[tokio::test]
async fn bad_certificate_settings_stop_the_start() {
    let dir = testkit::temp_dir();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let missing = dir.path().join("missing.pem");
    let (empty, missing) = (empty.to_str().unwrap(), missing.to_str().unwrap());
    for (flags, needle) in [
        (
            vec![
                "--certificate-edge",
                "127.0.0.1:1",
                "--certificate-ca",
                missing,
            ],
            "--certificate-ca",
        ),
        (
            vec![
                "--certificate-edge",
                "127.0.0.1:1",
                "--certificate-ca",
                empty,
            ],
            "no certificate in it",
        ),
        (
            vec!["--certificate-ca", empty],
            "--certificate-ca needs --certificate-edge",
        ),
    ] {
        let redis = testkit::RedisServer::start();
        let error = (start_error(dir.path(), &redis, &flags).await)
            .unwrap_or_else(|| panic!("{flags:?} accepted"));
        assert!(error.contains(needle), "{flags:?}: {error}");
    }
}

/// A webhook receiver over TLS on 127.0.0.1 (certificate for the IP): keeps the bodies whose
/// signature checks, and answers the first one 503 (the sender must retry).
async fn https_receiver(ca: &TestCa, secret: &str) -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let certificates = Arc::new(Certificates::default());
    certificates.set("", ca.leaf("127.0.0.1", 30));
    let (acceptor, listener, addr) = tls_listener(certificates).await;
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let kept = Arc::clone(&received);
    let secret = secret.as_bytes().to_vec();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut stream) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then Content-Length bytes of body.
            let (head, body) = loop {
                let n = stream.read(&mut buf).await.unwrap_or(0);
                assert!(n > 0, "the request ended early: {data:?}");
                data.extend_from_slice(&buf[..n]);
                let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&data[..end]).into_owned();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .map_or(0, |v| v.parse().unwrap());
                if data.len() >= end + 4 + length {
                    break (head, data[end + 4..end + 4 + length].to_vec());
                }
            };
            let signed = head
                .lines()
                .find_map(|l| l.strip_prefix("X-Shortlink-Signature: "))
                .unwrap_or_default();
            assert!(shortlink_core::signing::verify(&secret, signed, &body).is_some());
            let first = {
                let mut kept = kept.lock().unwrap();
                kept.push(serde_json::from_slice(&body).unwrap());
                kept.len() == 1
            };
            let answer: &[u8] = if first {
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
            } else {
                b"HTTP/1.1 204 No Content\r\n\r\n"
            };
            let _ = stream.write_all(answer).await;
            let _ = stream.shutdown().await;
        }
    });
    (addr, received)
}

#[tokio::test]
async fn the_state_change_webhook_is_delivered_over_https_and_retried() {
    const SECRET: &str = "webhook-secret-0123456789";
    let ca = TestCa::new("webhook root");
    let dir = testkit::temp_dir();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.issuer.pem()).unwrap();
    let (receiver, received) = https_receiver(&ca, SECRET).await;
    // An edge with no certificate at all: the domain goes unreachable, a change to report.
    let edge = tls_edge(Arc::default()).await.to_string();
    let hook = format!("https://{receiver}/hook");
    let webhook = [
        "--domain-webhook-url",
        &hook,
        "--domain-webhook-secret",
        SECRET,
        "--domain-webhook-ca",
        ca_file.to_str().unwrap(),
    ];
    let app = spawn_probing("s1.example", &edge, Some(ca_file.as_path()), &webhook).await;
    // Refused once, then delivered on the retry, 500 ms later: the same signed body twice.
    let delivered = eventually(Duration::from_secs(10), || async {
        received.lock().unwrap().len() >= 2
    })
    .await;
    assert!(delivered, "{:?} {:?}", received, domains(&app).await);
    let attempts = received.lock().unwrap().clone();
    assert_eq!(attempts[0], attempts[1]);
    let change = attempts[0].clone();
    assert_eq!(
        (change["domain"].clone(), change["state"].clone()),
        (Value::from("s1.example"), Value::from("unreachable")),
        "{change}"
    );

    // The CA option without an https:// webhook is a mistake: refused at start.
    let redis = testkit::RedisServer::start();
    let database = format!("sqlite://{}", dir.path().join("links.db").display());
    let plain = format!("http://{receiver}/hook");
    let config = config(
        &database,
        &redis.url(),
        &[
            "--domain-webhook-url",
            &plain,
            "--domain-webhook-secret",
            SECRET,
            "--domain-webhook-ca",
            ca_file.to_str().unwrap(),
        ],
    );
    let error = match shortlink_sidecar::Application::build(&config).await {
        Ok(_) => panic!("--domain-webhook-ca accepted with an http:// webhook"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("is for an https:// webhook"), "{error}");
}

/// An edge that accepts connections and never answers: every domain waits out the probe's
/// timeout (3 s), all at once rather than one after the other (6 domains, 18 s in a row).
#[tokio::test]
async fn a_silent_edge_times_the_domains_out_together() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let edge = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let domains_list = "s1.example,s2.example,s3.example,s4.example,s5.example,s6.example";
    let app = spawn_probing(domains_list, &edge, None, &[]).await;
    // The six, and the issuing domain (`--public-base-url`), named by the first request.
    let all_checked = eventually(Duration::from_secs(12), || async {
        let d = domains(&app).await;
        d.len() == 7 && d.values().all(|s| s["state"] == "unreachable")
    })
    .await;
    let d = domains(&app).await;
    assert!(all_checked, "{d:?}");
    for status in d.values() {
        let reason = status["reasons"][0].as_str().unwrap();
        assert!(reason.contains("no TLS answer from the edge"), "{status}");
    }
}

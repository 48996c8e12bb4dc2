//! HTTPS on every pool domain: a certificate per domain, plain HTTP as configured, the ACME
//! challenge location, nginx -t refusing a domain without a usable certificate, and certificates
//! from a real ACME server (pebble) through certbot's webroot mode, renewed with a reload.

use serde_json::json;
use shortlink_e2e::tls::{https_client, local_ca, Certbot, Pebble};
use shortlink_e2e::{NginxOptions, System, POOL};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::wait_until;

/// A directory nginx's workers (`nobody` under a root master) may read: the ACME webroot.
fn public_dir() -> tempfile::TempDir {
    let dir = testkit::temp_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A challenge file as certbot writes it, named like a short code: the code location must not
/// take it.
fn write_challenge(webroot: &Path, token: &str) {
    let dir = webroot.join(".well-known/acme-challenge");
    std::fs::create_dir_all(&dir).unwrap();
    for level in [webroot.join(".well-known"), dir.clone()] {
        std::fs::set_permissions(level, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(dir.join(token), format!("{token}.thumbprint")).unwrap();
    std::fs::set_permissions(dir.join(token), std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// The HTTP version curl negotiates over HTTPS with `root` trusted ("2" for HTTP/2).
fn curl_http_version(root: &Path, host: &str, port: u16, path: &str) -> String {
    let output = Command::new("curl")
        .args(["-sS", "--http2", "-o", "/dev/null", "-w", "%{http_version}"])
        .arg("--cacert")
        .arg(root)
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .arg(format!("https://{host}:{port}{path}"))
        .output()
        .expect("run curl");
    assert!(
        output.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The serial number of the certificate nginx presents for `host` (`openssl s_client`).
fn served_serial(port: u16, host: &str) -> Option<String> {
    let script = format!(
        "openssl s_client -connect 127.0.0.1:{port} -servername {host} </dev/null 2>/dev/null \
         | openssl x509 -noout -serial"
    );
    let output = Command::new("sh").args(["-c", &script]).output().ok()?;
    let serial = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.success() && !serial.is_empty()).then_some(serial)
}

fn file_serial(cert: &Path) -> String {
    let output = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(cert)
        .output()
        .expect("run openssl x509");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn every_pool_domain_answers_over_https_with_its_own_certificate() {
    let certs = testkit::temp_dir();
    let root = local_ca(certs.path(), &POOL);
    let webroot = public_dir();
    let system = System::start_with(NginxOptions {
        tls_certs: Some(certs.path().to_owned()),
        acme_webroot: Some(webroot.path().to_owned()),
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/tls"}));
    let port = system.nginx.tls_port;

    // Each domain's certificate names that domain only: verification passing proves the choice.
    let client = https_client(&root, &POOL, port);
    for host in POOL {
        let response = client
            .get(format!("https://{host}:{port}/{code}"))
            .send()
            .unwrap_or_else(|e| panic!("HTTPS on {host}: {e}"));
        assert_eq!(response.status(), 302, "{host}");
        assert_eq!(response.headers()["location"], "https://example.com/tls");
        assert_eq!(
            curl_http_version(&root, host, port, &format!("/{code}")),
            "2"
        );
    }
    // A name outside the pool gets no certificate at all, not another domain's.
    let stranger = https_client(&root, &["s9.test"], port);
    assert!(stranger
        .get(format!("https://s9.test:{port}/{code}"))
        .send()
        .is_err());
    assert_eq!(served_serial(port, "s9.test"), None);

    // Plain HTTP answers codes in this deployment, and challenges beside them.
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );
    write_challenge(webroot.path(), &code);
    let response = system
        .nginx
        .get("s1.test", &format!("/.well-known/acme-challenge/{code}"));
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), format!("{code}.thumbprint"));
    let response = system
        .nginx
        .get("s1.test", "/.well-known/acme-challenge/missing");
    assert_eq!(response.status(), 404);
}

#[test]
fn plain_http_sends_to_https_when_so_configured_and_still_answers_challenges() {
    let certs = testkit::temp_dir();
    local_ca(certs.path(), &POOL);
    let webroot = public_dir();
    let system = System::start_with(NginxOptions {
        tls_certs: Some(certs.path().to_owned()),
        acme_webroot: Some(webroot.path().to_owned()),
        plain_http: "to-https",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/to-https"}));
    let response = system.nginx.get("s2.test", &format!("/{code}?utm=sms"));
    assert_eq!(response.status(), 301);
    assert_eq!(
        response.headers()["location"],
        format!("https://s2.test:{}/{code}?utm=sms", system.nginx.tls_port).as_str()
    );
    write_challenge(webroot.path(), "token-1");
    let response = system
        .nginx
        .get("s2.test", "/.well-known/acme-challenge/token-1");
    assert_eq!(response.status(), 200);
}

#[test]
fn nginx_t_fails_for_a_pool_domain_without_a_usable_certificate() {
    let certs = testkit::temp_dir();
    local_ca(certs.path(), &POOL);
    let system = System::start_with(NginxOptions {
        tls_certs: Some(certs.path().to_owned()),
        ..NginxOptions::default()
    });
    let original = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    let with_s3 = original.replace("s1.test s2.test", "s1.test s2.test s3.test");
    std::fs::write(system.nginx.domains_file(), &with_s3).unwrap();
    system.nginx.generate_tls_domains();

    // No certificate yet.
    let (ok, output) = system.nginx.test_config();
    assert!(!ok, "nginx -t passed without s3.test's certificate");
    assert!(output.contains("s3.test/fullchain.pem"), "{output}");

    // A key that is no key.
    local_ca(certs.path(), &["s3.test"]);
    std::fs::write(certs.path().join("s3.test/privkey.pem"), "not a key\n").unwrap();
    let (ok, output) = system.nginx.test_config();
    assert!(!ok, "nginx -t passed with an unreadable key");
    assert!(output.contains("s3.test/privkey.pem"), "{output}");

    // Another domain's key.
    std::fs::copy(
        certs.path().join("s1.test/privkey.pem"),
        certs.path().join("s3.test/privkey.pem"),
    )
    .unwrap();
    let (ok, output) = system.nginx.test_config();
    assert!(!ok, "nginx -t passed with a key that does not match");
    assert!(output.contains("s3.test"), "{output}");
}

/// A new domain gets its certificate from an ACME server through the plain HTTP server's
/// challenge location, nginx reloads from certbot's deploy hook (at issue and at renewal), and a
/// domain dropped from the pool stops answering while the others serve without a failed request.
#[test]
fn acme_certificates_for_new_domains_and_rotation_under_load() {
    // One certificates directory, certbot's: the pool's first domains have the local CA's
    // certificates there, s3.test gets certbot's (as /etc/letsencrypt/live holds both kinds).
    let acme = testkit::temp_dir();
    let webroot = public_dir();
    let certbot_dir = acme.path().join("certbot");
    let certs = certbot_dir.join("config/live");
    let local_root = local_ca(&certs, &POOL);
    let system = System::start_with(NginxOptions {
        tls_certs: Some(certs.clone()),
        acme_webroot: Some(webroot.path().to_owned()),
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/acme"}));
    let port = system.nginx.tls_port;
    let pebble = Pebble::start(&acme.path().join("pebble"), system.nginx.redirect_port);
    let certbot = Certbot {
        dir: certbot_dir,
        webroot: webroot.path().to_owned(),
        server: pebble.directory.clone(),
        ca_bundle: pebble.api_root.clone(),
    };
    assert_eq!(certbot.live(), certs);

    // The operator's one edit: s3.test joins the pool; its HTTPS server is generated (as
    // scripts/reload begins), naming the certificate certbot is about to write.
    let domains = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    let domains = domains.replace("s1.test s2.test", "s1.test s2.test s3.test");
    std::fs::write(system.nginx.domains_file(), domains).unwrap();
    system.nginx.generate_tls_domains();
    let nginx = format!(
        "{} -p {} -c {}/nginx.conf",
        shortlink_e2e::paths::nginx_bin().display(),
        system.nginx.prefix.display(),
        system.nginx.prefix.display()
    );
    let deploy_hook = format!("{nginx} -t -q && {nginx} -s reload");
    certbot.certonly("s3.test", &deploy_hook);

    let pebble_root = acme.path().join("pebble-root.pem");
    std::fs::write(&pebble_root, pebble.issuing_root()).unwrap();
    let url = format!("https://s3.test:{port}/{code}");
    let served = wait_until(Duration::from_secs(10), || {
        https_client(&pebble_root, &["s3.test"], port)
            .get(&url)
            .send()
            .is_ok_and(|response| response.status() == 302)
    });
    assert!(
        served,
        "s3.test does not answer over HTTPS after the deploy hook's reload:\n{}",
        system.nginx.error_log()
    );

    // Renewal: a new certificate, and the saved deploy hook reloads nginx onto it.
    let first = file_serial(&certbot.live().join("s3.test/cert.pem"));
    let (ok, output) = certbot.run(&["renew", "--force-renewal", "--no-random-sleep-on-renew"]);
    assert!(ok, "certbot renew:\n{output}");
    let renewed = file_serial(&certbot.live().join("s3.test/cert.pem"));
    assert_ne!(first, renewed);
    assert!(
        wait_until(Duration::from_secs(10), || served_serial(port, "s3.test")
            .as_deref()
            == Some(renewed.as_str())),
        "nginx still serves {:?} after renewal to {renewed}",
        served_serial(port, "s3.test")
    );

    // Rotation under load: s2.test leaves the pool; s1.test keeps answering over HTTPS.
    let running = Arc::new(AtomicBool::new(true));
    let (ok_count, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (running, ok_count, failed) = (running.clone(), ok_count.clone(), failed.clone());
        let client = https_client(&local_root, &["s1.test"], port);
        let url = format!("https://s1.test:{port}/{code}");
        std::thread::spawn(move || {
            for _ in 0..20_000 {
                if !running.load(Ordering::Relaxed) {
                    break;
                }
                // An idle keep-alive connection an old worker closes as it exits can race with
                // the next request on it; clients retry such a request once, as browsers do.
                let result = client.get(&url).send().or_else(|_| client.get(&url).send());
                match result {
                    Ok(response) if response.status() == 302 => {
                        ok_count.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    assert!(wait_until(Duration::from_secs(10), || ok_count
        .load(Ordering::Relaxed)
        > 50));
    let domains = std::fs::read_to_string(system.nginx.domains_file()).unwrap();
    let domains = domains.replace("s1.test s2.test s3.test", "s1.test s3.test");
    std::fs::write(system.nginx.domains_file(), domains).unwrap();
    system.nginx.reload_pool();
    let gone = wait_until(Duration::from_secs(10), || {
        served_serial(port, "s2.test").is_none()
    });
    assert!(gone, "s2.test still answers after leaving the pool");
    let seen = ok_count.load(Ordering::Relaxed);
    assert!(wait_until(Duration::from_secs(10), || ok_count
        .load(Ordering::Relaxed)
        > seen + 50));
    running.store(false, Ordering::Relaxed);
    load.join().unwrap();
    println!(
        "rotation under load: {} HTTPS redirects, {} failed",
        ok_count.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0);
    // s3.test, issued by pebble, still answers.
    assert_eq!(
        https_client(&pebble_root, &["s3.test"], port)
            .get(&url)
            .send()
            .unwrap()
            .status(),
        302
    );
}

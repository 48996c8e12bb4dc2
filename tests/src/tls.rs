//! HTTPS for the end-to-end tests: certificates from `scripts/local-ca`, an ACME server (Debian's
//! `pebble`, validating HTTP-01 against nginx's plain HTTP port, names resolved by
//! `pebble-challtestsrv`'s DNS) and certbot in webroot mode against it.

use crate::paths;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testkit::{free_port, port_open, wait_until, Lifeline};

/// `scripts/local-ca <dir> <domains>`: `<dir>/ca.pem` and `<dir>/<domain>/{fullchain,privkey}.pem`.
pub fn local_ca(dir: &Path, domains: &[&str]) -> PathBuf {
    let status = Command::new(paths::workspace_dir().join("scripts/local-ca"))
        .arg(dir)
        .args(domains)
        .status()
        .expect("run scripts/local-ca");
    assert!(status.success(), "scripts/local-ca failed");
    dir.join("ca.pem")
}

/// A client that trusts only `root` (PEM), reaches every name in `hosts` on 127.0.0.1 and never
/// follows redirects. A new client opens new connections: a new TLS handshake.
pub fn https_client(root: &Path, hosts: &[&str], port: u16) -> reqwest::blocking::Client {
    crate::install_tls_provider();
    let pem = std::fs::read(root).unwrap_or_else(|e| panic!("read {}: {e}", root.display()));
    let root = reqwest::Certificate::from_pem(&pem).expect("a PEM root certificate");
    let mut builder = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .tls_certs_only([root]);
    for host in hosts {
        builder = builder.resolve(host, SocketAddr::from(([127, 0, 0, 1], port)));
    }
    builder.build().expect("build an HTTPS client")
}

/// pebble on loopback with a DNS server answering 127.0.0.1 for every name, so that it validates
/// HTTP-01 challenges against `http_port` on this machine.
pub struct Pebble {
    pub directory: String,
    /// The TLS root of pebble's own API (for certbot), not of the certificates it issues.
    pub api_root: PathBuf,
    management_port: u16,
    _dns: Lifeline,
    _pebble: Lifeline,
}

impl Pebble {
    pub fn start(dir: &Path, http_port: u16) -> Self {
        std::fs::create_dir_all(dir).expect("create pebble's directory");
        let api_root = local_ca(&dir.join("api-ca"), &["localhost"]);
        let dns_port = free_port();
        let dns = Lifeline::builder("pebble-challtestsrv", dir.join("dns.log"))
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dns01", &format!("127.0.0.1:{dns_port}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .spawn();
        let (port, management_port) = (free_port(), free_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{management_port}"),
            "certificate": dir.join("api-ca/localhost/fullchain.pem"),
            "privateKey": dir.join("api-ca/localhost/privkey.pem"),
            "httpPort": http_port,
            "tlsPort": free_port(),
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        }});
        std::fs::write(dir.join("pebble.json"), config.to_string()).expect("write pebble.json");
        let pebble = Lifeline::builder("pebble", dir.join("pebble.log"))
            .arg("-config")
            .arg(dir.join("pebble.json"))
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            // Validation at once: pebble otherwise waits a random 0-15 s before each check.
            .env("PEBBLE_VA_NOSLEEP", "1")
            // Every order validates its challenges (the default reuses authorizations at random).
            .env("PEBBLE_AUTHZREUSE", "0")
            // Every valid nonce is taken: pebble otherwise rejects 5% of them to exercise a
            // client's retry, and certbot's one retry met a second rejection mid-renewal (a
            // `badNonce` failure of the rotation test, nothing of ours).
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .spawn();
        assert!(
            wait_until(Duration::from_secs(10), || port_open(port)
                && port_open(management_port)),
            "pebble did not start:\n{}",
            pebble.log_text()
        );
        Pebble {
            directory: format!("https://localhost:{port}/dir"),
            api_root,
            management_port,
            _dns: dns,
            _pebble: pebble,
        }
    }

    /// The root that signs the certificates pebble issues (new at every pebble start).
    pub fn issuing_root(&self) -> Vec<u8> {
        crate::install_tls_provider();
        let pem = std::fs::read(&self.api_root).expect("read pebble's API root");
        let client = reqwest::blocking::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&pem).unwrap()])
            .build()
            .unwrap();
        let url = format!("https://localhost:{}/roots/0", self.management_port);
        let response = client.get(url).send().expect("GET pebble's root");
        assert!(response.status().is_success());
        response.bytes().unwrap().to_vec()
    }
}

/// certbot in webroot mode against `pebble`, with its state under `dir` (certificates in
/// `dir/live/<domain>/`, certbot's layout).
pub struct Certbot {
    pub dir: PathBuf,
    pub webroot: PathBuf,
    pub server: String,
    pub ca_bundle: PathBuf,
}

impl Certbot {
    /// `certbot <args>` with this state; (success, output).
    pub fn run(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new("certbot")
            .args(args)
            .arg("--config-dir")
            .arg(self.dir.join("config"))
            .arg("--work-dir")
            .arg(self.dir.join("work"))
            .arg("--logs-dir")
            .arg(self.dir.join("logs"))
            .args(["--server", &self.server, "--non-interactive"])
            // certbot (python requests) trusts pebble's API through this bundle only.
            .env("REQUESTS_CA_BUNDLE", &self.ca_bundle)
            .output()
            .expect("run certbot");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// The certificates directory in certbot's layout (`TLS_CERTS` for render-nginx).
    pub fn live(&self) -> PathBuf {
        self.dir.join("config/live")
    }

    /// A certificate for `domain` through the webroot, running `deploy_hook` once it is in place
    /// (certbot saves the hook for renewals).
    pub fn certonly(&self, domain: &str, deploy_hook: &str) {
        let webroot = self.webroot.display().to_string();
        let (ok, output) = self.run(&[
            "certonly",
            "--webroot",
            "-w",
            &webroot,
            "-d",
            domain,
            "--agree-tos",
            "--register-unsafely-without-email",
            "--no-random-sleep-on-renew",
            "--deploy-hook",
            deploy_hook,
        ]);
        assert!(ok, "certbot certonly -d {domain}:\n{output}");
    }
}

/// A new certificate for `domain` from the local CA in `dir`, valid for `days` (`scripts/local-ca`
/// with `LOCAL_CA_DAYS`), replacing the one it had.
pub fn reissue(dir: &Path, domain: &str, days: u32) {
    let _ = std::fs::remove_dir_all(dir.join(domain));
    let status = Command::new(paths::workspace_dir().join("scripts/local-ca"))
        .arg(dir)
        .arg(domain)
        .env("LOCAL_CA_DAYS", days.to_string())
        .status()
        .expect("run scripts/local-ca");
    assert!(status.success(), "scripts/local-ca failed");
}

/// The notAfter of the (first) certificate in a PEM file, as `openssl x509` reads it.
pub fn not_after(cert: &Path) -> chrono::DateTime<chrono::Utc> {
    let output = Command::new("openssl")
        .args(["x509", "-noout", "-enddate", "-dateopt", "iso_8601", "-in"])
        .arg(cert)
        .output()
        .expect("run openssl x509");
    let text = String::from_utf8_lossy(&output.stdout);
    let date = text
        .trim()
        .strip_prefix("notAfter=")
        .unwrap_or_else(|| panic!("no notAfter in {text:?} for {}", cert.display()));
    chrono::NaiveDateTime::parse_from_str(date, "%Y-%m-%d %H:%M:%SZ")
        .unwrap_or_else(|e| panic!("notAfter {date:?}: {e}"))
        .and_utc()
}

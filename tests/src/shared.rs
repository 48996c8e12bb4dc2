//! What every part of the system under test agrees on (its secrets, its pool) and the HTTP
//! client the tests speak to it with: a leaf the system, its nginx and its API client build on.

use std::time::Duration;

/// The code secret every end-to-end system shares (the module and the sidecar must agree).
pub const CODE_SECRET: &str = "5e1f0d7c3b2a19887766554433221100ffeeddccbbaa99887766554433221100";
pub const API_KEY: &str = "slk_e2e_test_key_0123456789abcdefghijklmnopqrstuvwxyz";
/// What nginx's API server sends as `X-Shortlink-Proxy-Secret` and the sidecar's
/// `--proxy-secret`: its pool headers count as nginx's.
pub const PROXY_SECRET: &str = "e2eproxysecret0123456789abcdef";
pub const POOL: [&str; 2] = ["s1.test", "s2.test"];
/// Set by the sidecar while Redis holds every link (docs/ARCHITECTURE.md).
pub const PROJECTION_MARKER: &str = "sl:meta:projection";

/// A blocking HTTP client that never follows redirects: the tests look at the redirect itself.
pub fn http_client() -> reqwest::blocking::Client {
    install_tls_provider();
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build an HTTP client")
}

/// The `Location` header of `response` ("" if none).
pub fn location(response: &reqwest::blocking::Response) -> &str {
    response
        .headers()
        .get("location")
        .map(|value| value.to_str().unwrap())
        .unwrap_or_default()
}

/// A redirect answer as the tests compare it: the status and the `Location` header ("" if none).
pub fn status_and_location(response: &reqwest::blocking::Response) -> (u16, String) {
    let location = response
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), location)
}

/// reqwest's TLS uses ring (already in the tree, unlike aws-lc): every client needs it installed,
/// even one that never speaks HTTPS. Installing it again (another test thread) changes nothing.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

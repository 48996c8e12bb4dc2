//! Debian's `chromium`, headless, driven through `chromedriver` over WebDriver: the browser tests
//! (the console, the preview card) see pages as a real browser renders them.

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A browser session; the driver (and its browser) stop when it is dropped.
pub struct Chrome {
    driver: Child,
    pub client: Client,
    /// The browser's profile directory, also a place for files to upload.
    pub profile: tempfile::TempDir,
}

impl Drop for Chrome {
    fn drop(&mut self) {
        // The driver's whole process group: the driver alone would leave the Chromium processes
        // it started running after the test.
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &group])
            .status();
        let _ = self.driver.wait();
    }
}

/// A headless chromium sending `user_agent`, resolving hosts by `host_rules` (Chromium's
/// `--host-resolver-rules`, e.g. `MAP s1.test 127.0.0.1`).
pub async fn chrome(user_agent: &str, host_rules: &str) -> Chrome {
    for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            std::path::Path::new(program).exists(),
            "{program} is missing: run scripts/setup (Debian packages chromium, chromium-driver)"
        );
    }
    let port = testkit::free_port();
    let driver = Command::new("/usr/bin/chromedriver")
        .arg(format!("--port={port}"))
        // A process group of its own, which the browsers it starts join: see `Drop`.
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let profile = testkit::temp_dir();
    let args = vec![
        "--headless=new".to_owned(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-dev-shm-usage".into(),
        "--window-size=1280,1000".into(),
        format!("--user-agent={user_agent}"),
        format!("--host-resolver-rules={host_rules}"),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({"binary": "/usr/bin/chromium", "args": args}),
    );
    // What pages log (errors, refused loads): read by [`console_errors`].
    capabilities.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(capabilities.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => break client,
            Err(error) if Instant::now() > deadline => panic!("no WebDriver session: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    Chrome {
        driver,
        client,
        profile,
    }
}

/// Signs in to the console at `console` (`http://…/console`) with `key`.
pub async fn sign_in(client: &Client, console: &str, key: &str) {
    client.goto(&format!("{console}/sign-in")).await.unwrap();
    let field = match client.find(Locator::Css("#key")).await {
        Ok(field) => field,
        Err(e) => panic!("no key field ({e}) in {}", client.source().await.unwrap()),
    };
    field.send_keys(key).await.unwrap();
    submit(client, "main form button[type=submit]").await;
}

/// Clicks `selector` and waits for the next page: the click may return before the answer to a
/// form's POST has loaded.
pub async fn submit(client: &Client, selector: &str) {
    client
        .execute("window.shortlinkOldPage = true;", vec![])
        .await
        .unwrap();
    client
        .find(Locator::Css(selector))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Generous: CI runs this beside builds and load tests, where a page can take seconds.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let loaded = client
            .execute(
                "return window.shortlinkOldPage === undefined && document.readyState === 'complete';",
                vec![],
            )
            .await;
        if matches!(loaded, Ok(serde_json::Value::Bool(true))) {
            return;
        }
        if Instant::now() >= deadline {
            let url = client.current_url().await.map(|u| u.to_string());
            let page = client.source().await.unwrap_or_default();
            panic!("no new page after clicking {selector}: last check {loaded:?}, at {url:?}, showing {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// chromedriver's log of the browser's console since the last read (`POST /se/log`).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// The errors the pages logged since the last call (a refused load, a script error, a CSP
/// violation), each as Chromium words it.
pub async fn console_errors(client: &Client) -> Vec<String> {
    let entries = client
        .issue_cmd(BrowserLog)
        .await
        .expect("the browser's log");
    entries
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["level"] == "SEVERE")
        .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

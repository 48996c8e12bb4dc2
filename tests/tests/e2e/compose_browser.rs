//! The console's composer in real headless Chromium through nginx's internal API server: the
//! counter follows the template as it is typed (the console's script asking the server), and
//! the sample shows each pasted recipient's message.

use fantoccini::{Client, Locator};
use shortlink_e2e::browser::{self, sign_in, submit};
use shortlink_e2e::{System, API_KEY};
use std::time::{Duration, Instant};

/// The counter's text once it equals `want`, or what it says at the deadline (no fixed sleep:
/// the script answers after each keystroke's round trip).
async fn counter_becomes(client: &Client, want: &str) -> String {
    counter_until(client, |text| text == want).await
}

/// The counter's text once `done` holds for it, or at the deadline.
async fn counter_until(client: &Client, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = client
            .find(Locator::Css("#compose-counter"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if done(&text) || Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_a_template_updates_the_counter() {
    let system = tokio::task::spawn_blocking(System::start).await.unwrap();
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let chrome = browser::chrome("Mozilla/5.0 (X11; Linux x86_64) Chrome/126", "").await;
    let c = &chrome.client;
    sign_in(c, &console, API_KEY).await;
    c.goto(&format!("{console}/compose")).await.unwrap();
    // The short URLs of the test system: its first issuing base and a code of 7 characters.
    let base_len = "http://s1.test".len() + 1 + 7;
    let template = c.find(Locator::Css("#template")).await.unwrap();
    template.clear().await.unwrap();
    template.send_keys("Hi {{name}}: {{link}}").await.unwrap();
    // "Hi Ann: " and the link.
    let chars = 8 + base_len;
    let want = format!("{chars} characters · GSM-7 · {chars} units · 1 segment");
    assert_eq!(counter_becomes(c, &want).await, want);
    // One euro sign: an extension character, two septets.
    template.send_keys(" €").await.unwrap();
    let want = format!(
        "{} characters · GSM-7 · {} units · 1 segment",
        chars + 2,
        chars + 3
    );
    assert_eq!(counter_becomes(c, &want).await, want);
    // One curly quote: the whole message in UCS-2.
    template.send_keys(" \u{2019}").await.unwrap();
    let want = format!(
        "{} characters · UCS-2 · {} units · 1 segment",
        chars + 4,
        chars + 4
    );
    assert_eq!(counter_becomes(c, &want).await, want);
    // Long enough for a second segment: 70 UTF-16 units fit one.
    let filler = 70 - (chars + 4) + 1;
    template.send_keys(&"x".repeat(filler)).await.unwrap();
    let want = "71 characters · UCS-2 · 71 units · 2 segments";
    assert_eq!(counter_becomes(c, want).await, want);
    // An unbalanced brace says where: after the template's 21 characters, the 4 typed and the
    // filler, and a space.
    template.send_keys(" {{").await.unwrap();
    let at = format!("at character {} is not closed", 21 + 4 + filler + 1);
    let said = counter_until(c, |text| text.contains("not closed")).await;
    assert!(said.contains(&at), "{said}");

    // The sample: the pasted recipients' messages, nothing issued.
    template.clear().await.unwrap();
    template.send_keys("Hi {{name}}: {{link}}").await.unwrap();
    submit(c, "#composer button[type=submit]").await;
    let page = c.source().await.unwrap();
    assert!(page.contains("Hi Ann: http://s1.test/xxxxxxx"), "{page}");
    assert!(page.contains("+447400123456"));
    let (status, links) = tokio::task::spawn_blocking(move || system.api().get("/links"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(links["links"].as_array().unwrap().len(), 0);
}

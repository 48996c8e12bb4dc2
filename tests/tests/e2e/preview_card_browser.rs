//! The preview card as a messaging app's fetcher renders it: real headless Chromium (Debian's
//! `chromium` through `chromedriver`) sending WhatsApp's fetcher agent opens a short link whose
//! link carries a card, through the real nginx, and reads the Open Graph and Twitter tags from
//! the parsed page (the DOM, not the bytes: what a client that parses HTML gets); the same browser
//! with a phone's agent is redirected to the target.

use fantoccini::{Client, Locator};
use serde_json::json;
use shortlink_e2e::{browser, System};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

const FETCHER_UA: &str = "WhatsApp/2.23.20.0 A";
const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
                        Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
const HOSTS: &str = "MAP s1.test 127.0.0.1, MAP target.test 127.0.0.1";

/// The link's target: a page saying "Landed", except that the fetcher gets 204 No Content. The
/// card page refreshes to the target at once, and a navigation answered 204 leaves the browser
/// on the page it was on: the card, for the test to read.
fn target_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let read = stream.read(&mut buffer).unwrap_or(0);
                if String::from_utf8_lossy(&buffer[..read]).contains(FETCHER_UA) {
                    let _ =
                        stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
                    return;
                }
                let body = "<!doctype html><title>Landed</title><h1>Landed on the target</h1>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

/// The `content` of the first `<meta>` whose `attribute` is `name`, as the browser parsed it.
async fn meta(client: &Client, attribute: &str, name: &str) -> String {
    client
        .find(Locator::Css(&format!("meta[{attribute}=\"{name}\"]")))
        .await
        .unwrap_or_else(|_| panic!("no <meta {attribute}=\"{name}\">"))
        .attr("content")
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn chromium_reads_the_card_a_fetcher_gets() {
    // The harness is blocking (its HTTP client has a runtime of its own): off the test's runtime.
    let system = tokio::task::spawn_blocking(System::start).await.unwrap();
    let target = format!("http://target.test:{}/spring", target_server());
    let title = "Spring sale: <20% off> & \"free\" delivery";
    let body = json!({
        "url": target,
        "preview": {
            "title": title,
            "description": "Everything in the shop, until Sunday.",
            "image": "https://cdn.example/spring.jpg",
            "site_name": "Example Shop",
        },
    });
    let (system, code) = tokio::task::spawn_blocking(move || {
        let code = system.create(body);
        (system, code)
    })
    .await
    .unwrap();
    let short = format!("http://s1.test:{}/{code}", system.nginx.redirect_port);

    let fetcher = browser::chrome(FETCHER_UA, HOSTS).await;
    let c = &fetcher.client;
    c.goto(&short).await.unwrap();
    // The card page, not the target: its own tags, with the title decoded back from its escapes.
    assert_eq!(meta(c, "property", "og:title").await, title);
    assert_eq!(
        meta(c, "property", "og:description").await,
        "Everything in the shop, until Sunday."
    );
    assert_eq!(
        meta(c, "property", "og:image").await,
        "https://cdn.example/spring.jpg"
    );
    assert_eq!(meta(c, "property", "og:site_name").await, "Example Shop");
    assert_eq!(meta(c, "name", "twitter:card").await, "summary_large_image");
    assert_eq!(meta(c, "name", "twitter:title").await, title);
    let refresh = meta(c, "http-equiv", "refresh").await;
    assert!(refresh.ends_with(&format!("url={target}")), "{refresh}");
    assert_eq!(
        c.find_all(Locator::Css("script")).await.unwrap().len(),
        0,
        "the escaped title opened no element"
    );
    fetcher.client.clone().close().await.unwrap();
    drop(fetcher);

    // A person's browser is redirected to the target.
    let phone = browser::chrome(PHONE_UA, HOSTS).await;
    phone.client.goto(&short).await.unwrap();
    let landed = phone
        .client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(landed, "Landed on the target");
    phone.client.clone().close().await.unwrap();
    tokio::task::spawn_blocking(move || drop(system))
        .await
        .unwrap();
}

/// The console's card page redraws the bubble from the form as it is typed, before anything is
/// saved: markup typed into the title stays text, and an image shows only from an https URL.
#[tokio::test(flavor = "multi_thread")]
async fn the_console_draws_the_card_as_it_is_typed() {
    let (system, code) = tokio::task::spawn_blocking(|| {
        let system = System::start();
        let code = system.create(json!({"url": "https://shop.example/spring"}));
        (system, code)
    })
    .await
    .unwrap();
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let chrome = browser::chrome("Mozilla/5.0 (X11; Linux x86_64) Chrome/126", "").await;
    let c = &chrome.client;
    browser::sign_in(c, &console, shortlink_e2e::API_KEY).await;
    c.goto(&format!("{console}/links/{code}/card"))
        .await
        .unwrap();
    let typed = [
        ("#title", "Spring <b>sale</b> & more"),
        ("#description", "Today only"),
        ("#site_name", "Example Shop"),
    ];
    for (field, text) in typed {
        c.find(Locator::Css(field))
            .await
            .unwrap()
            .send_keys(text)
            .await
            .unwrap();
    }
    // Each keystroke's `input` event redraws at once: no round trip to wait for.
    for (field, text) in typed {
        let shown = format!("#card-{}", &field[1..]);
        let drawn = c.find(Locator::Css(&shown)).await.unwrap();
        assert_eq!(drawn.text().await.unwrap(), text, "{shown}");
    }
    assert!(
        c.find(Locator::Css("#card-title b")).await.is_err(),
        "markup typed into the title became an element"
    );

    let image = c.find(Locator::Css("#image")).await.unwrap();
    let drawn_image = c.find(Locator::Css("#card-image")).await.unwrap();
    image
        .send_keys("http://cdn.example/card.jpg")
        .await
        .unwrap();
    // The `hidden` attribute, not what is painted: the image's host resolves nowhere here.
    assert!(
        drawn_image.attr("hidden").await.unwrap().is_some(),
        "a plain http image"
    );
    image.clear().await.unwrap();
    image
        .send_keys("https://cdn.example/card.jpg")
        .await
        .unwrap();
    assert_eq!(
        drawn_image.attr("src").await.unwrap().as_deref(),
        Some("https://cdn.example/card.jpg")
    );
    assert_eq!(drawn_image.attr("hidden").await.unwrap(), None);

    // Nothing was saved by typing.
    let (status, link) =
        tokio::task::spawn_blocking(move || system.api().get(&format!("/links/{code}")))
            .await
            .unwrap();
    assert_eq!(status, 200);
    assert!(
        link.get("preview").is_none_or(|card| card.is_null()),
        "{link}"
    );
}

//! Every console page in Chromium at a laptop's width (1366 px) and a phone's (390 px), with data
//! made through the API as a campaign makes it (issue 80): no page scrolls sideways, no element
//! reaches past the viewport, no text is drawn under 11 px (SVG text by its size on screen), and
//! no page logs an error (a refused favicon, script or style included). A screenshot of each
//! page at each width goes to `target/console-screenshots/widths/` (`docs/console/` holds a
//! smaller copy of them).

use serde_json::{json, Value};
use shortlink_e2e::browser::{self, sign_in};
use shortlink_e2e::{paths, System, API_KEY};

const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
                        Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";

/// What is wrong with the page at this width, as sentences: the page's own scroll width, each
/// element reaching past the viewport's right edge (not those inside a box that scrolls or
/// clips: the box itself is checked), each text smaller than 11 px as drawn.
const PROBLEMS: &str = r#"
// The viewport without its scroll bar: what a page wider than shows a sideways scroll bar for.
const width = document.documentElement.clientWidth;
const problems = [];
const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().replace(/\s+/g, '.') : '');
const scroll = document.documentElement.scrollWidth;
if (scroll > width) problems.push(`the page is ${scroll} px wide at ${width}`);
const clipped = (el) => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
        const overflow = getComputedStyle(up).overflowX;
        if (overflow !== 'visible') return true;
    }
    return false;
};
for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > width + 0.5 && !clipped(el)) {
        problems.push(`${name(el)} reaches ${Math.round(box.right)} px: "${el.textContent.trim().slice(0, 40)}"`);
    }
}
const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (texts.nextNode()) {
    const el = texts.currentNode.parentElement;
    if (!texts.currentNode.textContent.trim() || el.closest('title, option, script, style')) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    let size = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement && el.getScreenCTM()) size *= Math.abs(el.getScreenCTM().d);
    if (size < 11) problems.push(`text of ${size.toFixed(1)} px in ${name(el)}: "${texts.currentNode.textContent.trim().slice(0, 40)}"`);
}
return problems;
"#;

/// Two campaigns of per-recipient links with tags, links without a campaign, phone clicks on
/// some through nginx, a mistyped path; returns a code of the first campaign.
fn campaign_data(system: &System) -> String {
    let api = system.api();
    // docs/RULES.md's example rules on the first link: device, country and an A/B split.
    let rules = json!([
        {"if": {"device": ["ios"]}, "then": {"url": "https://apps.apple.com/app/id123"}},
        {"if": {"country": ["PT", "BR"]}, "then": {"url": "https://shop.example/pt", "redirect": 302}},
        {"if": {}, "split": {"sticky": true, "variants": [
            {"weight": 50, "url": "https://shop.example/spring-sale-2026/landing-a"},
            {"weight": 50, "url": "https://shop.example/spring-sale-2026/landing-b"}]}}
    ]);
    let mut items = vec![
        json!({"url": "https://shop.example/spring", "campaign": "spring-sale-2026",
        "ref": "customer-split", "rules": rules}),
    ];
    for i in 0..120 {
        items.push(json!({"url": format!("https://shop.example/spring/collection-{i}?utm_source=sms&utm_campaign=spring-sale-2026"),
            "campaign": "spring-sale-2026", "ref": format!("customer-{i:05}"), "tags": ["sms", "fr", "loyalty-gold"]}));
    }
    for i in 0..40 {
        items.push(json!({"url": format!("https://shop.example/win-back/{i}"),
            "campaign": "win-back", "ref": format!("lapsed-{i:05}")}));
    }
    for i in 0..10 {
        items.push(json!({"url": format!("https://blog.example/a-rather-long-article-title-that-does-not-wrap-{i}")}));
    }
    let (status, results) = api.post_ndjson("/links/batch", ndjson(&items));
    assert_eq!(status, 200, "{results:?}");
    let codes: Vec<String> = results
        .iter()
        .filter_map(|result| result["link"]["code"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(codes.len(), items.len(), "{results:?}");
    for code in codes.iter().step_by(7) {
        let phone = [("user-agent", PHONE_UA), ("accept-language", "fr-FR")];
        let answer = system
            .nginx
            .get_with("s1.test", &format!("/{code}"), &phone);
        assert_eq!(answer.status(), 302);
    }
    // The first link's visits list each verdict with its reasons in words (issue 78): a
    // scanner's HEAD from a desktop agent, WhatsApp's preview fetcher, a script without agent.
    let first = format!("/{}", codes[0]);
    let desktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like \
                   Gecko) Chrome/126.0.0.0 Safari/537.36";
    let head = system.nginx.request_with(
        reqwest::Method::HEAD,
        "s1.test",
        &first,
        &[("user-agent", desktop)],
    );
    assert_eq!(head.status(), 302);
    let preview = [("user-agent", "WhatsApp/2.23.20.0 A")];
    assert_eq!(
        system.nginx.get_with("s1.test", &first, &preview).status(),
        302
    );
    assert_eq!(
        system
            .nginx
            .request_with(reqwest::Method::GET, "s1.test", &first, &[])
            .status(),
        302
    );
    // Stored before the page is drawn: its list holds them. (The phone's clicks above sweep
    // the campaign from one address: scanners too, by hindsight.)
    let stats = format!("/links/{}/stats", codes[0]);
    let stored = testkit::wait_until(std::time::Duration::from_secs(30), || {
        let totals = &api.get(&stats).1["totals"];
        [&totals["previews"], &totals["bots"]] == [1, 1] && totals["scanners"].as_i64() >= Some(1)
    });
    assert!(stored, "{:?}", api.get(&stats));
    system.nginx.get("s1.test", "/no-such-alias-9");
    system.nginx.get("s1.test", "/ab3%E3%80%82");
    let (status, body) = api.post(
        "/domains/s2.test/drain",
        &json!({"reason": "carrier block"}),
    );
    assert_eq!(status, 200, "{body}");
    codes[0].clone()
}

/// The Held back page's rows (issue 79): a threat feed, a listed target refused, then (the
/// workspace holding listed targets for review) two stored quarantined, one of them released.
fn held_data(system: &mut System) {
    let dir = system.database_path().parent().unwrap().to_owned();
    let feed = dir.join("threat-hosts.txt");
    std::fs::write(
        &feed,
        "0.0.0.0 phish.example
0.0.0.0 malware.example
",
    )
    .unwrap();
    let spec = format!("e2e=hosts:{}", feed.display());
    system.restart_sidecar_with(&["--threat-feeds", &spec]);
    let api = system.api();
    let refused = json!({"url": "https://login.phish.example/account/verify?session=expired"});
    assert_eq!(api.post("/links", &refused).0, 422);
    let (status, body) = api.put("/target-lists", &json!({"hold_for_review": true}));
    assert_eq!(status, 200, "{body}");
    let mut codes = Vec::new();
    for url in [
        "https://secure.login.phish.example/a-rather-long-path/verify",
        "https://cdn.malware.example/download",
    ] {
        let (status, body) = api.post("/links", &json!({ "url": url }));
        assert_eq!(status, 201, "{body}");
        codes.push(body["code"].as_str().unwrap().to_owned());
    }
    let (status, body) = api.post(&format!("/links/{}/release", codes[1]), &json!({}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.put("/target-lists", &json!({}));
    assert_eq!(status, 200, "{body}");
}

/// Each page at each width: what [`PROBLEMS`] finds and what the page logged, and its
/// screenshot.
async fn check_pages(
    c: &fantoccini::Client,
    console: &str,
    pages: &[(&str, String)],
    shots: &std::path::Path,
    problems: &mut Vec<String>,
) {
    browser::console_errors(c).await;
    for (width, height) in [(1366, 900), (390, 844)] {
        c.set_window_size(width, height).await.unwrap();
        for (name, path) in pages {
            c.goto(&format!("{console}{path}")).await.unwrap();
            let found = c.execute(PROBLEMS, vec![]).await.unwrap();
            for problem in found.as_array().unwrap() {
                problems.push(format!("{path} at {width}: {}", problem.as_str().unwrap()));
            }
            for error in browser::console_errors(c).await {
                problems.push(format!("{path} at {width} logged: {error}"));
            }
            let png = c.screenshot().await.expect("screenshot");
            std::fs::write(shots.join(format!("{name}-{width}.png")), png).unwrap();
        }
    }
}

fn ndjson(items: &[Value]) -> String {
    items.iter().map(|item| format!("{item}\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_page_fits_a_phone_and_a_laptop() {
    let system = tokio::task::spawn_blocking(System::start).await.unwrap();
    let (system, code) = tokio::task::spawn_blocking(move || {
        let mut system = system;
        held_data(&mut system);
        let code = campaign_data(&system);
        (system, code)
    })
    .await
    .unwrap();
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let chrome = browser::chrome(PHONE_UA, "MAP s1.test 127.0.0.1").await;
    let c = &chrome.client;
    sign_in(c, &console, API_KEY).await;
    let pages = [
        ("overview", "/".to_owned()),
        ("create", "/create".into()),
        ("links", "/links".into()),
        ("links-search", "/links?q=customer-0001".into()),
        ("link", format!("/links/{code}")),
        ("link-hour", format!("/links/{code}?interval=hour")),
        ("link-ab", format!("/links/{code}/ab")),
        ("link-rules", format!("/links/{code}/rules")),
        ("link-card", format!("/links/{code}/card")),
        ("link-revoke", format!("/links/{code}/revoke")),
        ("bulk", "/bulk".into()),
        ("import", "/import".into()),
        ("compose", "/compose".into()),
        ("campaigns", "/campaigns".into()),
        ("campaign", "/campaigns?name=spring-sale-2026".into()),
        (
            "campaign-ab",
            "/campaigns/ab?campaign=spring-sale-2026".into(),
        ),
        (
            "campaign-funnel",
            "/campaigns/spring-sale-2026/funnel".into(),
        ),
        ("domains", "/domains".into()),
        ("not-found", "/not-found".into()),
        ("webhooks", "/webhooks".into()),
        ("audit", "/audit".into()),
        ("held", "/held".into()),
        ("privacy", "/privacy".into()),
        ("workspace", "/workspace".into()),
    ];
    let shots = paths::profile_dir()
        .parent()
        .expect("target/")
        .join("console-screenshots/widths");
    std::fs::create_dir_all(&shots).unwrap();
    // The log is read: a page answered 404 is in it.
    c.goto(&format!("{console}/no-such-page")).await.unwrap();
    let logged = browser::console_errors(c).await;
    assert!(logged.iter().any(|e| e.contains("404")), "{logged:?}");

    let mut problems = Vec::new();
    check_pages(c, &console, &pages, &shots, &mut problems).await;
    // An operator's pages: the operator's key joins the session and acts for the installation.
    let operator = system.sidecar_cli(&["keys", "create", "--name", "ops", "--role", "operator"]);
    assert!(operator.status.success(), "{operator:?}");
    let operator = String::from_utf8(operator.stdout).unwrap();
    c.set_window_size(1366, 900).await.unwrap();
    sign_in(c, &console, operator.trim()).await;
    let operator_pages = [
        ("workspaces", "/workspaces".to_owned()),
        ("workspace-detail", "/workspaces/default".into()),
        ("operator-domains", "/domains".into()),
        ("operator-audit", "/audit".into()),
    ];
    check_pages(c, &console, &operator_pages, &shots, &mut problems).await;
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    chrome.client.clone().close().await.unwrap();
    drop(chrome);
    tokio::task::spawn_blocking(move || drop(system))
        .await
        .unwrap();
}

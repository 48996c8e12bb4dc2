//! The funnel on the campaign's console page: the numbers the API answers, per short domain
//! and per carrier, the delivered rate per time bucket, inside the session's workspace only.

use super::*;
use crate::console::Browser;
use crate::workspaces::{create_workspace, operator_key, workspace_key};

crate::on_each_backend!(the_campaign_page_shows_the_apis_funnel_and_the_delivered_rate);

/// A table row as the page draws one part's counts.
fn row(label: &str, counts: &Value) -> String {
    let n = |key: &str| counts[key].as_i64().unwrap();
    let errors = |key: &str| -> String {
        (counts[key].as_object().unwrap().iter())
            .map(|(code, n)| format!("<br><small class=\"error-code\">err {code}: {n}</small>"))
            .collect()
    };
    let cell = |key: &str| format!("<td class=\"num\">{}</td>", n(key));
    format!(
        "<th scope=\"row\">{label}</th>{}{}{}{}{}<td class=\"num\">{}{}</td>\
         <td class=\"num\">{}{}</td>{}{}{}{}",
        cell("messages"),
        cell("submitted"),
        cell("buffered"),
        cell("unknown"),
        cell("delivered"),
        n("failed"),
        errors("failed_by_error_code"),
        n("rejected"),
        errors("rejected_by_error_code"),
        cell("expired"),
        cell("no_receipt"),
        cell("clicked"),
        cell("converted"),
    )
}

async fn the_campaign_page_shows_the_apis_funnel_and_the_delivered_rate(backend: Backend) {
    // Both hosts the receipts name are the default workspace's domains.
    let app = spawn_app_with(backend, &["--short-domains", "s2.example"]).await;
    let mut codes = Vec::new();
    for i in 0..5 {
        let link = app
            .create(json!({"url": "https://shop.example/", "campaign": "spring sale", "ref": format!("r{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    // Yesterday: a receipt's time older than the receipts' window would be taken as received.
    let day = (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%d");
    let at = |time: &str| format!("{day}T{time}Z");
    let receipt = |i: usize, host: Option<&str>, id: &str, state: &str, at: &str, extra: Value| {
        let mut body = json!({"message_id": id, "state": state, "at": at});
        match host {
            Some(host) => body["short_url"] = json!(format!("https://{host}/{}", codes[i])),
            None => body["code"] = json!(codes[i]),
        }
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body.to_string()
    };
    // 10:00, one of two delivered; nothing ends at 10:01; 10:02, two of three.
    let lines = [
        receipt(
            0,
            Some("s.example"),
            "m1",
            "delivered",
            &at("10:00:05"),
            json!({"carrier": "23410"}),
        ),
        receipt(
            1,
            Some("s.example"),
            "m2",
            "failed",
            &at("10:00:40"),
            json!({"carrier": "23410", "error_code": "005"}),
        ),
        receipt(
            2,
            Some("s2.example"),
            "m3",
            "rejected",
            &at("10:02:00"),
            json!({"carrier": "20801", "error_code": "88"}),
        ),
        receipt(3, None, "m4", "delivered", &at("10:02:10"), json!({})),
        receipt(3, None, "m5", "delivered", &at("10:02:20"), json!({})),
        // Not final: in the funnel, not in the rate.
        receipt(
            4,
            Some("s2.example"),
            "m6",
            "submitted",
            &at("10:03:00"),
            json!({}),
        ),
    ];
    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!(status, 200);
    assert!(answers.iter().all(|a| a["status"] == 201), "{answers:?}");
    let funnel = app.get_json("/campaigns/spring%20sale/funnel").await;

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let campaign = browser.page("/console/campaigns?name=spring+sale").await;
    let path = "/console/campaigns/spring%20sale/funnel";
    assert!(campaign.contains(&format!("href=\"{path}\"")), "{campaign}");
    let page = browser.page(path).await;

    let mut expected = vec![row("All", &funnel["total"])];
    for (list, key) in [("by_domain", "short_domain"), ("by_carrier", "carrier")] {
        for part in funnel[list].as_array().unwrap() {
            let label = part[key].as_str().unwrap_or("(none named)");
            expected.push(row(label, &part["counts"]));
        }
    }
    // Two domains and the links no receipt named by URL; two carriers and the rest.
    assert_eq!(expected.len(), 7, "{funnel}");
    for row in &expected {
        assert!(page.contains(row.as_str()), "{row}\nnot in\n{page}");
    }
    assert!(expected[0].contains("err 005: 1") && expected[0].contains("err 88: 1"));
    // Each step among the one before: clicked among delivered, converted among those.
    let total = &funnel["total"];
    for (card, value) in [
        ("Links", &funnel["links"]),
        ("Clicked", &total["clicked_delivered"]),
        ("Converted", &total["converted_delivered"]),
    ] {
        assert!(page.contains(&format!("{card}<b>{value}</b>")), "{card}");
    }
    let beside = total["clicked"].as_i64().unwrap() - total["clicked_delivered"].as_i64().unwrap();
    assert!(
        page.contains(&format!("Clicked, not reported delivered<b>{beside}</b>")),
        "{page}"
    );
    assert!(total["clicked_delivered"].as_i64() <= total["delivered"].as_i64());
    assert!(
        page.contains("Delivered<b>3</b>") && page.contains("Sent<b>6</b>"),
        "{page}"
    );

    let points: Vec<&str> = page
        .split("<line class=\"point\"")
        .skip(1)
        .map(|point| {
            point
                .split("<title>")
                .nth(1)
                .unwrap()
                .split("</title>")
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        points,
        [
            format!("{day} 10:00 UTC: 1 of 2 delivered (50%)"),
            format!("{day} 10:02 UTC: 2 of 3 delivered (67%)")
        ]
    );
    assert!(page.contains("falls in each minute"), "{page}");

    // Another workspace's session: the same page of the campaign is a missing one's.
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let viewer = workspace_key(&app, &operator, "brand-b", "viewer").await;
    let mut other = Browser::new(&app);
    other.sign_in(&viewer).await;
    let theirs = other.get(path).await;
    assert_eq!(theirs.status(), 404);
    let theirs = theirs.text().await.unwrap();
    assert!(theirs.contains("no link has this campaign"), "{theirs}");
    for mark in codes
        .iter()
        .map(String::as_str)
        .chain(["s.example", "23410", "err 005"])
    {
        assert!(!theirs.contains(mark), "{mark} in {theirs}");
    }
}

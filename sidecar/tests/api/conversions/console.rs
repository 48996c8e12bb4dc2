//! The console's A/B pages: per variant clicks, conversions and rates with interval bars, the
//! verdict in words and the clicks still needed; another workspace's link is not found.

use super::*;
use crate::console::Browser;
use shortlink_visits::conversions::{ab_result, ArmCounts};

#[tokio::test]
async fn the_ab_pages_show_rates_intervals_and_the_verdict() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = link(&app, "spring", "r-1").await;
    let t = now_ms() - 60_000;
    let mut visits = Vec::new();
    for person in 0..40u32 {
        let rule = if person % 2 == 0 { "0.0" } else { "0.1" };
        let ip = format!("198.51.100.{}", person + 1);
        visits.push(visit(
            &format!("17000000{person:05}-0"),
            &code,
            t,
            &ip,
            IPHONE,
            Some(rule),
        ));
    }
    store(&app, &visits).await;
    for person in [1u32, 3, 5, 7, 2] {
        let (status, body) = post(
            &app,
            &json!({"click_id": format!("17000000{person:05}-0"), "name": "purchase",
                    "value": "12.50", "currency": "EUR", "event_id": format!("o-{person}")}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // The verdict the page must show: the one the results give for these counts.
    let counts = |rule: &str, converting| ArmCounts {
        rule: Some(rule.to_owned()),
        clicks: 20,
        visitors: 20,
        conversions: converting,
        converting_visitors: converting,
        values: Vec::new(),
    };
    let expected = ab_result(vec![counts("0.0", 1), counts("0.1", 4)]);
    let verdict = &expected.splits[0].variants[0].verdict;
    let (more_control, more_variant) = expected.splits[0].variants[0].more_clicks.unwrap();

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let detail = browser.page(&format!("/console/links/{code}")).await;
    assert!(
        detail.contains(&format!("/console/links/{code}/ab")),
        "linked from the link's page"
    );
    let page = browser.page(&format!("/console/links/{code}/ab")).await;
    assert!(
        page.contains(&maud::html! { (verdict) }.into_string()),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "About {more_control} more clicks on the control and {more_variant} on arm B"
        )),
        "{page}"
    );
    assert!(page.contains("<svg"), "the chart");
    assert_eq!(
        page.matches("<line").count(),
        6,
        "two arms, three lines of whiskers each"
    );
    assert!(
        page.contains("5.00%") && page.contains("20.00%"),
        "the rates: {page}"
    );
    assert!(
        page.contains("12.50 EUR") && page.contains("50.00 EUR"),
        "the values: {page}"
    );
    // Only leads: none.
    let leads = browser
        .page(&format!("/console/links/{code}/ab?name=lead"))
        .await;
    assert!(leads.contains("0.00%"));

    let campaign = browser.page("/console/campaigns/ab?campaign=spring").await;
    assert!(campaign.contains(&maud::html! { (verdict) }.into_string()));
    let listed = browser.page("/console/campaigns?name=spring").await;
    assert!(listed.contains("/console/campaigns/ab?campaign=spring"));
    assert_eq!(
        browser
            .get("/console/campaigns/ab?campaign=nobody")
            .await
            .status(),
        404
    );
    assert_eq!(
        browser.get("/console/links/nobody-here/ab").await.status(),
        404
    );
}

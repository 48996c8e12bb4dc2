//! Every number a console page shows about campaigns is the API's number for the same data
//! (issue 80: the overview summed only the 50 most clicked links' clicks).

use crate::console::Browser;
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

crate::on_each_backend!(
    the_overview_s_campaigns_are_the_api_s,
    the_campaigns_pages_numbers_are_the_api_s,
);

/// The number a page shows in the cell marked `data-<attribute>="<campaign>"`.
pub(crate) fn cell(page: &str, attribute: &str, campaign: &str) -> i64 {
    number_at(page, &format!("data-{attribute}=\"{campaign}\">"))
}

fn number_at(page: &str, marker: &str) -> i64 {
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {page}"))
        + marker.len();
    let text: String = page[start..].chars().take_while(|c| *c != '<').collect();
    text.replace(',', "")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{marker}: {text}"))
}

/// Three campaigns of 60, 25 and 5 links, their links' visit counts set in SQL: more links than
/// the 50 the overview used to sum, so a sample of the most clicked would come out short.
pub(crate) async fn three_campaigns(app: &TestApp) -> [&'static str; 3] {
    let names = ["spring", "summer", "autumn"];
    for (name, count) in names.iter().zip([60, 25, 5]) {
        let items: Vec<_> = (0..count)
            .map(|i| {
                json!({"url": format!("https://shop.example/{name}/{i}"), "campaign": name,
                "ref": format!("{name}-{i}")})
            })
            .collect();
        let response = app.post_batch(&items).await;
        assert_eq!(response.status(), StatusCode::OK);
        // The answer streams: read to its end, the last item committed.
        let results = response.text().await.unwrap();
        assert_eq!(
            results.matches("\"status\":201").count(),
            count,
            "{results}"
        );
    }
    // 1 + (length of the code mod 3) each: unequal, and every link counts.
    let changed = app
        .db
        .execute("UPDATE links SET visit_count = 1 + LENGTH(recipient_ref) % 3")
        .await;
    assert_eq!(changed, 90);
    names
}

async fn the_overview_s_campaigns_are_the_api_s(backend: Backend) {
    let app = spawn_app(backend).await;
    let names = three_campaigns(&app).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let overview = browser.page("/console/").await;
    for name in names {
        let api = app.get_json(&format!("/campaigns/{name}")).await;
        assert_eq!(
            cell(&overview, "campaign-visits", name),
            api["visits"].as_i64().unwrap()
        );
        assert_eq!(
            cell(&overview, "campaign-links", name),
            api["links"].as_i64().unwrap()
        );
    }
    // Most visited first.
    let at = |name| {
        overview
            .find(&format!("data-campaign-visits=\"{name}\""))
            .unwrap()
    };
    assert!(
        at("spring") < at("summer") && at("summer") < at("autumn"),
        "{overview}"
    );
}

async fn the_campaigns_pages_numbers_are_the_api_s(backend: Backend) {
    let app = spawn_app(backend).await;
    let names = three_campaigns(&app).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let list = browser.page("/console/campaigns").await;
    for name in names {
        let api = app.get_json(&format!("/campaigns/{name}")).await;
        for (attribute, key) in [
            ("campaign-links", "links"),
            ("campaign-live", "live"),
            ("campaign-visits", "visits"),
        ] {
            assert_eq!(
                cell(&list, attribute, name),
                api[key].as_i64().unwrap(),
                "{name} {key}"
            );
        }

        // The campaign's page: the funnel's and the A/B results' numbers.
        let page = browser
            .page(&format!("/console/campaigns?name={name}"))
            .await;
        let funnel = app.get_json(&format!("/campaigns/{name}/funnel")).await;
        let total = &funnel["total"];
        let sent = total["messages"].as_i64().unwrap() - total["no_receipt"].as_i64().unwrap();
        let ab = app.get_json(&format!("/campaigns/{name}/ab")).await;
        let conversions: i64 = (ab["arms"].as_array().unwrap().iter())
            .map(|arm| arm["conversions"].as_i64().unwrap())
            .sum();
        for (number, expected) in [
            ("links", funnel["links"].as_i64().unwrap()),
            ("sent", sent),
            ("delivered", total["delivered"].as_i64().unwrap()),
            ("clicked", funnel["clicked"].as_i64().unwrap()),
            ("conversions", conversions),
        ] {
            let shown = number_at(&page, &format!("data-number=\"{number}\">"));
            assert_eq!(shown, expected, "{name} {number}: {page}");
        }
    }
}

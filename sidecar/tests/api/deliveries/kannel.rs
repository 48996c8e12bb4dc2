//! Reports from a real Kannel (Debian's 1.4.5, started by the test): messages sent through its
//! `sendsms` with the `dlr-url` docs/DELIVERIES.md gives, to an SMSC that delivers, fails or
//! rejects them by their short domain; the reports travel SMSC → Kannel → shortlink, and the
//! campaign's funnel counts each message once, by its final state, under its short domain.

use super::*;
use std::time::Duration;

/// Messages per short domain: on `s1.example` delivered but every third, which fails (absent
/// subscriber, `err:005`); on `s2.example` all rejected at submission (a carrier filtering it).
const PER_DOMAIN: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kannel_reports_reach_the_campaigns_funnel() {
    let app = spawn_app_with(
        Backend::Sqlite,
        &["--short-domains", "s1.example,s2.example"],
    )
    .await;
    let (smsc, kannel) = kannel_on_smsc(by_domain_and_word);
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;

    let mut sent = 0;
    for host in ["s1.example", "s2.example"] {
        for i in 0..PER_DOMAIN {
            let link = app
                .create(json!({"url": "https://shop.example/", "campaign": "spring"}))
                .await;
            let code = link["code"].as_str().unwrap();
            let short_url = format!("https://{host}/{code}");
            let word = if i % 3 == 2 { "absent" } else { "sale" };
            let (to, mid) = (format!("+44740000{sent:04}"), format!("spring-{sent}"));
            let text = format!("Spring {word}: {short_url}");
            // Reports: delivered, failed, accepted by the SMSC, rejected by it.
            send_through_kannel(
                &app,
                &kannel,
                &token,
                (&to, &mid),
                (&short_url, &text),
                "27",
            )
            .await;
            sent += 1;
        }
    }
    // Every message ends delivered, failed or rejected (Kannel's 8 comes before, or not at all).
    let finals = || async {
        (app.db)
            .scalar("SELECT COUNT(*) FROM delivery_messages WHERE state IN ('delivered', 'failed', 'rejected')")
            .await
            == sent as i64
    };
    assert!(
        eventually(Duration::from_secs(60), finals).await,
        "the reports came back\n{}",
        kannel.logs()
    );
    assert_eq!(smsc.submitted().len(), sent);

    let funnel = app.get_json("/campaigns/spring/funnel").await;
    let total = &funnel["total"];
    let failed = PER_DOMAIN / 3;
    assert_eq!(
        [
            &total["messages"],
            &total["delivered"],
            &total["failed"],
            &total["rejected"]
        ],
        [
            &json!(sent),
            &json!(PER_DOMAIN - failed),
            &json!(failed),
            &json!(PER_DOMAIN)
        ],
        "{funnel}"
    );
    assert_eq!(total["failed_by_error_code"], json!({"005": failed}));
    let domain = |host: &str| {
        (funnel["by_domain"].as_array().unwrap().iter())
            .find(|part| part["short_domain"] == host)
            .unwrap_or_else(|| panic!("{host}: {funnel}"))["counts"]
            .clone()
    };
    assert_eq!(domain("s2.example")["rejected"], json!(PER_DOMAIN));
    assert_eq!(domain("s2.example")["delivered"], json!(0));
    assert_eq!(
        domain("s1.example")["delivered"],
        json!(PER_DOMAIN - failed)
    );
}

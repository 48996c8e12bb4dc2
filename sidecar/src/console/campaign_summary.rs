//! A campaign's numbers at the top of its page: links, messages sent, the delivered rate, people
//! who clicked, conversions and their value; then its visits by verdict (people, previews,
//! scanners, bots: the API's `GET /api/v1/campaigns/{campaign}` `audience`). The same reads as the API's funnel
//! (`GET /api/v1/campaigns/{campaign}/funnel`) and A/B results (`…/ab`), so a number here is the
//! number the API answers; they read every link of the campaign, so only the page's first
//! screen shows them (the next pages of recipients do not count again).

use maud::{html, Markup};
use shortlink_api::AppState;
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use shortlink_visits::conversions::{Money, Scope};
use shortlink_visits::deliveries::DeliveryState;
use std::collections::BTreeMap;

pub async fn cards(state: &AppState, workspace: WorkspaceId, name: &str) -> StorageResult<Markup> {
    let funnels = state.analytics.store.funnels();
    let conversions = state.analytics.store.conversions();
    let scope = Scope::Campaign(name.to_owned());
    let (funnel, arms, audience) = tokio::try_join!(
        funnels.funnel(workspace, name),
        conversions.arm_counts(workspace, &scope, None),
        state.analytics.store.campaign_counts(workspace, name)
    )?;
    let Some(funnel) = funnel else {
        return Ok(html! {});
    };
    let total = &funnel.total;
    let sent = total.units - total.no_receipt;
    let delivered = total.state(DeliveryState::Delivered);
    let converted: i64 = arms.iter().map(|arm| arm.conversions).sum();
    // Value by currency, summed over the arms (each arm's values are by currency already).
    let mut values: BTreeMap<(String, u8), i64> = BTreeMap::new();
    for arm in &arms {
        for (currency, exponent, minor) in &arm.values {
            *values.entry((currency.clone(), *exponent)).or_default() += minor;
        }
    }
    Ok(html! {
        div.cards.campaign-numbers {
            div.card { "Links" b data-number="links" { (funnel.links) } }
            div.card { "Messages sent" b data-number="sent" { (sent) } }
            div.card { "Delivered"
                b data-number="delivered" { (delivered) }
                small { @if sent > 0 { (format!("{:.1}", delivered as f64 * 100.0 / sent as f64)) "% of those sent" } @else { "no receipt yet" } }
            }
            div.card { "People who clicked" b data-number="clicked" { (funnel.clicked_links) } }
            div.card { "Conversions" b data-number="conversions" { (converted) } }
            div.card { "Value"
                b data-number="value" {
                    @if values.is_empty() { "—" }
                    @for (i, ((currency, exponent), minor)) in values.iter().enumerate() {
                        @if i > 0 { br; }
                        (Money::text(*minor, *exponent)) " " (currency)
                    }
                }
            }
        }
        p.hint { "People who clicked: recipients (links) with a human click. Sent: messages a "
            "gateway reported anything of. Delivered: their final report said so." }
        // The API's `audience` of GET /api/v1/campaigns/{campaign}.
        div.cards.campaign-audience {
            div.card { "Visits by people" b data-audience="humans" { (audience.humans) } }
            div.card { "Link previews" b data-audience="previews" { (audience.previews) } }
            div.card { "Scanners" b data-audience="scanners" { (audience.scanners) } }
            div.card { "Bots" b data-audience="bots" { (audience.bots) } }
        }
        p.hint { "Every fetch of the campaign's links by verdict: previews draw a messaging app's "
            "card, scanners judge the target for a carrier or a security service, bots are the "
            "rest. Only people count in the numbers above; a sweep noticed later moves its "
            "visits here once (docs/BOTS.md)." }
    })
}

//! `GET /api/v1/campaigns/{campaign}/funnel`: a campaign's messages by what the gateways last
//! reported of each, then clicked and converted; per campaign, per short domain and per carrier
//! (`shortlink_visits::deliveries::funnel` says what is counted how).

use crate::{AppState, Error, ErrorBody, InWorkspace, Json, Path, Result};
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use shortlink_visits::deliveries::{DeliveryState, FunnelCounts};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One part's counts. Messages are counted by their current state (a final state is never
/// replaced by a non-final one; among finals the later gateway time wins).
#[derive(Debug, Serialize, ToSchema)]
pub struct FunnelCountsView {
    /// Messages with a receipt, plus links with none (`no_receipt`).
    pub messages: i64,
    pub submitted: i64,
    pub buffered: i64,
    pub unknown: i64,
    pub delivered: i64,
    pub failed: i64,
    /// Failed messages by the gateway's error code (`""`: none given).
    pub failed_by_error_code: BTreeMap<String, i64>,
    pub rejected: i64,
    pub rejected_by_error_code: BTreeMap<String, i64>,
    pub expired: i64,
    /// Links no gateway reported anything of.
    pub no_receipt: i64,
    /// Of `messages`, those whose link had a human click, and a conversion.
    pub clicked: i64,
    pub converted: i64,
    /// Of `delivered`, those whose link had a human click: the funnel's step after delivered
    /// (`clicked` − `clicked_delivered` were clicked with no delivery report).
    pub clicked_delivered: i64,
    /// Of `clicked_delivered`, those whose link had a conversion.
    pub converted_delivered: i64,
}

impl From<FunnelCounts> for FunnelCountsView {
    fn from(c: FunnelCounts) -> Self {
        use DeliveryState::*;
        FunnelCountsView {
            messages: c.units,
            submitted: c.state(Submitted),
            buffered: c.state(Buffered),
            unknown: c.state(Unknown),
            delivered: c.state(Delivered),
            failed: c.state(Failed),
            rejected: c.state(Rejected),
            expired: c.state(Expired),
            no_receipt: c.no_receipt,
            clicked: c.clicked,
            converted: c.converted,
            clicked_delivered: c.clicked_delivered,
            converted_delivered: c.converted_delivered,
            failed_by_error_code: c.failed_errors,
            rejected_by_error_code: c.rejected_errors,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DomainFunnel {
    /// The host of the short URL the receipts named; `null`: none did (links do not record
    /// the domain they were sent on; name the link by `short_url` to have it here).
    pub short_domain: Option<String>,
    pub counts: FunnelCountsView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CarrierFunnel {
    /// MCC-MNC or the gateway's name of the route; `null`: no receipt named one.
    pub carrier: Option<String>,
    pub counts: FunnelCountsView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FunnelView {
    pub campaign: String,
    /// Links of the campaign, those with a human click, and those with a conversion.
    pub links: i64,
    pub clicked: i64,
    pub converted: i64,
    pub total: FunnelCountsView,
    pub by_domain: Vec<DomainFunnel>,
    pub by_carrier: Vec<CarrierFunnel>,
}

/// A campaign's delivery funnel: submitted → delivered → clicked → converted.
#[utoipa::path(get, path = "/api/v1/campaigns/{campaign}/funnel", tag = "deliveries",
    params(("campaign" = String, Path)),
    responses(
        (status = 200, body = FunnelView),
        (status = 404, description = "no link has this campaign", body = ErrorBody),
    ))]
pub async fn campaign_funnel(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(campaign): Path<String>,
) -> Result<Json<FunnelView>> {
    let funnel = (state
        .analytics
        .store
        .funnels()
        .funnel(workspace, &campaign)
        .await?)
        .ok_or(Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: "no link has this campaign".into(),
        })?;
    Ok(Json(FunnelView {
        campaign,
        links: funnel.links,
        clicked: funnel.clicked_links,
        converted: funnel.converted_links,
        total: funnel.total.into(),
        by_domain: (funnel.by_domain.into_iter())
            .map(|(short_domain, counts)| DomainFunnel {
                short_domain,
                counts: counts.into(),
            })
            .collect(),
        by_carrier: (funnel.by_carrier.into_iter())
            .map(|(carrier, counts)| CarrierFunnel {
                carrier,
                counts: counts.into(),
            })
            .collect(),
    }))
}

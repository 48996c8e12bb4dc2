//! The OpenAPI document (`/api/v1/openapi.json`), generated from the handlers and types.

use super::error::{ErrorBody, ErrorDetail};
use super::stats::RangeBound;
use super::{
    audit, batch, campaigns, compose, conversions, deliveries, domains, gateway, health,
    link_visits, links, orphans, preview, qr, quarantines, resolve, retention, stats, subjects,
    target_lists, visits, webhooks, workspace_metrics, workspaces,
};
use shortlink_model::schema::SchemaFixes;
use utoipa::OpenApi;

/// The OpenAPI document, generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "shortlink sidecar",
        description = "Issues short codes for SMS campaigns; SQL is the source of truth, Redis the \
                       projection nginx reads. Every /api/v1 route needs `Authorization: Bearer <key>`."
    ),
    paths(
        links::create_link,
        links::list_links,
        links::get_link,
        links::update_link,
        links::revoke_link,
        preview::preview,
        batch::create_batch,
        compose::compose,
        campaigns::get_campaign,
        conversions::ingest::post_conversions,
        conversions::ab::link_ab,
        conversions::ab::campaign_ab,
        deliveries::ingest::post_deliveries,
        deliveries::tokens::create_token,
        deliveries::tokens::list_tokens,
        deliveries::tokens::revoke_token,
        deliveries::funnel::campaign_funnel,
        deliveries::callbacks::kannel_dlr,
        deliveries::callbacks::twilio_status,
        deliveries::callbacks::vonage_get,
        deliveries::callbacks::vonage_post,
        deliveries::callbacks::ping,
        gateway::settings::put_gateway,
        gateway::settings::get_gateway,
        gateway::settings::delete_gateway,
        gateway::send_job,
        domains::list_domains,
        domains::get_domain,
        domains::restore_domain,
        domains::pin_domain,
        domains::drain_domain,
        domains::unclicked::unclicked_links,
        domains::reissue::reissue_links,
        target_lists::get_lists,
        target_lists::put_lists,
        quarantines::list_quarantines,
        quarantines::release_link,
        domains::not_found::get_workspace,
        domains::not_found::put_workspace,
        domains::not_found::get_domain,
        domains::not_found::put_domain,
        domains::not_found::delete_domain,
        resolve::resolve,
        stats::link_stats,
        stats::global_stats,
        qr::link_qr,
        visits::visit_feed,
        link_visits::link_visits,
        orphans::orphan_visits,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::replace_webhook,
        webhooks::delete_webhook,
        webhooks::webhook_failures,
        webhooks::replay_webhook,
        workspaces::list_workspaces,
        workspaces::create_workspace,
        workspaces::get_workspace,
        workspaces::change_workspace,
        workspaces::delete_workspace,
        workspaces::list_workspace_keys,
        workspaces::create_workspace_key,
        workspaces::revoke_workspace_key,
        workspaces::own_workspace,
        workspace_metrics::workspace_metrics,
        workspaces::list_keys,
        workspaces::create_key,
        workspaces::revoke_key,
        audit::list_audit,
        subjects::export_subject,
        subjects::erase_subject,
        subjects::list_requests,
        retention::get_retention,
        retention::put_retention,
        health::healthz,
        health::readyz,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        compose::RecipientResult,
        compose::SummaryLine,
        shortlink_core::service::compose::OverBudget,
        shortlink_webhooks::FeedEvent,
        shortlink_webhooks::event::LinkEventView
    )),
    modifiers(&BearerAuth, &CommonResponses, &SchemaFixes, &RangeBound),
    security(("api_key" = [])),
    tags((name = "links"), (name = "domains"), (name = "resolve"), (name = "stats"), (name = "visits"), (name = "conversions"), (name = "deliveries"), (name = "webhooks"), (name = "audit"), (name = "subjects"), (name = "workspaces"), (name = "keys"), (name = "health"))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The answers any `/api/v1` operation can give besides its own: those of the auth layer and of
/// a failing dependency, and for one with a body, a body too large. Added here once so that every
/// operation lists them.
struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        const COMMON: [(&str, &str); 4] = [
            (
                "401",
                "no API key, or not a valid one (`missing_api_key`, `invalid_api_key`)",
            ),
            (
                "403",
                "the key's role does not allow this operation (`forbidden`)",
            ),
            (
                "500",
                "an internal error; the details are in the sidecar's log",
            ),
            (
                "503",
                "the database or Redis is unavailable; nothing was stored",
            ),
        ];
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/api/v1/") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                // Every body is read under a limit (the JSON extractor's, NDJSON's per line).
                let with_body = operation.request_body.is_some().then_some((
                    "413",
                    "`payload_too_large`: the body is over the operation's limit",
                ));
                for (status, description) in COMMON.into_iter().chain(with_body) {
                    let response = ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build();
                    operation
                        .responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert(response.into());
                }
            }
        }
    }
}

pub(super) async fn serve() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}

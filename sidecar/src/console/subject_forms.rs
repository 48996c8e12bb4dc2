//! The Privacy page's two actions on one person's data (issue 80): export it (a download of the
//! NDJSON `POST /api/v1/subjects/export` answers) and erase it (`POST /api/v1/subjects/erase`),
//! the erase only after a page that says what it does and asks again. Both call the API's own
//! handlers, so the page can neither do more nor less than a key can. The person is named by
//! their `ref` (optionally within a campaign) or by one link's code; like the API, the ref
//! travels only in a POST body, never in a URL a log would keep.

use super::form::{AdminForm, Posted};
use super::layout;
use super::operator::Operator;
use super::page::PageResult;
use axum::extract::State;
use axum::http::header::CONTENT_DISPOSITION;
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::subjects::{
    self, ByCampaignRef, ByCode, ByRef, EraseByCampaignRef, EraseByCode, EraseByRef, EraseRequest,
    SubjectSelector,
};
use shortlink_api::{AppState, Error, InWorkspace, Json, Recorder};

#[derive(Debug, Default, Deserialize)]
pub struct SubjectForm {
    /// `ref` or `code`.
    #[serde(default)]
    by: String,
    #[serde(default)]
    value: String,
    /// With `by=ref`: only this campaign's links.
    #[serde(default)]
    campaign: String,
    /// The erase's second step: the request id the first step made (and its "yes").
    #[serde(default)]
    request_id: String,
}

impl SubjectForm {
    fn selector(&self) -> Result<SubjectSelector, Error> {
        let value = self.value.trim().to_owned();
        if value.is_empty() {
            return Err(Error::invalid(
                "invalid_selector",
                "say whose data: a ref or a code",
            ));
        }
        let campaign = self.campaign.trim().to_owned();
        Ok(match (self.by.as_str(), campaign.is_empty()) {
            ("code", _) => SubjectSelector::Code(ByCode { code: value }),
            ("ref", true) => SubjectSelector::Ref(ByRef {
                recipient_ref: value,
            }),
            ("ref", false) => SubjectSelector::CampaignRef(ByCampaignRef {
                campaign,
                recipient_ref: value,
            }),
            _ => return Err(Error::invalid("invalid_selector", "by must be ref or code")),
        })
    }

    /// Who the request names, in words (shown on the confirm page only, to the admin who typed it).
    fn whom(&self) -> String {
        match (self.by.as_str(), self.campaign.trim()) {
            ("code", _) => format!("the recipient of link {}", self.value.trim()),
            (_, "") => format!("every link with ref {}", self.value.trim()),
            (_, campaign) => format!(
                "the links of campaign {campaign} with ref {}",
                self.value.trim()
            ),
        }
    }
}

/// The two forms under the requests' list.
pub fn forms(operator: &Operator) -> Markup {
    let fields = html! {
        (layout::csrf(operator))
        label { "Find them by"
            select name="by" { option value="ref" { "their ref" } option value="code" { "a link's code" } }
        }
        label { "Ref or code" input type="text" name="value" required maxlength="256"; }
        label { "Campaign (optional, with a ref)" input type="text" name="campaign" maxlength="256"; }
    };
    html! {
        h2 { "Export a person's data" }
        form.inline.subject method="post" action="/console/privacy/export" {
            (fields) button type="submit" { "Download (NDJSON)" }
        }
        h2 { "Erase a person's data" }
        form.inline.subject method="post" action="/console/privacy/erase" {
            (fields) button.danger type="submit" { "Erase…" }
        }
        p.hint { "Erase asks again before it does anything." }
    }
}

pub async fn export(
    State(state): State<AppState>,
    operator: Operator,
    Posted(form, ..): AdminForm<SubjectForm>,
) -> PageResult {
    let selector = form.selector()?;
    let mut answer = subjects::export_subject(
        State(state),
        InWorkspace(operator.workspace),
        Json(selector),
    )
    .await?;
    answer.headers_mut().insert(
        CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"subject-export.ndjson\""),
    );
    Ok(answer)
}

pub async fn erase(
    State(state): State<AppState>,
    operator: Operator,
    Posted(form, origin, ..): AdminForm<SubjectForm>,
) -> PageResult {
    form.selector()?;
    if form.request_id.is_empty() {
        return confirm(&operator, &form);
    }
    let id = form.request_id.clone();
    let value = form.value.trim().to_owned();
    let request = match form.selector()? {
        SubjectSelector::Code(_) => EraseRequest::Code(EraseByCode {
            request_id: id,
            code: value,
        }),
        SubjectSelector::Ref(_) => EraseRequest::Ref(EraseByRef {
            request_id: id,
            recipient_ref: value,
        }),
        SubjectSelector::CampaignRef(by) => EraseRequest::CampaignRef(EraseByCampaignRef {
            request_id: id,
            campaign: by.campaign,
            recipient_ref: value,
        }),
    };
    let Json(done) = subjects::erase_subject(
        State(state),
        InWorkspace(operator.workspace),
        Recorder(origin),
        Json(request),
    )
    .await?;
    let body = html! {
        h1 { "Erased" }
        p.ok role="status" { (done.links) " links kept working without their ref, "
            (done.visits) " visits and " (done.conversions) " conversions deleted." }
        p { "The request is " code { (done.id) } " in the list and the audit log." }
        p { a href="/console/privacy" { "Back to privacy requests" } }
    };
    Ok(layout::page(&operator, "Erased", body).into_response())
}

/// The erase's first step: what it will do, and one button that does it. The request id is
/// made here, so that pressing the button twice finishes one request, not two.
fn confirm(operator: &Operator, form: &SubjectForm) -> PageResult {
    let request_id = super::session::random_token()?;
    let body = html! {
        h1 { "Erase " (form.whom()) "?" }
        p { "Their visits and conversions are deleted; their links keep working with the ref "
            "replaced by a random one. This cannot be undone (docs/PRIVACY.md)." }
        form method="post" action="/console/privacy/erase" {
            (layout::csrf(operator))
            input type="hidden" name="by" value=(form.by);
            input type="hidden" name="value" value=(form.value);
            input type="hidden" name="campaign" value=(form.campaign);
            input type="hidden" name="request_id" value=(request_id);
            button.danger type="submit" { "Erase now" }
            " "
            a href="/console/privacy" { "Cancel" }
        }
    };
    Ok(layout::page(operator, "Erase?", body).into_response())
}

//! The composer (issue 37): a campaign's template and options, a counter (characters, encoding,
//! segments) kept live by the console's script as the template is typed, and a sample of the
//! messages of a few pasted recipients. The sample is a dry run of the API's own compose
//! handler, so the console shows what the API answers; nothing is issued from here.

use super::form::{IssuerForm, Posted};
use super::layout;
use super::operator::Operator;
use super::page::{refused_form, PageResult};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;
use shortlink_api::compose::{self, ComposeParams};
use shortlink_api::{self, ApiKeyId, AppState, DomainContext, Error};
use shortlink_core::service::compose::{Campaign, CampaignSpec};
use shortlink_core::service::CLI_API_KEY_ID;
use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Actor, Origin};
use std::collections::BTreeMap;

/// Most recipients in a sample (a campaign goes through the API or the command line).
pub const MAX_SAMPLE: usize = 20;
/// Largest answer of a sample read back (20 recipients' lines and the summary fit many times).
const MAX_ANSWER_BYTES: usize = 1 << 20;

const EXAMPLE_RECIPIENTS: &str =
    "phone,name,url\n+33612345678,Ann,https://shop.example/sale\n+447400123456,Bartholomew,https://shop.example/sale";

#[derive(Debug, Default, Deserialize)]
pub struct ComposeForm {
    #[serde(default)]
    template: String,
    /// CSV with its header line, as the API takes it.
    #[serde(default)]
    recipients: String,
    #[serde(default)]
    country: String,
    #[serde(default)]
    budget: String,
    #[serde(default)]
    languages: String,
    strip_scheme: Option<String>,
    replace_lookalikes: Option<String>,
    shortest_domain: Option<String>,
}

impl ComposeForm {
    fn params(&self) -> Result<ComposeParams, Error> {
        let budget = match self.budget.trim() {
            "" => None,
            text => Some(text.parse().map_err(|_| {
                Error::invalid("invalid_budget", "the budget is a number of segments")
            })?),
        };
        let text = |value: &str| Some(value.trim().to_owned()).filter(|v| !v.is_empty());
        Ok(ComposeParams {
            template: self.template.clone(),
            url_template: None,
            campaign: None,
            budget,
            over_budget: None,
            strip_scheme: Some(self.strip_scheme.is_some()),
            replace_lookalikes: Some(self.replace_lookalikes.is_some()),
            shortest_domain: Some(self.shortest_domain.is_some()),
            languages: text(&self.languages),
            country: text(&self.country),
            dry_run: Some(true),
            click_id_param: None,
            // The console only previews (a dry run): it sends nothing.
            send: None,
        })
    }

    /// The pasted recipients' header columns and first recipient's variables.
    fn first_recipient(&self) -> (Vec<String>, BTreeMap<String, String>) {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(self.recipients.as_bytes());
        let columns: Vec<String> = match reader.headers() {
            Ok(header) => header.iter().map(|c| c.trim().to_owned()).collect(),
            Err(_) => return Default::default(),
        };
        let first = reader.records().next().and_then(Result::ok);
        let variables = (columns.iter())
            .zip(first.iter().flat_map(|record| record.iter()))
            .map(|(name, value)| (name.clone(), value.trim().to_owned()))
            .collect();
        (columns, variables)
    }
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
) -> PageResult {
    operator.require_issue()?;
    let form = ComposeForm {
        template: "Hi {{name}}, 20% off today: {{link}} Reply STOP to end".into(),
        recipients: EXAMPLE_RECIPIENTS.into(),
        country: "FR".into(),
        budget: "1".into(),
        ..ComposeForm::default()
    };
    let counter = counter(&state, &domains, &form);
    Ok(render(&operator, &form, &counter, None, None))
}

/// The sample: a dry run of the pasted recipients through the API's handler.
pub async fn sample(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Posted(form, ..): IssuerForm<ComposeForm>,
) -> PageResult {
    let counter = counter(&state, &domains, &form);
    match dry_run(state, operator.workspace, domains, &form).await {
        Ok(lines) => Ok(render(&operator, &form, &counter, Some(&lines), None)),
        Err(error) => Ok(refused_form(error, |message| {
            render(&operator, &form, &counter, None, Some(message))
        })),
    }
}

/// The counter's line for the script: `{"text": …}`.
pub async fn count(
    State(state): State<AppState>,
    // Read before `DomainContext`, which then names the session's workspace's domains.
    _operator: Operator,
    domains: DomainContext,
    Posted(form, ..): IssuerForm<ComposeForm>,
) -> PageResult {
    Ok(Json(serde_json::json!({ "text": counter(&state, &domains, &form) })).into_response())
}

/// The template's numbers with the first pasted recipient's variables (else empty ones) and
/// the longest link it can get, or why the template is refused.
fn counter(state: &AppState, domains: &DomainContext, form: &ComposeForm) -> String {
    let measured = form.params().and_then(|params| {
        let spec: CampaignSpec = params.spec();
        let domains = params.issuing(domains.clone());
        let base = compose::longest_base(&domains, spec.strip_scheme)?;
        let link_len = base.chars().count() + 1 + state.links.scheme().code_len();
        let (columns, variables) = form.first_recipient();
        let known = |name: &str| columns.is_empty() || columns.iter().any(|c| c == name);
        let campaign = Campaign::new(&spec, known, link_len)?;
        let mut variables = variables;
        for name in campaign.variables() {
            variables.entry(name.to_owned()).or_default();
        }
        let measure = campaign
            .measure(&variables, link_len, &mut String::new())
            .map_err(|error| Error::invalid("invalid_variables", error.to_string()))?;
        Ok(format!(
            "{} characters · {} · {} unit{} · {} segment{}",
            measure.chars,
            measure.encoding,
            measure.units,
            if measure.units == 1 { "" } else { "s" },
            measure.segments,
            if measure.segments == 1 { "" } else { "s" },
        ))
    });
    measured.unwrap_or_else(|error| error.message())
}

/// The answer's lines (the last is the summary) to a dry run of the form.
async fn dry_run(
    state: AppState,
    workspace: WorkspaceId,
    domains: DomainContext,
    form: &ComposeForm,
) -> Result<Vec<Value>, Error> {
    let lines = form.recipients.lines().filter(|l| !l.trim().is_empty());
    if lines.count() > MAX_SAMPLE + 1 {
        return Err(Error::invalid(
            "sample_too_large",
            format!(
                "paste at most {MAX_SAMPLE} recipients; compose a whole campaign with the API or \
                 `shortlink-sidecar compose`"
            ),
        ));
    }
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv"));
    // The workspace's quotas, as the API's compose is held to: a sample past its recipients
    // says so, as the campaign itself would.
    let budget = shortlink_api::budget_of(&state, workspace).await?;
    let answer = compose::compose(
        State(state),
        budget,
        // A dry run records nothing.
        shortlink_api::Recorder(Origin::new(Actor::console(String::new()))),
        // A dry run claims no idempotency key: no key of the operator's is involved.
        Extension(ApiKeyId(CLI_API_KEY_ID)),
        headers,
        domains,
        shortlink_api::Query(form.params()?),
        Body::from(form.recipients.clone()),
    )
    .await?;
    let bytes = axum::body::to_bytes(answer.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|error| Error::Internal(error.into()))?;
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect())
}

fn render(
    operator: &Operator,
    form: &ComposeForm,
    counter: &str,
    lines: Option<&[Value]>,
    error: Option<String>,
) -> Response {
    let checked = |value: &Option<String>| value.is_some();
    let body = html! {
        h1 { "Compose" }
        p.hint {
            "Write the message once; see each recipient's text, its encoding and its segments "
            "before anything is sent. A dry run: nothing is issued here."
        }
        form.stack #composer method="post" action="/console/compose" {
            (layout::csrf(operator))
            label for="template" { "Template" }
            textarea #template name="template" rows="4" required { (form.template) }
            output #compose-counter for="template" aria-live="polite" { (counter) }
            p.hint { code { "{{link}}" } " is the recipient's short URL; " code { "{{name}}" }
                " a column of the recipients." }
            label for="recipients" { "Recipients (CSV with a header, at most " (MAX_SAMPLE) ")" }
            textarea #recipients name="recipients" rows="5" { (form.recipients) }
            label for="country" { "Country of national numbers" }
            input #country name="country" value=(form.country) maxlength="2";
            label for="budget" { "Segment budget" }
            input #budget name="budget" type="number" min="1" max="10" value=(form.budget);
            label for="languages" { "National language tables the gateway supports" }
            input #languages name="languages" value=(form.languages) placeholder="turkish, spanish, portuguese, hindi…";
            label { input type="checkbox" name="strip_scheme" checked[checked(&form.strip_scheme)]; " Short URL without https://" }
            label { input type="checkbox" name="shortest_domain" checked[checked(&form.shortest_domain)]; " Issue on the shortest domain of the pool" }
            label { input type="checkbox" name="replace_lookalikes" checked[checked(&form.replace_lookalikes)]; " Replace look-alikes (curly quotes, dashes) when it saves segments" }
            button type="submit" { "Preview the messages" }
        }
        @if let Some(message) = error {
            p.error role="alert" { (message) }
        }
        @if let Some(lines) = lines {
            (sample_table(lines))
        }
    };
    layout::page(operator, "Compose", body).into_response()
}

fn sample_table(lines: &[Value]) -> Markup {
    let (recipients, summary) = match lines.split_last() {
        Some((last, rest)) if last.get("summary").is_some() => (rest, &last["summary"]),
        _ => (lines, &Value::Null),
    };
    let text = |value: &Value| match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    html! {
        h2 { "Sample" }
        p #compose-summary {
            (text(&summary["segments"])) " segments for " (text(&summary["composed"])) " messages; "
            (text(&summary["over_budget"])) " over budget; " (text(&summary["failed"])) " refused."
        }
        div.wide {
            table {
                thead { tr { th { "#" } th { "Phone" } th { "Message" } th { "Encoding" } th.num { "Characters" } th.num { "Segments" } } }
                tbody {
                    @for line in recipients {
                        tr {
                            td { (text(&line["index"])) }
                            td { (text(&line["phone"])) }
                            @if line.get("error").is_some() {
                                td.error colspan="4" { (text(&line["error"]["message"])) }
                            } @else {
                                td { (text(&line["text"])) }
                                td { (text(&line["encoding"])) }
                                td.num { (text(&line["characters"])) }
                                td.num {
                                    (text(&line["segments"]))
                                    @if line["over_budget"] == Value::Bool(true) { " (over budget)" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

//! `POST /api/v1/compose` (issue 37): a campaign's SMS, one per recipient, each with its link,
//! its encoding and its segments, then the campaign's totals.
//!
//! The template and the options are query parameters; the body is the recipients, NDJSON or
//! CSV, streamed like a batch and through the same pipeline (see [`super::batch`]): links are
//! issued exactly as the batch issues them, and an `Idempotency-Key` makes a retry, even of an
//! interrupted request, answer the same codes. The answer is NDJSON, or CSV with
//! `Accept: text/csv`: one line per recipient in order, then the summary. `dry_run=true` checks
//! and measures everything and issues nothing (no key is claimed).

mod answer;
mod recipients;

pub use answer::{RecipientResult, SummaryLine};

use super::batch::{self, body, pipeline, MAX_NDJSON_ITEMS};
use super::{links, ApiKeyId, AppState, Budget, DomainContext, Error, Query, Recorder, Result};
use answer::{Output, Recipients};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use futures_util::{stream, StreamExt};
use recipients::Input;
use serde::{Deserialize, Serialize};
use shortlink_core::service::compose::{self, Campaign, CampaignError, CampaignSpec, OverBudget};
use shortlink_core::service::{self};
use shortlink_messaging::gateway::job;
use shortlink_store::audit::Changes;
use std::sync::{Arc, Mutex};
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new().route("/compose", post(compose))
}

/// The campaign: its template and options.
#[derive(Debug, Deserialize, Serialize, IntoParams, clap::Args)]
#[into_params(parameter_in = Query)]
pub struct ComposeParams {
    /// The message: `{{name}}` for a recipient's variable, `{{link}}` (required) for the
    /// recipient's short URL. At most 4,000 characters and 100 placeholders; beyond what the
    /// pattern says, the braces must balance, every variable must be a column of the CSV
    /// header (or a key of the first 1,000 NDJSON recipients' `variables`), and the message
    /// with its link and every variable empty must fit 1,530 characters (else 422
    /// `invalid_template`).
    #[param(
        min_length = 1,
        max_length = 4000,
        pattern = "\\{\\{[ \\t]*link[ \\t]*\\}\\}"
    )]
    #[arg(long)]
    pub template: String,
    /// Target URL of recipients without their own `url`, with `{{name}}` variables
    /// (percent-encoded when inserted).
    #[arg(long)]
    pub url_template: Option<String>,
    /// The campaign of every link (1 to 200 characters).
    #[param(schema_with = shortlink_model::schema::campaign)]
    #[arg(long)]
    pub campaign: Option<String>,
    /// Most segments per message (1 to 10).
    #[param(minimum = 1, maximum = 10)]
    #[arg(long)]
    pub budget: Option<usize>,
    /// `report` (default): messages over the budget are issued and flagged; `refuse`: they get
    /// the error `over_budget` and no link.
    #[param(value_type = Option<OverBudget>)]
    #[arg(long, value_enum)]
    pub over_budget: Option<OverBudget>,
    /// The short URL without `https://` in the text (see the README for which phones link it).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub strip_scheme: Option<bool>,
    /// Issue every link on the shortest issuing domain (draining ones excepted) instead of
    /// spreading links by weight: texts as short as the pool allows, and the budget exact.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub shortest_domain: Option<bool>,
    /// Replace look-alikes (curly quotes, dashes, odd spaces, …) with their GSM-7 equivalents
    /// when that saves segments; each replacement is listed.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub replace_lookalikes: Option<bool>,
    /// National language shift tables the SMS gateway supports, comma-separated: `turkish`,
    /// `spanish`, `portuguese`, `bengali`, `gujarati`, `hindi`, `kannada`, `malayalam`,
    /// `oriya`, `punjabi`, `tamil`, `telugu`, `urdu`.
    #[arg(long)]
    pub languages: Option<String>,
    /// Country of numbers written without their country code (ISO 3166-1 alpha-2, e.g. `FR`;
    /// a code libphonenumber does not know is 422 `invalid_country`).
    #[param(pattern = "^[A-Za-z]{2}$")]
    #[arg(long)]
    pub country: Option<String>,
    /// Check and measure, issue nothing.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: Option<bool>,
    /// The click id parameter of every link (`click_id_param`, `[A-Za-z0-9_.-]{1,32}`): nginx
    /// sends each click's id to the landing page in it. A recipient's `link` may set its own.
    #[param(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_.-]{1,32}$")]
    #[arg(long)]
    // Left out of the idempotency hash when absent: requests from before it keep their hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub click_id_param: Option<String>,
    /// Send every message issued through the workspace's gateway (`PUT /api/v1/gateway`, 422
    /// `no_gateway` without one): the summary's `send_job` names the job whose records say,
    /// per recipient, what the gateway answered (`GET /api/v1/gateway/jobs/{job}`). Not with
    /// `dry_run`.
    // Not on the command line: the job sends after the answer, in the serving process (the
    // `compose` command would exit under it).
    #[arg(skip)]
    // Left out of the idempotency hash when absent, as `click_id_param`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<bool>,
}

impl ComposeParams {
    /// Where this campaign's links are issued: the request's issuing bases, or only the
    /// shortest of them.
    pub fn issuing(&self, domains: DomainContext) -> DomainContext {
        match self.shortest_domain.unwrap_or(false) {
            true => domains.on_shortest_base(),
            false => domains,
        }
    }

    pub fn spec(&self) -> CampaignSpec {
        CampaignSpec {
            template: self.template.clone(),
            url_template: self.url_template.clone(),
            budget: self.budget,
            over_budget: self.over_budget.unwrap_or_default(),
            strip_scheme: self.strip_scheme.unwrap_or(false),
            replace_lookalikes: self.replace_lookalikes.unwrap_or(false),
            languages: (self.languages.iter())
                .flat_map(|list| list.split(','))
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect(),
            country: self.country.clone(),
        }
    }
}

impl From<CampaignError> for Error {
    fn from(error: CampaignError) -> Self {
        let code = match &error {
            CampaignError::Template(_) | CampaignError::NoLink | CampaignError::TooLong { .. } => {
                "invalid_template"
            }
            CampaignError::UrlTemplate(_) | CampaignError::LinkInUrl => "invalid_url_template",
            CampaignError::Budget => "invalid_budget",
            CampaignError::Language(_) => "invalid_language",
            CampaignError::Country(_) => "invalid_country",
        };
        Error::invalid(code, error.to_string())
    }
}

/// Compose a campaign: per recipient, its link (issued as a batch issues it), its message,
/// encoding and segments; then the totals.
#[utoipa::path(post, path = "/api/v1/compose", tag = "links", params(ComposeParams,
        ("Idempotency-Key" = Option<String>, Header, description = "makes retries safe (the same codes); 1 to 255 visible ASCII characters; ignored by a dry run", pattern = "^[!-~]{1,255}$")),
    request_body(content((String = "application/x-ndjson"), (String = "text/csv")),
        description = "the recipients, one per line: NDJSON `{\"phone\", \"ref\"?, \"variables\"?: \
            {name: text}, \"url\"?, \"link\"?: {create options but url, campaign and ref}}`, or \
            `text/csv` with a header line (`phone`, `ref`, `url`, `link` as JSON; every other \
            column is a variable); at most 1,000,000 recipients. A bad line gets its own error \
            line, the others go ahead"),
    responses(
        (status = 200, description = "one `RecipientResult` per line in order, then a \
            `SummaryLine`; with `Accept: text/csv`, CSV (`index,status,ref,phone,code,short_url,\
            text,encoding,characters,units,segments,over_budget,replaced,forced_ucs2,error_code,\
            error_message`) ending with a `summary` row",
            content((RecipientResult = "application/x-ndjson"), (String = "text/csv")),
            headers(("Shortlink-Send-Job" = String,
                description = "with `send=true`: the send job (`GET /api/v1/gateway/jobs/{job}`)"))),
        (status = 400, description = "`invalid_query`, `invalid_header`, `incomplete_body`", body = super::ErrorBody),
        (status = 414, description = "through nginx's API server: a query (the template) longer \
            than nginx's `large_client_header_buffers` (8 KiB by default)"),
        (status = 415, body = super::ErrorBody),
        (status = 422, description = "refused before anything is issued: `invalid_template` \
            (unbalanced braces, an unknown variable, no `{{link}}`, too long), \
            `invalid_url_template`, `invalid_budget`, `invalid_language`, `invalid_country`, \
            `invalid_send` (with `dry_run`), `no_gateway`, `invalid_password_file` (`send`), \
            `invalid_campaign`, `invalid_csv` (what no schema of a CSV body can say: a \
            header line with a `phone` column and no column twice), `no_issuing_domain`, \
            `idempotency_key_reused`", body = super::ErrorBody),
    ))]
// Axum extractors, one per part of the request; the CLI and the console call it with theirs.
#[allow(clippy::too_many_arguments)]
pub async fn compose(
    State(state): State<AppState>,
    budget: Budget,
    Recorder(origin): Recorder,
    Extension(api_key): Extension<ApiKeyId>,
    headers: HeaderMap,
    domains: DomainContext,
    Query(params): Query<ComposeParams>,
    body: Body,
) -> Result<Response> {
    let csv_in = content_type(&headers)?;
    let output = output_of(&headers);
    let dry_run = params.dry_run.unwrap_or(false);
    let key = match dry_run {
        true => None,
        false => links::idempotency_key(&headers, api_key)?,
    };
    if let Some(campaign) = &params.campaign {
        service::accept::meta(Some(campaign.clone()), "invalid_campaign", "campaign")?;
    }
    let domains = params.issuing(domains);
    let spec = params.spec();
    let longest_base = longest_base(&domains, spec.strip_scheme)?;
    let framing = match csv_in {
        true => body::Framing::CsvRecords,
        false => body::Framing::Lines,
    };
    let (mut chunks, body_read) =
        body::ndjson_chunks(body, framing, MAX_NDJSON_ITEMS + usize::from(csv_in));
    let mut first = chunks.next().await;
    let input = input_of(csv_in, first.as_mut())?;
    let known = input.known_variables(first.iter().flat_map(|chunk| chunk.items.iter()));
    let link_len = longest_base.chars().count() + 1 + state.links.scheme().code_len();
    let campaign = Campaign::new(&spec, |name| known.contains(name), link_len)?;
    let send = sends(&params, dry_run)?;
    let claim = match &key {
        None => None,
        Some(key) => {
            let hash = request_hash(&params, &input, first.as_ref());
            Some(state.links.claim(key, &hash).await?)
        }
    };
    // After the key's claim: a compose refused for its key leaves no job, token or queue.
    let authority = service::Authority::key(budget.workspace(), api_key.0);
    let sends = match send {
        true => Some(job::start(&state.messaging, authority, params.campaign.clone()).await?),
        false => None,
    };
    let send_job = sends.as_ref().map(|queue| queue.job.clone());
    let recipients = Arc::new(Recipients {
        state: state.clone(),
        workspace: budget.workspace(),
        budget: budget.clone(),
        domains: domains.clone(),
        campaign,
        campaign_name: params.campaign.clone(),
        click_id_param: params.click_id_param.clone(),
        input,
        output,
        stand_in_base: stand_in_base(&domains, &longest_base, spec.strip_scheme),
        longest_base,
        summary: Mutex::new(Default::default()),
        sends,
    });
    // Indexes count recipients: a CSV's header line is not one.
    let shift = i64::from(csv_in);
    let chunks = stream::iter(first).chain(chunks).map(move |mut chunk| {
        chunk.first = (chunk.first - shift).max(0);
        chunk
    });
    let mode = match dry_run {
        true => pipeline::Mode::DryRun,
        false => pipeline::Mode::Write,
    };
    // One row for the whole campaign (none for a dry run: nothing changes).
    let audit = (mode == pipeline::Mode::Write).then(|| {
        let campaign = params.campaign.clone().unwrap_or_default();
        let mut entry = origin.entry("links.compose", campaign, Changes::new());
        entry.idempotency_key = key.as_ref().map(|key| key.key.clone());
        entry
    });
    let job = service::Job::new(authority);
    let results = pipeline::run(
        Arc::clone(&recipients),
        (state, budget, audit),
        domains,
        chunks,
        (claim, Arc::new(job)),
        mode,
    );
    batch::body_in(body_read).await?;
    let mut response = answer_stream(recipients, results, output);
    // The CSV answer has no place for it in its summary row.
    if let Some(job) = send_job.and_then(|job| HeaderValue::from_str(&job).ok()) {
        response.headers_mut().insert(SEND_JOB_HEADER, job);
    }
    Ok(response)
}

/// How the answer goes: CSV when the request accepts it, else NDJSON.
fn output_of(headers: &HeaderMap) -> Output {
    match accepts_csv(headers) {
        true => Output::Csv,
        false => Output::Ndjson,
    }
}

/// How the recipients come: a CSV's columns, its header taken from the first chunk; or NDJSON.
fn input_of(csv_in: bool, first: Option<&mut body::RawChunk>) -> Result<Input> {
    if !csv_in {
        return Ok(Input::Ndjson);
    }
    let header = first.and_then(|chunk| (!chunk.items.is_empty()).then(|| chunk.items.remove(0)));
    Input::csv(header)
}

/// Whether the compose sends its messages (`send`), refused with a dry run.
fn sends(params: &ComposeParams, dry_run: bool) -> Result<bool> {
    match (params.send.unwrap_or(false), dry_run) {
        (true, true) => Err(Error::invalid(
            "invalid_send",
            "a dry run sends nothing: `send` and `dry_run` exclude each other",
        )),
        (send, _) => Ok(send),
    }
}

/// What an `Idempotency-Key` is held to: the parameters and, for CSV, the columns (the same
/// lines under other columns are another request), then the first chunk's lines.
fn request_hash(params: &ComposeParams, input: &Input, first: Option<&body::RawChunk>) -> String {
    let columns = match input {
        Input::Csv(columns) => columns.as_slice(),
        Input::Ndjson => &[],
    };
    let head = serde_json::to_vec(&(params, columns)).unwrap_or_default();
    let lines = first.into_iter().flat_map(|chunk| chunk.items.iter());
    let canonical: Vec<Vec<u8>> = std::iter::once(head)
        .chain(lines.map(body::canonical))
        .collect();
    service::request_hash("compose", canonical.iter().map(Vec::as_slice))
}

/// The answer: the CSV header (if CSV), a frame per chunk of `results`, then the summary.
/// Each frame's messages are queued in SQL before the frame goes out, the last ones before the
/// summary: what the answer promises is durable.
fn answer_stream(
    recipients: Arc<Recipients>,
    results: impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static,
    output: Output,
) -> Response {
    let head = match output {
        Output::Csv => answer::CSV_COLUMNS.as_bytes().to_vec(),
        Output::Ndjson => Vec::new(),
    };
    let queued = Arc::clone(&recipients);
    let results = results.then(move |frame| {
        let queued = Arc::clone(&queued);
        async move {
            if let (Ok(_), Some(queue)) = (&frame, &queued.sends) {
                queue.flush().await.map_err(queue_failed)?;
            }
            frame
        }
    });
    let summary = stream::once(async move {
        if let Some(queue) = &recipients.sends {
            queue.seal().await.map_err(queue_failed)?;
        }
        Ok(recipients.summary_line())
    });
    let body = stream::once(async { Ok(head) })
        .chain(results)
        .chain(summary);
    let content_type = match output {
        Output::Csv => "text/csv; charset=utf-8",
        Output::Ndjson => "application/x-ndjson",
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        Body::from_stream(body),
    )
        .into_response()
}

/// The answer breaks off (its client sees it cut) when the send queue cannot be written: it
/// promises no message that is not queued.
fn queue_failed(error: shortlink_messaging::Error) -> std::io::Error {
    tracing::error!(%error, "a compose's send queue could not be written");
    std::io::Error::other("send queue unavailable")
}

/// The answer's header naming the send job (`send=true`), as the NDJSON summary does.
const SEND_JOB_HEADER: &str = "shortlink-send-job";

/// Whether the recipients are CSV (else NDJSON).
fn content_type(headers: &HeaderMap) -> Result<bool> {
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "text/csv" => Ok(true),
        "application/x-ndjson" | "application/jsonl" => Ok(false),
        _ => Err(Error::Request {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: "send the recipients as `application/x-ndjson` (one JSON object a line) \
                      or `text/csv` (a header line, then one recipient a line)"
                .into(),
        }),
    }
}

fn accepts_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.to_ascii_lowercase().contains("text/csv"))
}

/// The base a dry run's stand-in links show: the longest one a link may be issued on now, never
/// a drained domain (the real run would not issue on it); else the budget's bound.
fn stand_in_base(domains: &DomainContext, longest_base: &str, strip_scheme: bool) -> String {
    match domains.longest_live_base().filter(|live| !live.is_empty()) {
        Some(live) if strip_scheme => compose::without_scheme(live).to_owned(),
        Some(live) => live.to_owned(),
        None => longest_base.to_owned(),
    }
}

/// The longest base a link can be issued on, as the text carries it: what the budget and a dry
/// run measure with (exact with one issuing domain; an upper bound with several).
pub fn longest_base(domains: &DomainContext, strip_scheme: bool) -> Result<String> {
    let bases = domains.issuing.as_ref().ok_or_else(|| {
        Error::invalid(
            "no_issuing_domain",
            "no issuing domain is configured (X-Shortlink-Public-Base or --public-base-url): a \
             message needs its short URL",
        )
    })?;
    let longest = (bases.bases.iter())
        .filter(|base| !base.draining)
        .map(|base| base.url.as_str())
        .max_by_key(|url| url.len())
        .unwrap_or_default();
    let text = match strip_scheme {
        true => compose::without_scheme(longest),
        false => longest,
    };
    Ok(text.to_owned())
}

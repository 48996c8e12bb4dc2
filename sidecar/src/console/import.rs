//! Import from another shortener (issue 40), the console's way to `import --from`: a source's API
//! (Shlink, Kutt, Bitly, with its URL and key) or an export file (a generic CSV, Shlink's or
//! Bitly's), imported in a task of its own by the command's own code, with the same report. The
//! progress page reloads itself until the import ends, then shows the counts and every link not
//! imported, and offers the report as JSON. Admins only: an import keeps codes the API's alias
//! rule refuses. Jobs are kept in memory, as bulk uploads.

use super::layout;
use super::operator::Operator;
use super::page::{see_other, PageError, PageResult};
use crate::cli::import::audit::record_source_import;
use crate::cli::import::report::{reason_name, Report};
use crate::cli::import::source::{self, SourceKind};
use crate::cli::import::write::Writer;
use crate::cli::import::SourceArgs;
use axum::extract::{Multipart, Path, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::Extension;
use maud::html;
use shortlink_api::{AppState, Budget, Error};
use shortlink_core::service::Authority;
use shortlink_core::sync::LockOrRecover;
use shortlink_model::WorkspaceId;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

/// Problems listed on the page (the JSON report has them all).
const SHOWN: usize = 200;
const MAX_JOBS: usize = 20;

/// Import jobs by id, each with the workspace that started it: another workspace's job is not
/// found.
#[derive(Default)]
pub struct Imports(Mutex<HashMap<String, Owned<Job>>>);

/// A job and the workspace that started it.
type Owned<J> = (WorkspaceId, Arc<Mutex<J>>);

#[derive(Default)]
struct Job {
    report: Report,
    finished: bool,
    error: Option<String>,
}

pub async fn page(operator: Operator) -> PageResult {
    operator.require_admin()?;
    let body = html! {
        h1 { "Import from another shortener" }
        p { "Links keep their code, target, times, tags and visit totals; a code that is already a link is reported, never overwritten. Run it again at any time: what is imported already is skipped. See docs/MIGRATING.md." }
        form.stack method="post" action="/console/import" enctype="multipart/form-data" {
            (layout::csrf(&operator))
            label for="from" { "Source" }
            select #from name="from" {
                option value="shlink" { "Shlink 4.x (API v3, or its CSV export)" }
                option value="kutt" { "Kutt v2/v3 (API v2)" }
                option value="bitly" { "Bitly (API v4, or its CSV export)" }
                option value="csv" { "CSV: code, url, domain, created_at, expires_at, title, tags, visits" }
            }
            label for="source_url" { "API URL (Shlink, Kutt; Bitly: empty for api-ssl.bitly.com)" }
            input #source_url type="url" name="source_url";
            label for="source_key" { "API key or token" }
            input #source_key type="password" name="source_key" autocomplete="off";
            label for="bitly_group" { "Bitly group GUID" }
            input #bitly_group type="text" name="bitly_group";
            label for="source_domain" { "Domain of links whose source names none" }
            input #source_domain type="text" name="source_domain";
            label for="file" { "Or an export file (CSV)" }
            input #file type="file" name="file" accept=".csv,text/csv";
            label { input type="checkbox" name="dry_run" value="1"; " Dry run: check everything, write nothing" }
            button type="submit" { "Import" }
        }
    };
    Ok(layout::page(&operator, "Import", body).into_response())
}

fn bad_upload(error: axum::extract::multipart::MultipartError) -> PageError {
    PageError(Error::Request {
        status: error.status(),
        code: "invalid_body",
        message: "the upload could not be read".into(),
    })
}

fn invalid(message: impl Into<String>) -> PageError {
    PageError(Error::invalid("invalid_import", message.into()))
}

pub async fn start(
    State(state): State<AppState>,
    Extension(imports): Extension<Arc<Imports>>,
    operator: Operator,
    Extension(request): super::audit::Tagged,
    mut multipart: Multipart,
) -> PageResult {
    let mut fields: HashMap<String, String> = HashMap::new();
    let mut file = None;
    while let Some(field) = multipart.next_field().await.map_err(bad_upload)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "file" {
            let bytes = field.bytes().await.map_err(bad_upload)?;
            file = Some(bytes).filter(|bytes| !bytes.is_empty());
        } else {
            fields.insert(name, field.text().await.map_err(bad_upload)?);
        }
    }
    operator.check_csrf(fields.get("csrf").map(String::as_str))?;
    operator.require_admin()?;
    let field = |name: &str| {
        fields
            .get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let kind = match field("from").as_deref() {
        Some("shlink") => SourceKind::Shlink,
        Some("kutt") => SourceKind::Kutt,
        Some("bitly") => SourceKind::Bitly,
        Some("csv") => SourceKind::Csv,
        _ => return Err(invalid("choose a source")),
    };
    // The upload waits in a temporary file (deleted with the job's task) for the file sources,
    // which read a path.
    let upload = match file {
        Some(bytes) => {
            let mut temp = tempfile::NamedTempFile::new().map_err(|e| invalid(e.to_string()))?;
            temp.write_all(&bytes).map_err(|e| invalid(e.to_string()))?;
            Some(temp)
        }
        None => None,
    };
    let args = SourceArgs {
        file: upload.as_ref().map(|temp| temp.path().to_owned()),
        source_url: field("source_url"),
        source_key: field("source_key"),
        source_database: None,
        table_prefix: "yourls_".into(),
        bitly_group: field("bitly_group"),
        source_domain: field("source_domain"),
        forward_query: None,
        page_size: 100,
        outbound: state.settings.import_policy.clone(),
    };
    // Opened here, so a missing key or an unreadable file is said on the form's answer.
    let opened = source::open(kind, &args)
        .await
        .map_err(|e| invalid(e.to_string()))?;
    let id = super::session::random_token()?;
    let dry_run = field("dry_run").is_some();
    let job = Arc::new(Mutex::new(Job {
        report: Report {
            source: kind.name().to_owned(),
            dry_run,
            ..Report::default()
        },
        ..Job::default()
    }));
    {
        let mut jobs = imports.0.lock_or_recover();
        if jobs.len() >= MAX_JOBS {
            jobs.retain(|_, (_, job)| !job.lock_or_recover().finished);
        }
        jobs.insert(id.clone(), (operator.workspace, Arc::clone(&job)));
    }
    let domain = args.source_domain.clone();
    // Its new links count against the workspace's quota, as the API's creates do.
    let budget = shortlink_api::budget_of(&state, operator.workspace).await?;
    let authority = Authority::key(operator.workspace, operator.key);
    let origin = super::audit::origin(&operator, request);
    tokio::spawn(async move {
        let _upload = upload;
        let source = (kind, opened, domain.as_deref());
        let outcome = run(&state, (budget, authority), source, dry_run, &job).await;
        // One audit row per run, finished or not: what it changed is in its counts.
        let report = job.lock_or_recover().report.clone();
        let storage = state.links.storage();
        if let Err(error) = record_source_import(storage.as_ref(), &origin, &report).await {
            tracing::error!(%error, "an import's audit row could not be written");
        }
        let mut job = job.lock_or_recover();
        job.error = outcome.err();
        job.finished = true;
    });
    Ok(see_other(&format!("/console/import/{id}")))
}

/// The command's loop, the report copied into the job after every page. It ends at the page
/// where the key is found revoked or the workspace suspended or deleted (the page shows why).
async fn run(
    state: &AppState,
    (budget, authority): (Budget, Authority),
    (kind, mut source, domain): (SourceKind, Box<dyn source::Source>, Option<&str>),
    dry_run: bool,
    job: &Mutex<Job>,
) -> Result<(), String> {
    let mut writer =
        Writer::new(state, budget, kind.name(), domain, dry_run, true).acting_for(authority);
    let mut report = Report {
        source: kind.name().to_owned(),
        dry_run,
        ..Report::default()
    };
    while let Some(items) = source.next_page().await.map_err(|e| e.to_string())? {
        let written = writer.page(&mut *source, items, &mut report).await;
        job.lock_or_recover().report = report.clone();
        written.map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub async fn progress(
    Extension(imports): Extension<Arc<Imports>>,
    operator: Operator,
    Path(id): Path<String>,
) -> PageResult {
    let job = imports.of_admin(&operator, &id)?;
    let (report, finished, error) = {
        let job = job.lock_or_recover();
        (job.report.clone(), job.finished, job.error.clone())
    };
    let body = html! {
        h1 { "Import from " (report.source) @if report.dry_run { " (dry run)" } }
        p role="status" { (report.summary()) }
        @if let Some(error) = &error {
            p.error role="alert" { "Stopped: " (error) ". Run the import again to continue." }
        } @else if finished {
            p.ok { "Finished." }
        } @else {
            p { "Working… this page refreshes itself." }
        }
        @if finished {
            p { a href={ "/console/import/" (id) "/report.json" } download { "Download the report (JSON)" } }
        }
        @if !report.problems.is_empty() {
            table {
                thead { tr { th { "code" } th { "domain" } th { "reason" } th { "why" } } }
                tbody {
                    @for problem in report.problems.iter().take(SHOWN) {
                        tr {
                            td { code { (problem.code) } }
                            td { (problem.domain) }
                            td { (reason_name(problem.reason)) }
                            td { (problem.message) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::progress_page(&operator, "Import", body, finished))
}

pub async fn report_file(
    Extension(imports): Extension<Arc<Imports>>,
    operator: Operator,
    Path(id): Path<String>,
) -> PageResult {
    let job = imports.of_admin(&operator, &id)?;
    let body = {
        let job = job.lock_or_recover();
        serde_json::to_vec_pretty(&job.report).map_err(|e| invalid(e.to_string()))?
    };
    Ok((
        [
            (CONTENT_TYPE, "application/json"),
            (
                CONTENT_DISPOSITION,
                "attachment; filename=\"import-report.json\"",
            ),
        ],
        body,
    )
        .into_response())
}

impl Imports {
    /// Job `id`, for an admin of the workspace that started it (to anyone else: not found).
    fn of_admin(&self, operator: &Operator, id: &str) -> Result<Arc<Mutex<Job>>, Error> {
        operator.require_admin()?;
        let jobs = self.0.lock_or_recover();
        match jobs.get(id) {
            Some((owner, job)) if *owner == operator.workspace => Ok(Arc::clone(job)),
            _ => Err(Error::NotFound),
        }
    }
}

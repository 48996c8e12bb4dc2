//! Bulk upload: a CSV (header `url,code,expires_at,redirect,campaign,ref,tags,max_visits,password`
//! and the card's `preview_title,preview_description,preview_image,preview_site_name`, tags
//! separated by `;`) or NDJSON file (one `POST /api/v1/links` body a line) goes through the batch service in
//! chunks, in a task of its own. The progress page reloads itself (an HTTP `Refresh` header: no
//! script) until every row is done, then offers the results as CSV: one row per input line with
//! the code and short URL, or the error.
//!
//! The file's links are counted against the workspace's quota of links per day before anything
//! starts, as the API's batch is: a file that does not fit is refused whole, nothing created.
//!
//! Jobs are kept in memory for [`KEEP`]: the results are for downloading right away.

use super::layout;
use super::operator::Operator;
use super::page::{see_other, PageError, PageResult};
use axum::extract::{Multipart, Path, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::Extension;
use maud::html;
use shortlink_api::links::CreateLinkRequest;
use shortlink_api::{failure_error, AppState, DomainContext, Error};
use shortlink_core::csv_cell::push_field as csv_field;
use shortlink_core::limits::Reservation;
use shortlink_core::service::accept;
use shortlink_core::service::accept::PlainPassword;
use shortlink_core::service::{self, Authority, ItemOutcome};
use shortlink_core::sync::LockOrRecover;
use shortlink_model::link::card::CardSpec;
use shortlink_model::schema::WholeNumber;
use shortlink_model::WorkspaceId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rows per call of the batch service (one transaction each).
const CHUNK: usize = 200;
const MAX_ROWS: usize = 100_000;
const KEEP: Duration = Duration::from_secs(60 * 60);
const MAX_JOBS: usize = 50;

/// Running and recent jobs by id, each with the workspace that started it: another workspace's
/// job is not found.
#[derive(Default)]
pub struct Jobs(Mutex<HashMap<String, Owned<Job>>>);

/// A job and the workspace that started it.
type Owned<J> = (WorkspaceId, Arc<Mutex<J>>);

#[derive(Default)]
struct Job {
    total: usize,
    done: usize,
    failed: usize,
    /// CSV rows of the results, in input order.
    rows: Vec<String>,
    /// The first [`REFUSALS_SHOWN`] refused rows: line, status, why (shown on the page).
    refused: Vec<(usize, u16, String)>,
    finished: bool,
    started: Option<Instant>,
}

impl Jobs {
    fn get(&self, workspace: WorkspaceId, id: &str) -> Option<Arc<Mutex<Job>>> {
        let jobs = self.0.lock_or_recover();
        let (owner, job) = jobs.get(id)?;
        (*owner == workspace).then(|| Arc::clone(job))
    }

    fn insert(&self, workspace: WorkspaceId, id: String, job: Arc<Mutex<Job>>) {
        let mut jobs = self.0.lock_or_recover();
        jobs.retain(|_, (_, job)| {
            let job = job.lock_or_recover();
            job.started.is_some_and(|at| at.elapsed() < KEEP)
        });
        if jobs.len() < MAX_JOBS {
            jobs.insert(id, (workspace, job));
        }
    }
}

/// Refused rows listed on the progress page (the results file has every row).
const REFUSALS_SHOWN: usize = 200;

fn result_row(line: usize, status: u16, code: &str, short_url: &str, error: &str) -> String {
    let mut row = format!("{line},{status},");
    csv_field(&mut row, code);
    row.push(',');
    csv_field(&mut row, short_url);
    row.push(',');
    csv_field(&mut row, error);
    row.push('\n');
    row
}

pub async fn page(operator: Operator) -> PageResult {
    operator.require_issue()?;
    let body = html! {
        h1 { "Bulk upload" }
        form.stack method="post" action="/console/bulk" enctype="multipart/form-data" {
            (layout::csrf(&operator))
            label for="file" { "CSV or NDJSON file" }
            input #file type="file" name="file" accept=".csv,.ndjson,.jsonl,text/csv,application/x-ndjson" required;
            button type="submit" { "Upload and create" }
        }
        p.hint {
            "CSV: a header row with " code { "url" } " and any of " code { "code,expires_at,redirect,campaign,ref,tags,max_visits,password,preview_title,preview_description,preview_image,preview_site_name" }
            " (RFC 3339 expiry, tags separated by " code { ";" } "). NDJSON: one link per line, as for "
            code { "POST /api/v1/links" } "."
        }
    };
    Ok(layout::page(&operator, "Bulk upload", body).into_response())
}

/// The file's rows as create requests, or why a row cannot be read (its result is that error).
/// The card of a CSV row's `preview_*` columns, if it has any (a missing title, text or image is
/// then refused by the card's checks, naming it).
fn card(field: &dyn Fn(&str) -> Option<String>) -> Option<CardSpec> {
    let [title, description, image, site_name] = [
        "preview_title",
        "preview_description",
        "preview_image",
        "preview_site_name",
    ]
    .map(field);
    if title.is_none() && description.is_none() && image.is_none() && site_name.is_none() {
        return None;
    }
    Some(CardSpec {
        title: title.unwrap_or_default(),
        description: description.unwrap_or_default(),
        image: image.unwrap_or_default(),
        site_name,
    })
}

fn parse(bytes: &[u8]) -> Result<Vec<Result<CreateLinkRequest, String>>, Error> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::invalid("invalid_body", "the file is not UTF-8 text"))?;
    let text = text.trim_start_matches('\u{feff}');
    let rows: Vec<Result<CreateLinkRequest, String>> = if text.trim_start().starts_with('{') {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}")))
            .collect()
    } else {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let header = reader
            .headers()
            .map_err(|_| Error::invalid("invalid_body", "the CSV has no header row"))?
            .clone();
        if !header.iter().any(|name| name == "url") {
            return Err(Error::invalid(
                "invalid_body",
                "the CSV header has no url column",
            ));
        }
        reader
            .records()
            .map(|record| {
                let record = record.map_err(|e| format!("unreadable CSV row: {e}"))?;
                let field = |name: &str| {
                    header
                        .iter()
                        .position(|h| h == name)
                        .and_then(|at| record.get(at))
                        .filter(|value| !value.is_empty())
                        .map(str::to_owned)
                };
                let expires_at = field("expires_at")
                    .map(|at| {
                        at.parse()
                            .map_err(|_| format!("expires_at {at:?} is not RFC 3339"))
                    })
                    .transpose()?;
                let redirect = field("redirect")
                    .map(|r| {
                        r.parse()
                            .map_err(|_| format!("redirect {r:?} is not a number"))
                    })
                    .transpose()?;
                let max_visits = field("max_visits")
                    .map(|n| {
                        n.parse()
                            .map_err(|_| format!("max_visits {n:?} is not a number"))
                    })
                    .transpose()?;
                Ok(CreateLinkRequest {
                    url: field("url").unwrap_or_default(),
                    code: field("code"),
                    expires_at,
                    redirect,
                    forward_query: None,
                    idempotent: None,
                    campaign: field("campaign"),
                    recipient_ref: field("ref"),
                    tags: field("tags").map(|tags| {
                        tags.split(';')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(str::to_owned)
                            .collect()
                    }),
                    // A CSV upload has no lifecycle or rules columns.
                    valid_since: None,
                    not_yet_url: None,
                    expired_url: None,
                    rules: None,
                    max_visits: max_visits.map(WholeNumber),
                    password: field("password").map(PlainPassword),
                    preview: card(&field),
                    click_id_param: field("click_id_param"),
                })
            })
            .collect()
    };
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(Error::invalid(
            "invalid_body",
            format!("the file must have 1 to {MAX_ROWS} rows"),
        ));
    }
    Ok(rows)
}

pub async fn upload(
    State(state): State<AppState>,
    Extension(jobs): Extension<Arc<Jobs>>,
    operator: Operator,
    domains: DomainContext,
    mut multipart: Multipart,
) -> PageResult {
    let (mut csrf, mut file) = (None, None);
    while let Some(field) = multipart.next_field().await.map_err(bad_upload)? {
        match field.name() {
            Some("csrf") => csrf = Some(field.text().await.map_err(bad_upload)?),
            Some("file") => file = Some(field.bytes().await.map_err(bad_upload)?),
            _ => {}
        }
    }
    operator.check_csrf(csrf.as_deref())?;
    operator.require_issue()?;
    let rows = parse(&file.unwrap_or_default())?;
    let readable = rows.iter().filter(|row| row.is_ok()).count() as u64;
    let budget = shortlink_api::budget_of(&state, operator.workspace).await?;
    let reservation = budget.reserve_links(readable).await.map_err(Error::from)?;
    let id = super::session::random_token()?;
    let job = Arc::new(Mutex::new(Job {
        total: rows.len(),
        started: Some(Instant::now()),
        ..Job::default()
    }));
    jobs.insert(operator.workspace, id.clone(), Arc::clone(&job));
    let authority = Authority::key(operator.workspace, operator.key);
    tokio::spawn(run((state, authority, domains), rows, reservation, job));
    Ok(see_other(&format!("/console/bulk/{id}")))
}

fn bad_upload(error: axum::extract::multipart::MultipartError) -> PageError {
    PageError(Error::Request {
        status: error.status(),
        code: "invalid_body",
        message: "the upload could not be read".into(),
    })
}

/// Creates the rows a chunk at a time, recording each row's result as it goes; each chunk
/// draws on the file's `reservation`, which keeps what was created. Once the key is revoked or
/// the workspace suspended or deleted, the rows after are answered why, and nothing more is
/// created.
async fn run(
    (state, authority, domains): (AppState, Authority, DomainContext),
    rows: Vec<Result<CreateLinkRequest, String>>,
    mut reservation: Reservation,
    job: Arc<Mutex<Job>>,
) {
    let workspace = authority.workspace;
    let writer = service::Job::new(authority);
    let mut rows = rows.into_iter().enumerate().peekable();
    while rows.peek().is_some() {
        // Each row's line and, when it was refused before its create, its status and why.
        let mut results: Vec<(usize, Option<(u16, String)>)> = Vec::with_capacity(CHUNK);
        let mut valid = Vec::with_capacity(CHUNK);
        for (index, row) in rows.by_ref().take(CHUNK) {
            let line = index + 1;
            let checked = row.and_then(|request| {
                let policy = &state.settings.url_policy;
                let own = &domains.own_domains;
                accept::new_link(&state.links, workspace, policy, own, request)
                    .map_err(|e| Error::from(e).message())
            });
            match checked {
                Ok(new) => {
                    valid.push((index as i64, new));
                    results.push((line, None));
                }
                Err(message) => results.push((line, Some((422, message)))),
            }
        }
        let mut part = reservation.split_off(valid.len() as u64);
        let outcomes: HashMap<i64, ItemOutcome> = state
            .links
            .create_chunk(valid, None, (&writer, writer.turn()), &mut part)
            .await
            .into_iter()
            .collect();
        let created = (outcomes.values())
            .filter(|outcome| matches!(outcome, ItemOutcome::Created(_)))
            .count();
        part.keep(created as u64).await;
        let mut outcomes = outcomes;
        let mut job = job.lock_or_recover();
        for (line, early) in results {
            let (status, code, url, error) = match early {
                Some((status, message)) => (status, String::new(), None, message),
                None => match outcomes.remove(&(line as i64 - 1)) {
                    Some(ItemOutcome::Created(link)) => {
                        domains.link_created("batch", &link);
                        let url = domains.short_url(&link.code, link.campaign.as_deref());
                        (201, link.code, url, String::new())
                    }
                    Some(ItemOutcome::Existing(link)) => {
                        let url = domains.short_url(&link.code, link.campaign.as_deref());
                        (200, link.code, url, String::new())
                    }
                    Some(ItemOutcome::Failed(failure)) => {
                        let error = failure_error(failure);
                        (
                            error.status_code().as_u16(),
                            String::new(),
                            None,
                            error.message(),
                        )
                    }
                    None => (500, String::new(), None, "internal error".to_owned()),
                },
            };
            let row = result_row(line, status, &code, url.as_deref().unwrap_or(""), &error);
            if !(200..300).contains(&status) {
                job.failed += 1;
                if job.refused.len() < REFUSALS_SHOWN {
                    job.refused.push((line, status, error));
                }
            }
            job.rows.push(row);
            job.done += 1;
        }
    }
    // The rows refused before their create.
    reservation.release().await;
    job.lock_or_recover().finished = true;
}

pub async fn progress(
    Extension(jobs): Extension<Arc<Jobs>>,
    operator: Operator,
    Path(id): Path<String>,
) -> PageResult {
    let job = jobs.get(operator.workspace, &id).ok_or(Error::NotFound)?;
    let (total, done, failed, finished, refused) = {
        let job = job.lock_or_recover();
        let refused = job.refused.clone();
        (job.total, job.done, job.failed, job.finished, refused)
    };
    let body = html! {
        h1 { "Bulk upload" }
        label for="progress" { "Rows done: " (done) " of " (total) }
        progress #progress max=(total) value=(done) { (done) " of " (total) }
        @if finished {
            p.ok role="status" { "Finished: " (done - failed) " created, " (failed) " refused." }
            p { a href={ "/console/bulk/" (id) "/results.csv" } download { "Download the results (CSV)" } }
            @if !refused.is_empty() {
                h2 { "Refused rows" }
                @if failed > refused.len() {
                    p.hint { "The first " (refused.len()) " of " (failed) "; every one is in the results file." }
                }
                div.wide { table.refused {
                    thead { tr { th.num scope="col" { "Line" } th.num scope="col" { "Status" } th scope="col" { "Why" } } }
                    tbody {
                        @for (line, status, why) in &refused {
                            tr { td.num { (line) } td.num { (status) } td { (why) } }
                        }
                    }
                } }
                p.hint { "Lines count the file's rows after its header. Fix them and upload those rows again." }
            }
        } @else {
            p role="status" { "Working… this page refreshes itself." }
        }
    };
    Ok(layout::progress_page(
        &operator,
        "Bulk upload",
        body,
        finished,
    ))
}

pub async fn results(
    Extension(jobs): Extension<Arc<Jobs>>,
    operator: Operator,
    Path(id): Path<String>,
) -> PageResult {
    let job = jobs.get(operator.workspace, &id).ok_or(Error::NotFound)?;
    let body = {
        let job = job.lock_or_recover();
        let mut body = String::from("line,status,code,short_url,error\n");
        for row in &job.rows {
            body.push_str(row);
        }
        body
    };
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                CONTENT_DISPOSITION,
                "attachment; filename=\"bulk-results.csv\"",
            ),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_ndjson_rows_become_requests_or_errors() {
        let rows = parse(
            "\u{feff}url,code,expires_at,redirect,campaign,ref,tags\n\
             https://a.example/,alias1,2099-01-01T00:00:00Z,301,spring,r1,a; b\n\
             https://b.example/,,soon,,,,\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        let first = rows[0].as_ref().unwrap();
        assert_eq!(first.code.as_deref(), Some("alias1"));
        assert_eq!(first.redirect, Some(301));
        assert_eq!(first.recipient_ref.as_deref(), Some("r1"));
        assert_eq!(first.tags, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert!(rows[1].as_ref().unwrap_err().contains("RFC 3339"));

        // A cap, a password and a card in columns of their own; a cap must be a number.
        let rows = parse(
            "url,max_visits,password,preview_title,preview_description,preview_image
             https://a.example/,5,s3cret,T,D,https://i.example/a.png
             https://b.example/,many,,,,
"
            .as_bytes(),
        )
        .unwrap();
        let first = rows[0].as_ref().unwrap();
        assert_eq!(first.max_visits, Some(WholeNumber(5)));
        assert_eq!(
            first.password.as_ref().map(|p| p.0.as_str()),
            Some("s3cret")
        );
        let card = first.preview.as_ref().unwrap();
        assert_eq!(
            (card.title.as_str(), card.site_name.as_deref()),
            ("T", None)
        );
        assert!(rows[1].as_ref().unwrap_err().contains("max_visits"));

        let rows = parse(b"{\"url\":\"https://a.example/\"}\n\n{\"nope\":1}\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].is_ok() && rows[1].is_err());

        assert!(parse(b"code\nabc\n").is_err(), "no url column");
        assert!(parse(b"").is_err(), "no rows");
    }
}

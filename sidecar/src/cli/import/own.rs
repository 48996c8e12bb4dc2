//! `import FILE` (`--from shortlink`, the default): our own links from CSV (with a header line) or NDJSON, written through the service's
//! batch path (one transaction and one Redis `MULTI` per chunk), several chunks in flight.
//!
//! Bad rows are reported with their line number and do not stop the others; the exit status is
//! non-zero if any row failed. Every row takes a slot (its row number) under an idempotency key
//! derived from the file's content (or `--idempotency-key`), so running the same import again, after
//! a failure or a crash, creates only the rows still missing.
//!
//! Rows written by `export` (with `state`, `created_at`, `revoked_at`, generated-shape codes,
//! expiries in the past) are recreated as they were.

use crate::cli::error::BoxError;
use crate::cli::format::{FileFormat, LINK_COLUMNS};
use crate::cli::workspaces::WorkspaceArg;
use chrono::{DateTime, SubsecRound, Utc};
use futures_util::stream::{FuturesOrdered, StreamExt};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use shortlink_api::{AppState, Error};
use shortlink_config::Config;
use shortlink_core::limits::Budget;
use shortlink_core::service::accept::{self, CreateLinkRequest, Kept, Origin};
use shortlink_core::service::{
    self, IdempotencyKey, ItemOutcome, NewLink, Restore, CLI_API_KEY_ID,
};
use shortlink_model::link::card::CardSpec;
use shortlink_model::schema::WholeNumber;
use shortlink_model::WorkspaceId;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

/// What `import FILE` (our own format) is given.
#[derive(Debug, Clone)]
pub struct OwnArgs {
    pub file: PathBuf,
    pub format: Option<FileFormat>,
    pub idempotency_key: Option<String>,
    pub workspace: WorkspaceArg,
}

/// Rows per chunk (one transaction, one Redis MULTI) and chunks in flight.
const CHUNK: usize = 1000;
const PARALLEL_CHUNKS: usize = 4;

/// One row as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportRow {
    url: Option<String>,
    #[serde(alias = "alias")]
    code: Option<String>,
    expires_at: Option<String>,
    redirect: Option<u16>,
    forward_query: Option<bool>,
    state: Option<String>,
    created_at: Option<String>,
    revoked_at: Option<String>,
    campaign: Option<String>,
    #[serde(rename = "ref")]
    recipient_ref: Option<String>,
    tags: Option<Tags>,
    valid_since: Option<String>,
    not_yet_url: Option<String>,
    expired_url: Option<String>,
    /// The rules in their API form: an array in NDJSON, its JSON text in a CSV field.
    rules: Option<serde_json::Value>,
    max_visits: Option<i64>,
    /// The password's salted digest as `export` wrote it (never the password itself), so a
    /// restored link opens with the password it had.
    password_digest: Option<String>,
    /// The card in its API form: an object in NDJSON, its JSON text in a CSV field.
    preview: Option<serde_json::Value>,
    click_id_param: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Tags {
    List(Vec<String>),
    Text(String),
}

/// A row with its line number, and what it holds or why it cannot be read.
struct Read1 {
    line: u64,
    row: Result<ImportRow, String>,
}

enum Rows {
    Csv {
        reader: csv::Reader<BufReader<File>>,
        columns: Vec<String>,
    },
    Ndjson {
        reader: BufReader<File>,
        line: u64,
        bytes: u64,
    },
}

impl Rows {
    fn open(path: &std::path::Path, format: FileFormat) -> Result<Self, BoxError> {
        let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let reader = BufReader::with_capacity(1 << 20, file);
        Ok(match format {
            FileFormat::Csv => {
                let mut reader = csv::ReaderBuilder::new()
                    .has_headers(true)
                    .flexible(false)
                    .from_reader(reader);
                let columns: Vec<String> = reader
                    .headers()
                    .map_err(|e| format!("{}: line 1: {e}", path.display()))?
                    .iter()
                    .map(|name| name.trim().to_ascii_lowercase())
                    .collect();
                let known = |c: &str| c == "alias" || LINK_COLUMNS.contains(&c);
                if let Some(unknown) = columns.iter().find(|c| !known(c)) {
                    return Err(format!(
                        "{}: line 1: unknown column {unknown:?} (known: alias, {})",
                        path.display(),
                        LINK_COLUMNS.join(", ")
                    )
                    .into());
                }
                if !columns.iter().any(|c| c == "url") {
                    return Err(format!("{}: line 1: no url column", path.display()).into());
                }
                Rows::Csv { reader, columns }
            }
            FileFormat::Ndjson => Rows::Ndjson {
                reader,
                line: 0,
                bytes: 0,
            },
        })
    }

    /// Bytes read so far (for the progress bar).
    fn position(&self) -> u64 {
        match self {
            Rows::Csv { reader, .. } => reader.position().byte(),
            Rows::Ndjson { bytes, .. } => *bytes,
        }
    }

    fn next(&mut self) -> Result<Option<Read1>, BoxError> {
        match self {
            Rows::Csv { reader, columns } => {
                let mut record = csv::StringRecord::new();
                let line = reader.position().line();
                match reader.read_record(&mut record) {
                    Ok(false) => Ok(None),
                    Ok(true) => {
                        let line = record.position().map_or(line, |p| p.line());
                        Ok(Some(Read1 {
                            line,
                            row: csv_row(columns, &record),
                        }))
                    }
                    // A malformed record (wrong field count, bad UTF-8) is that row's error.
                    Err(error) if !matches!(error.kind(), csv::ErrorKind::Io(_)) => {
                        let line = error.position().map_or(line, |p| p.line());
                        Ok(Some(Read1 {
                            line,
                            row: Err(format!("unreadable CSV row: {error}")),
                        }))
                    }
                    Err(error) => Err(error.into()),
                }
            }
            Rows::Ndjson {
                reader,
                line,
                bytes,
            } => {
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    let n = reader.read_until(b'\n', &mut buf)?;
                    if n == 0 {
                        return Ok(None);
                    }
                    *line += 1;
                    *bytes += n as u64;
                    if buf.trim_ascii().is_empty() {
                        continue;
                    }
                    let row = serde_json::from_slice::<ImportRow>(&buf)
                        .map_err(|e| format!("invalid JSON: {e}"));
                    return Ok(Some(Read1 { line: *line, row }));
                }
            }
        }
    }
}

fn csv_row(columns: &[String], record: &csv::StringRecord) -> Result<ImportRow, String> {
    let mut row = ImportRow::default();
    for (name, value) in columns.iter().zip(record.iter()) {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        let text = Some(value.to_owned());
        match name.as_str() {
            "url" => row.url = text,
            "code" | "alias" => row.code = text,
            "expires_at" => row.expires_at = text,
            "redirect" => {
                row.redirect = Some(
                    value
                        .parse()
                        .map_err(|_| format!("redirect {value:?} is not a status code"))?,
                )
            }
            "forward_query" => {
                row.forward_query = Some(match value.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" => true,
                    "false" | "0" | "no" => false,
                    _ => return Err(format!("forward_query {value:?} is not true or false")),
                })
            }
            "state" => row.state = text,
            "created_at" => row.created_at = text,
            "revoked_at" => row.revoked_at = text,
            "campaign" => row.campaign = text,
            "ref" => row.recipient_ref = text,
            "tags" => row.tags = text.map(Tags::Text),
            "valid_since" => row.valid_since = text,
            "not_yet_url" => row.not_yet_url = text,
            "expired_url" => row.expired_url = text,
            "max_visits" => {
                row.max_visits = Some(
                    value
                        .parse()
                        .map_err(|_| format!("max_visits {value:?} is not a number"))?,
                )
            }
            "password_digest" => row.password_digest = text,
            "click_id_param" => row.click_id_param = text,
            "preview" => {
                row.preview = Some(
                    serde_json::from_str(value).map_err(|e| format!("preview is not JSON: {e}"))?,
                )
            }
            "rules" => {
                row.rules = Some(
                    serde_json::from_str(value).map_err(|e| format!("rules is not JSON: {e}"))?,
                )
            }
            _ => {}
        }
    }
    Ok(row)
}

/// A row's card, in its API form; its checks are the API's (`card::column`).
fn import_card(value: Option<serde_json::Value>) -> Result<Option<CardSpec>, Error> {
    value
        .filter(|value| !value.is_null())
        .map(|value| {
            serde_json::from_value(value)
                .map_err(|e| Error::invalid("invalid_preview", format!("preview: {e}")))
        })
        .transpose()
}

fn time(field: &str, text: Option<String>) -> Result<Option<DateTime<Utc>>, Error> {
    text.map(|text| {
        DateTime::parse_from_rfc3339(&text)
            .map(|at| at.with_timezone(&Utc).trunc_subsecs(6))
            .map_err(|_| {
                Error::invalid(
                    if field == "expires_at" {
                        "invalid_expiry"
                    } else {
                        "invalid_time"
                    },
                    format!("{field} {text:?} is not an RFC 3339 time"),
                )
            })
    })
    .transpose()
}

/// Checks a row as `POST /links` checks an item (`accept::imported_link`), keeping what
/// restoring an export needs: its code, its times and its password's digest.
fn new_link(
    state: &AppState,
    workspace: WorkspaceId,
    row: ImportRow,
    now: DateTime<Utc>,
) -> Result<NewLink, Error> {
    let url = row
        .url
        .ok_or_else(|| Error::invalid("missing_url", "url is required"))?;
    let created_at = time("created_at", row.created_at)?;
    let mut revoked_at = time("revoked_at", row.revoked_at)?;
    match row.state.as_deref() {
        None | Some("live" | "expired") => {}
        Some("revoked") => revoked_at = revoked_at.or(Some(now)),
        Some(other) => {
            return Err(Error::invalid(
                "invalid_state",
                format!("state {other:?} is not live, expired or revoked"),
            ))
        }
    }
    let restoring = created_at.is_some() || revoked_at.is_some() || row.state.is_some();
    let tags = match row.tags {
        None => None,
        Some(Tags::List(list)) => Some(list),
        Some(Tags::Text(text)) if text.starts_with('[') => {
            Some(serde_json::from_str(&text).map_err(|_| {
                Error::invalid("invalid_tags", "tags is neither a JSON array nor a;b;c")
            })?)
        }
        Some(Tags::Text(text)) => Some(
            text.split(';')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
    };
    let request = CreateLinkRequest {
        url,
        code: row.code,
        expires_at: time("expires_at", row.expires_at)?,
        redirect: row.redirect,
        forward_query: row.forward_query,
        campaign: row.campaign,
        recipient_ref: row.recipient_ref,
        tags,
        valid_since: time("valid_since", row.valid_since)?,
        not_yet_url: row.not_yet_url,
        expired_url: row.expired_url,
        rules: row.rules,
        max_visits: row.max_visits.map(WholeNumber),
        preview: import_card(row.preview)?,
        click_id_param: row.click_id_param,
        ..CreateLinkRequest::default()
    };
    let kept = Kept {
        // Another shortener's code (imported with `--from`, issue 40) in an export being
        // restored: kept as it was, like the rest of the row.
        origin: Origin::Export {
            exported: created_at.is_some() || row.state.is_some(),
        },
        restore: restoring.then(|| Restore {
            created_at: created_at.unwrap_or(now),
            revoked_at,
        }),
        password_digest: row.password_digest,
    };
    let settings = &state.settings;
    Ok(accept::imported_link(
        &state.links,
        workspace,
        &settings.url_policy,
        &settings.short_domains,
        request,
        kept,
    )?)
}

fn file_digest(path: &std::path::Path) -> Result<String, BoxError> {
    let mut file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(shortlink_model::validate::hex(&hasher.finalize()))
}

#[derive(Default)]
struct Tally {
    rows: u64,
    created: u64,
    existing: u64,
    failed: u64,
}

impl Tally {
    /// Counts the outcomes of a chunk, reporting each failure at its line.
    fn count(&mut self, lines: Vec<u64>, outcomes: Vec<(i64, ItemOutcome)>, report: &Report) {
        for (line, (_, outcome)) in lines.into_iter().zip(outcomes) {
            match outcome {
                ItemOutcome::Created(_) => self.created += 1,
                ItemOutcome::Existing(_) => self.existing += 1,
                ItemOutcome::Failed(failure) => {
                    self.failed += 1;
                    let error = shortlink_api::failure_error(failure);
                    report(line, error.code(), &error.message());
                }
            }
        }
    }

    /// The summary line; an error if any row failed.
    fn finish(self) -> Result<(), BoxError> {
        println!(
            "import: {} rows: {} created (or already imported), {} existing, {} failed",
            self.rows, self.created, self.existing, self.failed
        );
        if self.failed > 0 {
            return Err(format!(
                "{} of {} rows failed (see the lines above)",
                self.failed, self.rows
            )
            .into());
        }
        Ok(())
    }
}

/// Reports a row's problem: its line, the error code and the message.
type Report<'a> = dyn Fn(u64, &str, &str) + 'a;

/// The next chunk of valid rows, as `(index, link)` items and their lines; whether the file
/// ended. Rows that do not parse or check are counted and reported here.
struct Chunk {
    items: Vec<(i64, NewLink)>,
    lines: Vec<u64>,
    finished: bool,
}

pub async fn run(config: &Config, args: OwnArgs) -> Result<(), BoxError> {
    let format = args
        .format
        .or_else(|| FileFormat::from_path(&args.file))
        .ok_or("cannot tell the format from the file name: give --format csv or --format ndjson")?;
    let state = crate::build_state(config).await?;
    let workspace = args
        .workspace
        .resolve(state.links.storage().as_ref())
        .await?
        .id;
    let name = args.file.display().to_string();
    let (claim, claim_key) = claim_file(&state, &args).await?;
    let bar = progress_bar(std::fs::metadata(&args.file)?.len());
    let report = |line: u64, code: &str, message: &str| {
        bar.suspend(|| eprintln!("{name}:{line}: {code}: {message}"));
    };

    let mut rows = Rows::open(&args.file, format)?;
    let job = Arc::new(service::Job::new(service::Authority::command_line(
        workspace,
    )));
    let mut tally = Tally::default();
    let mut in_flight = FuturesOrdered::new();
    let mut index = 0i64;
    let mut finished = false;
    while !finished || !in_flight.is_empty() {
        if !finished && in_flight.len() < PARALLEL_CHUNKS {
            let chunk = read_chunk(
                &mut rows, &state, workspace, &mut tally, &mut index, &report,
            )?;
            finished = chunk.finished;
            bar.set_position(rows.position());
            if !chunk.items.is_empty() {
                let (links, items, lines) = (state.links.clone(), chunk.items, chunk.lines);
                // The operator's command line on the server: no quota.
                let mut unmetered = Budget::command_line(workspace)
                    .reserve_links(items.len() as u64)
                    .await?;
                // Taken here, in file order: the tasks may start in any order.
                let (job, turn) = (Arc::clone(&job), job.turn());
                let task = tokio::spawn(async move {
                    (links.create_chunk(items, Some(claim), (&job, turn), &mut unmetered)).await
                });
                in_flight.push_back(async move { (lines, task.await) });
            }
            continue;
        }
        let Some((lines, outcomes)) = in_flight.next().await else {
            continue;
        };
        let outcomes = outcomes.map_err(|e| format!("import task failed: {e}"))?;
        tally.count(lines, outcomes, &report);
        bar.set_message(format!("{} links", tally.created + tally.existing));
    }
    bar.finish_and_clear();
    let counts = [
        ("rows", tally.rows),
        ("created", tally.created),
        ("existing", tally.existing),
        ("failed", tally.failed),
    ];
    let storage = state.links.storage();
    let mut origin = shortlink_store::audit::Origin::new(shortlink_store::audit::Actor::cli());
    origin.workspace_id = workspace.get();
    super::audit::record_import(storage.as_ref(), &origin, &name, &counts, Some(claim_key)).await?;
    tally.finish()
}

/// Claims the file's idempotency key (by default its digest): a second import of the same file
/// answers what the first created, and another file under the same key is refused.
/// The claim, and the key it was claimed under (for the audit row).
async fn claim_file(
    state: &AppState,
    args: &OwnArgs,
) -> Result<(service::Claim, String), BoxError> {
    let digest = file_digest(&args.file)?;
    let key = IdempotencyKey {
        api_key_id: CLI_API_KEY_ID,
        key: (args.idempotency_key.clone()).unwrap_or_else(|| format!("import:{digest}")),
    };
    let claim = state
        .links
        .claim(&key, &service::request_hash("import", [digest.as_bytes()]))
        .await
        .map_err(|e| match e {
            service::ServiceError::IdempotencyKeyReused => {
                format!(
                    "the idempotency key {:?} was used with another file",
                    key.key
                )
            }
            other => other.to_string(),
        })?;
    Ok((claim, key.key))
}

fn progress_bar(size: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(size);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left) {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Reads rows until a chunk is full or the file ends; `index` numbers every row read.
fn read_chunk(
    rows: &mut Rows,
    state: &AppState,
    workspace: WorkspaceId,
    tally: &mut Tally,
    index: &mut i64,
    report: &Report,
) -> Result<Chunk, BoxError> {
    let now = shortlink_store::now();
    let mut chunk = Chunk {
        items: Vec::with_capacity(CHUNK),
        lines: Vec::with_capacity(CHUNK),
        finished: false,
    };
    while chunk.items.len() < CHUNK {
        let Some(read) = rows.next()? else {
            chunk.finished = true;
            break;
        };
        tally.rows += 1;
        let this = *index;
        *index += 1;
        match read.row {
            Err(message) => {
                tally.failed += 1;
                report(read.line, "invalid_row", &message);
            }
            Ok(row) => match new_link(state, workspace, row, now) {
                Ok(new) => {
                    chunk.items.push((this, new));
                    chunk.lines.push(read.line);
                }
                Err(error) => {
                    tally.failed += 1;
                    report(read.line, error.code(), &error.message());
                }
            },
        }
    }
    Ok(chunk)
}

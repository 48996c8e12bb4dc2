//! `export`: links as CSV or NDJSON, in code order, a page at a time (memory stays flat), in the
//! columns `import` reads, so that an export imported on a fresh database reproduces the links.

use super::error::BoxError;
use super::format::{FileFormat, LINK_COLUMNS};
use super::progress::progress_bar;
use super::workspaces::WorkspaceArg;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use shortlink_config::Config;
use shortlink_model::{Link, LinkState};
use shortlink_store::{self, LinkFilter};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    Live,
    Expired,
    Revoked,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// csv or ndjson; default from the `--output` extension, else csv.
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// Write here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Only links of this campaign.
    #[arg(long)]
    pub campaign: Option<String>,
    /// Only links in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only links with this recipient reference.
    #[arg(long = "ref")]
    pub recipient_ref: Option<String>,
    /// The workspace whose links are written.
    #[command(flatten)]
    pub workspace: WorkspaceArg,
}

#[derive(Serialize)]
struct ExportRow<'a> {
    code: &'a str,
    url: &'a str,
    redirect: u16,
    forward_query: bool,
    state: &'static str,
    expires_at: Option<String>,
    created_at: String,
    revoked_at: Option<String>,
    campaign: Option<&'a str>,
    #[serde(rename = "ref")]
    recipient_ref: Option<&'a str>,
    tags: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    valid_since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_yet_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expired_url: Option<&'a str>,
    /// The stored rules: an array in NDJSON, the stored JSON text verbatim in CSV.
    #[serde(skip_serializing_if = "Option::is_none")]
    rules: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_visits: Option<i64>,
    /// The salted digest, never a password: an import restores the link's password with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    password_digest: Option<&'a str>,
    /// The card: an object in NDJSON, the stored JSON text verbatim in CSV.
    #[serde(skip_serializing_if = "Option::is_none")]
    preview: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    click_id_param: Option<&'a str>,
}

const PAGE: u32 = 1000;

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn state_name(state: LinkState) -> &'static str {
    match state {
        LinkState::Live => "live",
        LinkState::Expired => "expired",
        LinkState::Revoked => "revoked",
    }
}

/// Tags in one CSV field: `a;b`, or a JSON array if a tag holds `;` or starts with `[`.
pub fn csv_tags(tags: &[String]) -> String {
    if tags.iter().any(|t| t.contains(';') || t.starts_with('[')) {
        serde_json::to_string(tags).unwrap_or_default()
    } else {
        tags.join(";")
    }
}

pub async fn run(config: &Config, args: ExportArgs) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    let format = args
        .format
        .or_else(|| args.output.as_deref().and_then(FileFormat::from_path))
        .unwrap_or(FileFormat::Csv);
    let workspace = args.workspace.resolve(storage.as_ref()).await?;
    let mut filter = LinkFilter::in_workspace(workspace.id);
    filter.campaign = args.campaign;
    filter.recipient_ref = args.recipient_ref;
    filter.state = args.state.map(|state| {
        let state = match state {
            StateArg::Live => LinkState::Live,
            StateArg::Expired => LinkState::Expired,
            StateArg::Revoked => LinkState::Revoked,
        };
        (state, shortlink_store::now())
    });
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let out = std::io::BufWriter::new(out);
    let bar = progress_bar(storage.count_links(&filter).await?, "links");
    let mut sink = match format {
        FileFormat::Csv => {
            let mut csv = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(out);
            csv.write_record(LINK_COLUMNS)?;
            Sink::Csv(Box::new(csv))
        }
        FileFormat::Ndjson => Sink::Ndjson(out),
    };
    let mut after: Option<String> = None;
    let mut count = 0u64;
    loop {
        let page = storage.scan_links(&filter, after.as_deref(), PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.code.clone());
        let now = shortlink_store::now();
        for link in &page {
            sink.write(link, now)?;
        }
        count += page.len() as u64;
        bar.inc(page.len() as u64);
    }
    match &mut sink {
        Sink::Csv(csv) => csv.flush()?,
        Sink::Ndjson(out) => out.flush()?,
    }
    bar.finish_and_clear();
    eprintln!("export: {count} links");
    Ok(())
}

enum Sink {
    Csv(Box<csv::Writer<std::io::BufWriter<Box<dyn Write>>>>),
    Ndjson(std::io::BufWriter<Box<dyn Write>>),
}

impl Sink {
    fn write(&mut self, link: &Link, now: DateTime<Utc>) -> Result<(), BoxError> {
        let rules = match (&*self, link.extras.rules.as_deref()) {
            (Sink::Ndjson(_), Some(text)) => Some(
                serde_json::from_str(text)
                    .map_err(|e| format!("link {}: stored rules are not JSON: {e}", link.code))?,
            ),
            _ => None,
        };
        let preview = match (&*self, link.extras.preview.as_deref()) {
            (Sink::Ndjson(_), Some(text)) => Some(
                serde_json::from_str(text)
                    .map_err(|e| format!("link {}: stored card is not JSON: {e}", link.code))?,
            ),
            _ => None,
        };
        let row = ExportRow {
            code: &link.code,
            url: &link.target,
            redirect: link.redirect,
            forward_query: link.flags.forward_query(),
            state: state_name(link.state(now)),
            expires_at: link.expires_at.map(time),
            created_at: time(link.created_at),
            revoked_at: link.revoked_at.map(time),
            campaign: link.campaign.as_deref(),
            recipient_ref: link.recipient_ref.as_deref(),
            tags: &link.tags,
            valid_since: link.extras.valid_since.map(time),
            not_yet_url: link.extras.not_yet_url.as_deref(),
            expired_url: link.extras.expired_url.as_deref(),
            rules,
            max_visits: link.extras.max_visits,
            password_digest: link.extras.password_digest.as_deref(),
            preview,
            click_id_param: link.extras.click_id_param.as_deref(),
        };
        match self {
            Sink::Ndjson(out) => {
                serde_json::to_writer(&mut *out, &row)?;
                out.write_all(b"\n")?;
            }
            Sink::Csv(csv) => csv.write_record([
                row.code,
                row.url,
                &row.redirect.to_string(),
                if row.forward_query { "true" } else { "false" },
                row.state,
                row.expires_at.as_deref().unwrap_or(""),
                &row.created_at,
                row.revoked_at.as_deref().unwrap_or(""),
                row.campaign.unwrap_or(""),
                row.recipient_ref.unwrap_or(""),
                &csv_tags(row.tags),
                row.valid_since.as_deref().unwrap_or(""),
                row.not_yet_url.unwrap_or(""),
                row.expired_url.unwrap_or(""),
                link.extras.rules.as_deref().unwrap_or(""),
                &row.max_visits.map(|n| n.to_string()).unwrap_or_default(),
                row.password_digest.unwrap_or(""),
                link.extras.preview.as_deref().unwrap_or(""),
                row.click_id_param.unwrap_or(""),
            ])?,
        }
        Ok(())
    }
}

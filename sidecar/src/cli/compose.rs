//! `compose`: a campaign's messages from a file of recipients, through the API's own handler
//! (`POST /api/v1/compose`) in this process: the same options, checks, links and answer, with
//! no server to run and no API key (idempotency keys are the command line's own).

use super::error::BoxError;
use super::format::FileFormat;
use super::workspaces::WorkspaceArg;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::Extension;
use futures_util::StreamExt;
use shortlink_api::compose::ComposeParams;
use shortlink_api::{self, ApiKeyId, DomainContext, PUBLIC_BASE_HEADER};
use shortlink_config::Config;
use shortlink_core::service::CLI_API_KEY_ID;
use std::path::PathBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read from the recipients' file at once.
const READ_BYTES: usize = 256 << 10;

#[derive(Debug, clap::Args)]
pub struct ComposeArgs {
    /// The recipients: CSV with a header line (`phone`, `ref`, `url`, `link`, and a column per
    /// variable) or NDJSON (`{"phone", "ref", "variables", "url", "link"}` a line).
    pub file: PathBuf,
    /// csv or ndjson; default from the extension (`.csv`, `.ndjson`, `.jsonl`).
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// Where the answer goes (one line per recipient, then the summary); default: stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The answer as csv or ndjson; default: from `--output`'s extension, else as the input.
    #[arg(long, value_enum)]
    pub output_format: Option<FileFormat>,
    /// Makes a retry answer the same codes (also after an interruption).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// The issuing domains, as nginx's `$shortlink_public_base` lists them (`https://s1.example
    /// weight=3 https://s2.example`); default: `--public-base-url`.
    #[arg(long)]
    pub issuing: Option<String>,
    #[command(flatten)]
    pub campaign: ComposeParams,
    /// The workspace whose links the campaign gets.
    #[command(flatten)]
    pub workspace: WorkspaceArg,
}

pub async fn run(config: &Config, args: ComposeArgs) -> Result<(), BoxError> {
    let format = args
        .format
        .or_else(|| FileFormat::from_path(&args.file))
        .ok_or("give --format csv or ndjson (the file's extension does not say)")?;
    let output_format = args
        .output_format
        .or_else(|| args.output.as_deref().and_then(FileFormat::from_path))
        .unwrap_or(format);
    let state = crate::build_state(config).await?;
    let workspace = args
        .workspace
        .resolve(state.links.storage().as_ref())
        .await?;
    let headers = headers(&args, format, output_format)?;
    let (mut parts, ()) = axum::http::Request::new(()).into_parts();
    parts.headers = headers.clone();
    let domains = DomainContext::from_request_parts(&mut parts, &state).await?;
    let file = tokio::fs::File::open(&args.file).await?;
    let answer = shortlink_api::compose::compose(
        State(state),
        shortlink_api::Budget::command_line(workspace.id),
        shortlink_api::Recorder({
            let mut origin =
                shortlink_store::audit::Origin::new(shortlink_store::audit::Actor::cli());
            origin.workspace_id = workspace.id.get();
            origin
        }),
        Extension(ApiKeyId(CLI_API_KEY_ID)),
        headers,
        domains,
        shortlink_api::Query(args.campaign),
        Body::from_stream(file_stream(file)),
    )
    .await
    .map_err(|error| format!("{} ({})", error.message(), error.code()))?;
    let mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &args.output {
        Some(path) => Box::new(tokio::fs::File::create(path).await?),
        None => Box::new(tokio::io::stdout()),
    };
    let mut body = answer.into_body().into_data_stream();
    while let Some(frame) = body.next().await {
        out.write_all(&frame?).await?;
    }
    out.flush().await?;
    Ok(())
}

/// The request headers the handler reads: the formats, the key, the issuing domains.
fn headers(
    args: &ComposeArgs,
    format: FileFormat,
    output_format: FileFormat,
) -> Result<HeaderMap, BoxError> {
    let mime = |format| match format {
        FileFormat::Csv => HeaderValue::from_static("text/csv"),
        FileFormat::Ndjson => HeaderValue::from_static("application/x-ndjson"),
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, mime(format));
    headers.insert(header::ACCEPT, mime(output_format));
    if let Some(key) = &args.idempotency_key {
        headers.insert(shortlink_api::links::IDEMPOTENCY_KEY_HEADER, key.parse()?);
    }
    if let Some(issuing) = &args.issuing {
        headers.insert(PUBLIC_BASE_HEADER, issuing.parse()?);
    }
    Ok(headers)
}

/// The file as a body, read a block at a time.
fn file_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::try_unfold(file, |mut file| async move {
        let mut buffer = vec![0; READ_BYTES];
        let read = file.read(&mut buffer).await?;
        buffer.truncate(read);
        Ok((read > 0).then(|| (Bytes::from(buffer), file)))
    })
}

//! `import`: links into this shortener. Our own export (`--from shortlink`, the default: new
//! codes where a row has none, see [`own`]), or another shortener's links (`--from yourls |
//! shlink | kutt | bitly | csv`), each kept on its code, target, times, tags and visit history
//! so that a link already sent keeps working as before (docs/MIGRATING.md). `verify-import`
//! replays the source's links against an edge ([`verify`]).

pub(crate) mod audit;
mod own;
pub(crate) mod report;
pub(crate) mod source;
pub mod verify;
pub(crate) mod write;

use super::workspaces::WorkspaceArg;
use crate::cli::error::BoxError;
use crate::cli::format::FileFormat;
use report::{Reason, Report};
use shortlink_config::Config;
pub use source::{SourceArgs, SourceKind};
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The file: ours (CSV with a header line, or NDJSON: url, code or alias, expires_at,
    /// redirect, forward_query, campaign, ref, tags as `a;b`, and export's state, created_at,
    /// revoked_at), a generic CSV (`--from csv`), or Shlink's or Bitly's CSV export.
    pub file: Option<PathBuf>,
    /// Where the links come from; `shortlink` is our own export.
    #[arg(long, value_enum, default_value_t = SourceKind::Shortlink)]
    pub from: SourceKind,
    /// csv or ndjson (`--from shortlink`); default from the extension.
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// `--from shortlink`: makes the import resumable under this key; default: derived from the
    /// file's content. (Other sources resume by code, with no key.)
    #[arg(long)]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Read and check everything, write nothing: the report says what would be imported.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write the report as JSON here (counts per reason, every link not imported and why).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Import links and their visit totals only, not their individual visits.
    #[arg(long)]
    pub no_visits: bool,
    /// The workspace the links go to.
    #[command(flatten)]
    pub workspace: WorkspaceArg,
}

pub async fn run(config: &Config, mut args: ImportArgs) -> Result<(), BoxError> {
    if args.from == SourceKind::Shortlink {
        let file = args
            .file
            .ok_or("import needs a FILE (or --from another source)")?;
        return own::run(
            config,
            own::OwnArgs {
                file,
                format: args.format,
                idempotency_key: args.idempotency_key,
                workspace: args.workspace,
            },
        )
        .await;
    }
    args.source.file = args.file.clone();
    args.source.outbound = shortlink_core::outbound::Policy::imports(config);
    args.source.page_size = args.source.page_size.clamp(1, 1000);
    let state = crate::build_state(config).await?;
    let workspace = args
        .workspace
        .resolve(state.links.storage().as_ref())
        .await?;
    let mut source = source::open(args.from, &args.source).await?;
    let mut writer = write::Writer::new(
        &state,
        // The operator's command line on the server: no quota.
        shortlink_core::limits::Budget::command_line(workspace.id),
        args.from.name(),
        args.source.source_domain.as_deref(),
        args.dry_run,
        !args.no_visits,
    );
    writer.forward_query = args.source.forward_query;
    let mut report = Report {
        source: args.from.name().to_owned(),
        dry_run: args.dry_run,
        ..Report::default()
    };
    let bar = progress_bar();
    let mut shown = 0;
    while let Some(items) = source.next_page().await? {
        if let Some(total) = source.total() {
            bar.set_length(total);
        }
        writer.page(&mut *source, items, &mut report).await?;
        bar.set_position(report.read);
        for problem in &report.problems[shown..] {
            let line = format!(
                "{} ({}): {}: {}",
                problem.code,
                if problem.domain.is_empty() {
                    "-"
                } else {
                    &problem.domain
                },
                report::reason_name(problem.reason),
                problem.message
            );
            bar.suspend(|| eprintln!("{line}"));
        }
        shown = report.problems.len();
    }
    bar.finish_and_clear();
    let storage = state.links.storage();
    let mut origin = shortlink_store::audit::Origin::new(shortlink_store::audit::Actor::cli());
    origin.workspace_id = workspace.id.get();
    audit::record_source_import(storage.as_ref(), &origin, &report).await?;
    println!("{}", report.summary());
    if let Some(path) = &args.report {
        let json = serde_json::to_vec_pretty(&report)?;
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let failed = report.count(Reason::Failed);
    if failed > 0 {
        return Err(format!("{failed} links failed to be written: run the import again").into());
    }
    Ok(())
}

/// Drawn on stderr only when it is a terminal (indicatif hides it otherwise).
fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} links ({per_sec}, {eta} left)",
    ) {
        bar.set_style(style);
    }
    bar
}

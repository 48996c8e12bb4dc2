//! `resync`: rewrite Redis from SQL, in code order, a page at a time; resumable with
//! `--from-code` (the last code it printed). Then remove orphan keys ([`super::orphans`]);
//! resumable with `--orphans-from` (the cursor it printed). A complete run sets the projection marker.

use super::{orphans, progress_bar, BoxError};
use crate::config::Config;
use crate::projection::RecordWrite;
use crate::projection_marker::ProjectionMarker;
use crate::storage::{self, LinkFilter, LinkState};

#[derive(Debug, Clone, clap::Args)]
pub struct ResyncArgs {
    /// Start after this code (resume an interrupted resync from the last code it reported).
    #[arg(long)]
    pub from_code: Option<String>,
    /// Skip the rewrite and resume removing orphan keys (no link in SQL) at this SCAN cursor,
    /// as printed by an interrupted run.
    #[arg(long, value_name = "CURSOR")]
    pub orphans_from: Option<u64>,
}

/// Links read per SQL page and written per Redis pipeline.
const RESYNC_PAGE: u32 = 1000;

pub async fn run(config: &Config, args: ResyncArgs) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    // The marker it sets names the configured code scheme: it must be the data's.
    if let Ok(scheme) = config.code_scheme() {
        crate::code_scheme::check_database(storage.as_ref(), &scheme, config).await?;
    }
    let projection = crate::open_projection(config)?;
    if let Some(cursor) = args.orphans_from {
        return orphans::resync_step(storage.as_ref(), &projection, cursor).await;
    }
    let filter = LinkFilter::default();
    let bar = progress_bar(storage.count_links(&filter).await?, "links");
    let (mut live, mut expired, mut revoked, mut removed) = (0u64, 0u64, 0u64, 0u64);
    // Only a complete run vouches for the whole projection (crate::projection_marker).
    let marker = ProjectionMarker::new(config)?;
    let token = match args.from_code {
        None => Some(marker.begin().await?),
        Some(_) => None,
    };
    let mut after: Option<String> = args.from_code;
    loop {
        let page = match storage
            .scan_links(&filter, after.as_deref(), RESYNC_PAGE)
            .await
        {
            Ok(page) => page,
            Err(error) => return Err(interrupted(&bar, after.as_deref(), error.into())),
        };
        let Some(last) = page.last() else { break };
        let last = last.code.clone();
        let now = storage::now();
        let writes: Vec<RecordWrite> = page
            .iter()
            .map(|link| {
                let write = RecordWrite::for_link(link, now, config.expired_grace);
                match (link.state(now), &write) {
                    (_, RecordWrite::Delete { .. }) => removed += 1,
                    (LinkState::Live, _) => live += 1,
                    (LinkState::Expired, _) => expired += 1,
                    (LinkState::Revoked, _) => revoked += 1,
                }
                write
            })
            .collect();
        if let Err(error) = projection.apply_pipelined(&writes).await {
            return Err(interrupted(&bar, after.as_deref(), error.into()));
        }
        bar.inc(page.len() as u64);
        after = Some(last);
    }
    bar.finish_and_clear();
    println!(
        "resync: {} links written to redis ({live} live, {expired} expired within grace, \
         {revoked} revoked), {removed} past grace removed",
        live + expired + revoked
    );
    orphans::resync_step(storage.as_ref(), &projection, 0).await?;
    marker.finish_after_resync(token).await?;
    Ok(())
}

fn interrupted(bar: &indicatif::ProgressBar, after: Option<&str>, error: BoxError) -> BoxError {
    bar.abandon();
    match after {
        Some(code) => format!("{error} (resume with `resync --from-code {code}`)").into(),
        None => error,
    }
}

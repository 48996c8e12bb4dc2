//! `resync`: rewrite Redis from SQL, in code order, a page at a time; resumable with
//! `--from-code` (the last code it printed); then the not-found redirects' hash. Then remove orphan keys ([`super::orphans`]);
//! resumable with `--orphans-from` (the cursor it printed). A complete run sets the projection marker.

use super::error::BoxError;
use super::orphans;
use super::progress::progress_bar;
use shortlink_config::Config;
use shortlink_core::projection::marker::ProjectionMarker;
use shortlink_core::projection::{not_found, Projection, RecordWrite, Slugs};
use shortlink_model::LinkState;
use shortlink_store::{self, LinkFilter, Storage, RESTORED_BEHIND_REDIS_SETTING};
use shortlink_wire::keys::ISSUED_MARK;

#[derive(Debug, Clone, clap::Args)]
pub struct ResyncArgs {
    /// Start after this code (resume an interrupted resync from the last code it reported).
    #[arg(long)]
    pub from_code: Option<String>,
    /// Skip the rewrite and resume removing orphan keys (no link in SQL) at this SCAN cursor,
    /// as printed by an interrupted run.
    #[arg(long, value_name = "CURSOR")]
    pub orphans_from: Option<u64>,
    /// Remove orphan keys even though the database was restored older than Redis: those keys
    /// are then links created after the backup, likely already sent, and stop working.
    #[arg(long)]
    pub remove_orphans_after_restore: bool,
}

/// Links read per SQL page and written per Redis pipeline.
const RESYNC_PAGE: u32 = 1000;

pub async fn run(config: &Config, args: ResyncArgs) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    // The marker it sets names the configured code scheme: it must be the data's.
    if let Ok(scheme) = config.code_scheme() {
        shortlink_core::code_scheme::check_database(storage.as_ref(), &scheme, config).await?;
    }
    let projection = crate::open_projection(config)?;
    if let Some(cursor) = args.orphans_from {
        if !orphans_allowed(
            storage.as_ref(),
            &projection,
            args.remove_orphans_after_restore,
        )
        .await?
        {
            return Ok(());
        }
        return orphans::resync_step(storage.as_ref(), &projection, cursor).await;
    }
    let filter = LinkFilter::all_workspaces();
    // Every record names its workspace's slug, all read once.
    let slugs = Slugs::load(storage.as_ref()).await?;
    let bar = progress_bar(storage.count_links(&filter).await?, "links");
    let (mut live, mut expired, mut revoked, mut removed) = (0u64, 0u64, 0u64, 0u64);
    // Only a complete run vouches for the whole projection (shortlink_core::projection::marker).
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
        let now = shortlink_store::now();
        // Each record with its card key (written or removed: a card SQL no longer has goes).
        let writes: Vec<RecordWrite> = page
            .iter()
            .flat_map(|link| {
                // Loaded at the start, every link's workspace is known unless it was created
                // since: left for the next resync rather than written naming no workspace.
                let Some(workspace) = slugs.known_record_workspace(link.workspace) else {
                    tracing::error!(code = %link.code, "resync: the link's workspace is unknown; its record is not written");
                    return Vec::new();
                };
                let writes =
                    RecordWrite::for_link_and_card(link, workspace, now, config.expired_grace);
                match (link.state(now), &writes[0]) {
                    (_, RecordWrite::Delete { .. }) => removed += 1,
                    (LinkState::Live, _) => live += 1,
                    (LinkState::Expired, _) => expired += 1,
                    (LinkState::Revoked, _) => revoked += 1,
                }
                writes
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
    // Not links, but lost with them: the not-found redirects the module copies.
    not_found::project(storage.as_ref(), &projection).await?;
    println!("resync: not-found redirects written to redis");
    if orphans_allowed(
        storage.as_ref(),
        &projection,
        args.remove_orphans_after_restore,
    )
    .await?
    {
        orphans::resync_step(storage.as_ref(), &projection, 0).await?;
    }
    marker.finish_after_resync(token).await?;
    Ok(())
}

/// Whether orphan keys may be removed: not while the database is (or was found) behind Redis's
/// high-water mark (docs/BACKUP.md, "A database older than Redis"), unless asked to.
async fn orphans_allowed(
    storage: &dyn Storage,
    projection: &Projection,
    force: bool,
) -> Result<bool, BoxError> {
    let recorded = storage.setting(RESTORED_BEHIND_REDIS_SETTING).await?;
    let behind = projection.issued_mark().await? > storage.sequence_next().await?;
    if !(behind || recorded.is_some()) {
        return Ok(true);
    }
    if force {
        storage
            .delete_setting(RESTORED_BEHIND_REDIS_SETTING)
            .await?;
        return Ok(true);
    }
    eprintln!(
        "resync: the database was restored older than Redis (its sequence is behind Redis's \
         high-water mark {ISSUED_MARK}): Redis records it lacks are links created after the \
         backup, likely sent. Orphan keys were NOT removed; see docs/BACKUP.md, or run again with \
         --remove-orphans-after-restore"
    );
    Ok(false)
}

fn interrupted(bar: &indicatif::ProgressBar, after: Option<&str>, error: BoxError) -> BoxError {
    bar.abandon();
    match after {
        Some(code) => format!("{error} (resume with `resync --from-code {code}`)").into(),
        None => error,
    }
}

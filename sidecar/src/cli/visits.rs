//! The analytics subcommands (`consume`, `cleanup`).

use super::error::BoxError;
use shortlink_config::Config;
use shortlink_core::background::{Tasks, DRAIN};
use shortlink_visits::{cleanup, cleanup_settings, VisitJobs};
use std::sync::Arc;

/// `consume`: a standalone consumer (no HTTP API) until SIGTERM or Ctrl-C. Runs the cleanup jobs
/// too when they are configured.
pub async fn consume(config: &Config) -> Result<(), BoxError> {
    tracing::info!(?config, "starting the visit consumer");
    // A long-running writer: a command run beside it gets its turn on SQLite's one writer.
    shortlink_store::sqlite_turn::serve_beside_commands();
    let jobs = VisitJobs::from_config(config, true)?;
    let state = crate::build_state(config).await?;
    let mut tasks = Tasks::new();
    jobs.spawn(
        &mut tasks,
        Arc::clone(&state.links),
        Arc::clone(&state.analytics.store),
        state.settings.click_judge.sweeps(),
    );
    crate::shutdown_signal().await;
    tasks.shutdown(DRAIN).await;
    Ok(())
}

/// `cleanup`: runs the configured jobs and the retention policies once and prints what they did.
pub async fn cleanup_once(config: &Config) -> Result<(), BoxError> {
    // Without a flag it still has the workspaces' and campaigns' retention policies to apply.
    let settings = cleanup_settings(config);
    let state = crate::build_state(config).await?;
    let report = cleanup::run_once(&settings, &state.links, state.analytics.store.as_ref()).await?;
    println!(
        "cleanup: {} idle links expired, {} raw visits, {} conversions and {} webhook failures deleted",
        report.links_expired,
        report.visits_deleted,
        report.conversions_deleted,
        report.webhook_failures_deleted
    );
    Ok(())
}

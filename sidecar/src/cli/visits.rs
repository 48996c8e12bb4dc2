//! The analytics subcommands (`consume`, `cleanup`) and the background tasks of `serve`.

use super::BoxError;
use crate::config::Config;
use crate::http::AppState;
use crate::visits::{cleanup, cleanup_settings, Background};
use std::sync::Arc;

/// What `serve` runs beside the API on tasks of their own: the consumer (unless
/// `--consumer false`) and the cleanup jobs (when configured); for a caller that builds its own
/// server (tests).
pub fn start_background(config: &Config, state: &AppState) -> Result<Background, BoxError> {
    Ok(Background::spawn(
        config,
        Arc::clone(&state.links),
        Arc::clone(&state.analytics.store),
        config.consumer,
    )?)
}

/// `consume`: a standalone consumer (no HTTP API) until SIGTERM or Ctrl-C. Runs the cleanup jobs
/// too when they are configured.
pub async fn consume(config: &Config) -> Result<(), BoxError> {
    tracing::info!(?config, "starting the visit consumer");
    let state = crate::build_state(config).await?;
    let background = Background::spawn(
        config,
        Arc::clone(&state.links),
        Arc::clone(&state.analytics.store),
        true,
    )?;
    crate::shutdown_signal().await;
    background.shutdown().await;
    Ok(())
}

/// `cleanup`: runs the configured jobs once and prints what they did.
pub async fn cleanup_once(config: &Config) -> Result<(), BoxError> {
    let settings = cleanup_settings(config);
    if !settings.is_enabled() {
        return Err("nothing to do: set --expire-idle-after and/or --visit-retention".into());
    }
    let state = crate::build_state(config).await?;
    let report = cleanup::run_once(&settings, &state.links, state.analytics.store.as_ref()).await?;
    println!(
        "cleanup: {} idle links expired, {} raw visits deleted",
        report.links_expired, report.visits_deleted
    );
    Ok(())
}

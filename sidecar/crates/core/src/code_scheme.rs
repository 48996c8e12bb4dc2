//! Every code already sent depends on the code secret, the code length and the check character.
//! Their fingerprint ([`shortcode::CodeScheme::fingerprint`], never the secret) is recorded in
//! SQL with the data on first start and compared on every start, before anything is written:
//! a sidecar started with another secret would issue codes under it and the module would answer
//! 404 to every link sent before (docs/ARCHITECTURE.md, "Code scheme fingerprint").
//!
//! The fingerprint also travels in the projection marker's value (`<unix ms> <fingerprint>`),
//! where the nginx module reads it with every lookup; a sidecar refuses to start on a Redis whose
//! marker names another scheme.

use crate::projection::marker::ProjectionMarker;
use shortcode::{fingerprint_difference, CodeScheme, Shape};
use shortlink_config::Config;
use shortlink_store::{self as storage, LinkFilter, Storage, StorageError, CODE_SCHEME_SETTING};

#[derive(Debug, thiserror::Error)]
pub enum SchemeCheckError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The whole message for the operator: what differs, where the secret came from, what to do.
    #[error("{0}")]
    Mismatch(String),
}

/// Links sampled when a database that has links but no recorded fingerprint (one from before
/// fingerprints) records its first: their check characters must verify under this secret.
const SAMPLE: u32 = 1000;

/// The start-up check: records the fingerprint in a database that has none, refuses one that
/// recorded another. Runs before any data write (sequence lease, Redis, key bootstrap).
pub async fn check_database(
    storage: &dyn Storage,
    scheme: &CodeScheme,
    config: &Config,
) -> Result<(), SchemeCheckError> {
    let ours = scheme.fingerprint();
    let recorded = match storage.setting(CODE_SCHEME_SETTING).await? {
        Some(recorded) => recorded,
        None => {
            check_existing_codes(storage, scheme, config).await?;
            let recorded = storage
                .init_setting(CODE_SCHEME_SETTING, ours, storage::now())
                .await?;
            if recorded == ours {
                tracing::info!(fingerprint = ours, "code scheme fingerprint recorded");
            }
            recorded
        }
    };
    if recorded == ours {
        return Ok(());
    }
    Err(SchemeCheckError::Mismatch(mismatch_message(
        "this database's links were issued under",
        &recorded,
        ours,
        config,
    )))
}

/// A database from before fingerprints: the generated codes it holds must pass this secret's
/// check character (a wrong secret passes one in 62), else the secret is not theirs.
async fn check_existing_codes(
    storage: &dyn Storage,
    scheme: &CodeScheme,
    config: &Config,
) -> Result<(), SchemeCheckError> {
    if !scheme.has_check() {
        return Ok(());
    }
    let links = storage
        .scan_links(&LinkFilter::all_workspaces(), None, SAMPLE)
        .await?;
    let (mut generated, mut failing) = (0usize, 0usize);
    for link in &links {
        match scheme.shape(link.code.as_bytes()) {
            Shape::Generated => generated += 1,
            Shape::BadCheck => {
                generated += 1;
                failing += 1;
            }
            Shape::Alias | Shape::Invalid => {}
        }
    }
    if failing == 0 {
        return Ok(());
    }
    Err(SchemeCheckError::Mismatch(format!(
        "the code secret does not match the links in this database: {failing} of {generated} \
         generated codes sampled fail its check character (no fingerprint was recorded yet)\n  \
         secret: {source}\n\
         Restore the secret these links were issued under and start again.",
        source = config.secret_source(),
    )))
}

/// Refuses a Redis whose projection marker was set under another code scheme (another
/// deployment's sidecar, or this one before a secret change). Redis down: nothing to check now;
/// the marker the refill sets carries ours.
pub async fn check_redis(
    marker: &ProjectionMarker,
    scheme: &CodeScheme,
    config: &Config,
) -> Result<(), SchemeCheckError> {
    let value = match marker.value().await {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(%error, "cannot read the projection marker to check the code scheme");
            return Ok(());
        }
    };
    match value
        .as_deref()
        .and_then(crate::projection::marker::marker_fingerprint)
    {
        Some(found) if found != scheme.fingerprint() => {
            Err(SchemeCheckError::Mismatch(mismatch_message(
                "Redis's projection marker was set under",
                found,
                scheme.fingerprint(),
                config,
            )))
        }
        _ => Ok(()),
    }
}

fn mismatch_message(whose: &str, recorded: &str, ours: &str, config: &Config) -> String {
    let differs = fingerprint_difference(recorded, ours).join(", ");
    format!(
        "the code scheme differs from the one {whose} ({differs})\n  \
         secret: {source}\n  \
         recorded: {recorded}\n  \
         configured: {ours}\n\
         Every link already sent depends on the recorded scheme. Restore the original secret file \
         (from the backup that goes with this database, see docs/BACKUP.md) and the original \
         --code-length / --code-check, then start again. To change the scheme on purpose, run \
         `shortlink-sidecar code-scheme adopt` (it refuses while generated links exist: they \
         would all stop working).",
        source = config.secret_source(),
    )
}

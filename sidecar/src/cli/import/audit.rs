//! What an import records in the audit log: one row per run with its counts, never one per link
//! (the command's runs and the console's).

use crate::cli::error::BoxError;
use shortlink_store::audit::{Changes, Origin};
use shortlink_store::Storage;

/// Appends an import run by `origin`: one row with its counts (`batch_size`: the first count,
/// the rows read), never one per link.
pub(crate) async fn record_import(
    storage: &dyn Storage,
    origin: &Origin,
    source: &str,
    counts: &[(&str, u64)],
    idempotency_key: Option<String>,
) -> Result<(), BoxError> {
    let mut changes = Changes::new();
    for (name, count) in counts {
        changes = changes.set(name, *count);
    }
    let mut entry = origin.entry("import.run", source, changes);
    entry.batch_size = counts
        .first()
        .and_then(|(_, rows)| i64::try_from(*rows).ok());
    entry.idempotency_key = idempotency_key;
    storage.append_audit(&entry).await?;
    Ok(())
}

/// Appends a finished run from another shortener (the command's or the console's), unless it was
/// a dry run (nothing changed).
pub(crate) async fn record_source_import(
    storage: &dyn Storage,
    origin: &Origin,
    report: &super::report::Report,
) -> Result<(), BoxError> {
    if report.dry_run {
        return Ok(());
    }
    let counts = [
        ("read", report.read),
        ("imported", report.imported),
        ("visits_imported", report.visits_imported),
        ("skipped", report.skipped.values().sum::<u64>()),
    ];
    record_import(storage, origin, &report.source, &counts, None).await
}

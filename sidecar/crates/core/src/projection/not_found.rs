//! The Redis projection of the not-found redirects (issue 70): SQL's `not_found_redirects` as the
//! hash `sl:nf` the module's workers copy (`shortlink_wire::not_found`). Every change rewrites the
//! whole hash from SQL in one transaction (`DEL` + `HSET`): a handful of fields per workspace, so
//! the rewrite is small, and a write that failed before (Redis down) or a lost hash is made right
//! by the next one or by a resync, never by a read-modify-write.

use super::Projection;
use crate::primary::ProjectionError;
use shortlink_model::WorkspaceId;
use shortlink_store::{NotFoundRedirects, Storage, StorageError};
use shortlink_wire::not_found::{self, Redirects};
use std::collections::HashMap;

/// Why the hash could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum NotFoundError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
}

/// The wire value of a row.
pub fn redirects(row: &NotFoundRedirects) -> Redirects {
    Redirects {
        root: row.root_url.clone(),
        unknown: row.unknown_url.clone(),
        expired: row.expired_url.clone(),
    }
}

/// The hash's fields and values for `rows`: a workspace's own row under its slug, a domain's
/// under its workspace's slug and the domain (a reader applies it only while nginx maps the
/// domain to that workspace). Rows of a workspace `slugs` does not name (deleted meanwhile) are left out.
pub fn fields(
    rows: &[NotFoundRedirects],
    slugs: &HashMap<WorkspaceId, String>,
) -> Vec<(String, String)> {
    rows.iter()
        .filter(|row| !row.is_empty())
        .filter_map(|row| {
            let slug = slugs.get(&row.workspace)?;
            let field = match row.domain.as_str() {
                "" => not_found::workspace_field(slug),
                domain => not_found::domain_field(slug, domain),
            };
            Some((field, redirects(row).encode()))
        })
        .collect()
}

/// Rewrites `sl:nf` from SQL.
pub async fn project(storage: &dyn Storage, projection: &Projection) -> Result<(), NotFoundError> {
    let rows = storage.not_found_redirects(None).await?;
    let slugs = (storage.workspaces().await?.into_iter())
        .map(|w| (w.id, w.slug))
        .collect();
    projection.replace_not_found(&fields(&rows, &slugs)).await?;
    Ok(())
}

/// After Redis lost its data (the keeper's restore, `resync`): the hash rewritten from SQL, or the
/// reason logged (the next restore or change tries again). A change committed meanwhile rewrites
/// it itself; the two race only over which of two fresh reads of SQL is written last.
pub async fn restore(storage: &dyn Storage, projection: &Projection) {
    match project(storage, projection).await {
        Ok(()) => tracing::info!("not-found redirects restored from SQL"),
        Err(error) => tracing::warn!(%error, "cannot restore the not-found redirects"),
    }
}

impl Projection {
    /// Replaces the hash with `fields` in one transaction (none: the key is deleted).
    pub async fn replace_not_found(
        &self,
        fields: &[(String, String)],
    ) -> Result<(), ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("DEL").arg(not_found::KEY).ignore();
        if !fields.is_empty() {
            let hset = pipe.cmd("HSET").arg(not_found::KEY);
            for (field, value) in fields {
                hset.arg(field).arg(value);
            }
            hset.ignore();
        }
        self.run::<()>(&pipe, self.timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_fields_by_slug_or_domain() {
        let row = |ws: i64, domain: &str, unknown: Option<&str>| NotFoundRedirects {
            workspace: WorkspaceId::from_db(ws),
            domain: domain.into(),
            root_url: None,
            unknown_url: unknown.map(str::to_owned),
            expired_url: None,
            updated_at: chrono::Utc::now(),
        };
        let slugs = HashMap::from([(WorkspaceId::from_db(2), "brand-a".to_owned())]);
        let got = fields(
            &[
                row(2, "", Some("https://a/")),
                row(2, "go.a.example", Some("https://go/")),
                row(2, "empty.example", None),
                row(3, "", Some("https://gone-workspace/")),
            ],
            &slugs,
        );
        assert_eq!(
            got,
            vec![
                ("w:brand-a".into(), "1\n\nhttps://a/\n".into()),
                ("d:brand-a/go.a.example".into(), "1\n\nhttps://go/\n".into()),
            ]
        );
    }
}

//! Where an imported link came from (table `imported_links`, issue 40): written by
//! `import --from`, read by a later run (to tell its own links from a collision) and by
//! `verify-import`.

/// One imported link's origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedLink {
    pub code: String,
    /// `yourls`, `shlink`, `kutt`, `bitly` or `csv`.
    pub source: String,
    /// The domain the code was sent on; empty when the source does not say.
    pub domain: String,
    /// The target as the source had it (ours is normalised): what `verify-import` expects.
    pub source_target: String,
    pub title: Option<String>,
    /// The source's visit total.
    pub source_visits: i64,
    pub imported_at_ms: i64,
}

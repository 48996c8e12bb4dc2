//! Another shortener's links into this one, kept on their codes (docs/MIGRATING.md): the sources
//! read page by page ([`source`]), the writer that issues them through the link service
//! ([`write`]), the report of what was not imported and why ([`report`]) and the audit entry
//! ([`audit`]). The console's import page runs them in a task; the `import` subcommand
//! (`shortlink-sidecar`'s `cli/import`) runs them on the command line, with its progress bar.

pub mod audit;
pub mod error;
pub mod report;
pub mod source;
pub mod write;

pub use source::{SourceArgs, SourceKind};

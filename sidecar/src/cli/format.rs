//! The file formats `import`, `export` and `compose` read and write; a leaf the subcommands share
//! (it imports nothing of theirs).

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileFormat {
    Csv,
    Ndjson,
}

impl FileFormat {
    /// From a file name's extension (`.csv`; `.ndjson`, `.jsonl`).
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(FileFormat::Csv),
            "ndjson" | "jsonl" => Some(FileFormat::Ndjson),
            _ => None,
        }
    }
}

/// A link's columns in shortlink's own CSV, in order: what `export` writes (NDJSON objects have
/// the same fields) and what `import --from shortlink` reads (which also takes `alias` for
/// `code`).
pub const LINK_COLUMNS: [&str; 19] = [
    "code",
    "url",
    "redirect",
    "forward_query",
    "state",
    "expires_at",
    "created_at",
    "revoked_at",
    "campaign",
    "ref",
    "tags",
    "valid_since",
    "not_yet_url",
    "expired_url",
    "rules",
    "max_visits",
    "password_digest",
    "preview",
    "click_id_param",
];

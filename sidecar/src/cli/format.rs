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

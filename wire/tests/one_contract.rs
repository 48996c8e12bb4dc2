//! The contract is spelled once: no Redis key name and no visit-event limit or format constant
//! is written in the module, the sidecar or the consumer's parser outside this crate. They
//! import them from `shortlink_wire`, so a second record or event version is written once.
//!
//! A plain text scan of the production sources (test code is skipped: tests may well write the
//! bytes they expect).

use std::fs;
use std::path::{Path, PathBuf};

/// The crates that talk to Redis or read what the other side wrote.
const CRATES: [&str; 3] = ["ngx-module/src", "sidecar/src", "visit-enrich/src"];

/// Key names: string literals beginning with the key space's prefix.
const KEY_LITERALS: [&str; 2] = ["\"sl:", "b\"sl:"];

/// Constants of the record and the event's format and limits (under their names here and the
/// names they had before they moved here).
const CONSTANTS: [&str; 16] = [
    "MAX_UA",
    "MAX_UA_LEN",
    "MAX_REFERER",
    "MAX_REFERRER_LEN",
    "MAX_HOST",
    "MAX_HOST_LEN",
    "MAX_LANG",
    "MAX_LANG_LEN",
    "MAX_IP",
    "MAX_CODE_LEN",
    "BATCH_FIELD",
    "BATCH_FORMAT",
    "VISIT_FIELDS",
    "BATCH_FIELDS",
    "TOMBSTONE",
    "FLAG_FORWARD_QUERY",
];

/// What `line` spells that only `wire` may, if anything.
fn spelled(line: &str) -> Option<String> {
    if let Some(key) = KEY_LITERALS.iter().find(|k| line.contains(*k)) {
        return Some(key.to_string());
    }
    CONSTANTS
        .iter()
        .map(|name| format!("const {name}:"))
        .find(|definition| line.contains(definition.as_str()))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `source` that are production code: comments dropped, and everything from a
/// `#[cfg(test)]` on (this codebase keeps its test modules at the end of a file).
fn production_lines(source: &str) -> impl Iterator<Item = (usize, &str)> {
    source
        .lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(n, line)| (n + 1, line))
}

#[test]
fn no_key_name_or_event_limit_is_spelled_outside_wire() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for dir in CRATES {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut found = Vec::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "tests.rs")
            || file.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let source = fs::read_to_string(&file).unwrap();
        for (n, line) in production_lines(&source) {
            if let Some(what) = spelled(line) {
                let shown = file.strip_prefix(root).unwrap().display();
                found.push(format!("{shown}:{n}: {what}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "spelled outside shortlink_wire (import it instead):\n{}",
        found.join("\n")
    );
}

//! Each rule is written once (issue 81): a limit or a pattern the sidecar checks is defined in
//! one place, and the validator, the OpenAPI document, the console and the CLI read it from
//! there. This test fails when a literal copy of one appears in production code elsewhere: each
//! rule names its home and the spellings a copy takes. Numeric bounds written into an OpenAPI
//! attribute (`#[schema(maximum = 10)]`) are copies by construction, of the handler's own check:
//! the files that still hold some are listed with their count, which may only go down.

use crate::sizes::{member_sources, production_files};
use shortlink_e2e::paths::workspace_dir;
use std::path::{Path, PathBuf};

/// A rule, where it is defined, and how a copy of it is spelled.
struct Rule {
    what: &'static str,
    /// Files (or folders, ending in `/`) that may spell it.
    homes: &'static [&'static str],
    copies: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        what: "no control characters (`shortlink_model::schema::PRINTABLE`, `NAME_PATTERN`)",
        homes: &["sidecar/crates/model/src/schema.rs"],
        copies: &[
            "\\\\x00-\\\\x1f",
            "\\\\u0000-\\\\u001f",
            "\\\\x00-\\\\x20",
            "\\\\u0000-\\\\u0020",
        ],
    },
    Rule {
        what: "the redirect statuses (`shortlink_wire::status::REDIRECT_STATUSES`)",
        homes: &["wire/src/status.rs"],
        copies: &[
            "301 | 302 | 307 | 308",
            "301, 302, 307, 308",
            "301|302|307|308",
        ],
    },
    Rule {
        what: "an alias's shape (`shortcode::ALIAS_PATTERN`)",
        homes: &["shortcode/src/"],
        copies: &["{3,64}"],
    },
    Rule {
        what: "a key's highest rate (`shortlink_core::service::keys::MAX_RATE`)",
        homes: &["sidecar/crates/core/src/service/keys.rs"],
        copies: &[
            "maximum = 1000000",
            "max=\"1000000\"",
            "..=1_000_000))",
            "MAX_KEY_RATE",
        ],
    },
    Rule {
        what: "a name's length (`shortlink_store::MAX_NAME_LEN`)",
        homes: &["sidecar/crates/store/src/workspace.rs"],
        copies: &[
            "max_length = 200",
            "maxlength=\"200\"",
            "printable(&request.name, 200)",
        ],
    },
];

/// The OpenAPI attributes' numeric bounds, each a copy of its handler's check.
const BOUNDS: &[&str] = &[
    "max_length = ",
    "min_length = ",
    "maximum = ",
    "minimum = ",
    "max_items = ",
    "min_items = ",
];

/// Files still holding numeric bounds in OpenAPI attributes, with how many: page sizes and
/// settings whose handlers check the same numbers. A file may hold fewer (then its count here
/// must come down with it), never more, and no other file any.
const BOUNDS_LEFT: &[(&str, usize)] = &[
    ("sidecar/crates/api/src/audit.rs", 2),
    ("sidecar/crates/api/src/compose/mod.rs", 6),
    ("sidecar/crates/api/src/links.rs", 2),
    ("sidecar/crates/api/src/orphans.rs", 2),
    ("sidecar/crates/api/src/qr.rs", 4),
    ("sidecar/crates/api/src/retention.rs", 1),
    ("sidecar/crates/api/src/stats.rs", 2),
    ("sidecar/crates/api/src/subjects.rs", 2),
    ("sidecar/crates/api/src/visits.rs", 2),
    ("sidecar/crates/webhooks/src/subscription.rs", 8),
];

/// Each production file with its text up to its unit tests (`#[cfg(test)] mod …`, which may
/// spell a rule to test it).
fn production_texts(base: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in member_sources() {
        production_files(base, &dir, &mut files);
    }
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(base.join(&file))
                .unwrap_or_else(|error| panic!("read {}: {error}", file.display()));
            let code = match unit_tests_at(&text) {
                Some(tests) => text[..tests].to_owned(),
                None => text,
            };
            (file.to_string_lossy().into_owned(), code)
        })
        .collect()
}

/// Where a file's unit tests start: a `#[cfg(test)]` line before a `mod` line.
fn unit_tests_at(text: &str) -> Option<usize> {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let next_is_mod =
            (lines.peek()).is_some_and(|next| next.split_whitespace().any(|w| w == "mod"));
        if line.trim() == "#[cfg(test)]" && next_is_mod {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// `rule`'s copies outside its homes, as `file: spelling`.
fn copies_of(rule: &Rule, texts: &[(String, String)]) -> Vec<String> {
    let at_home = |file: &str| {
        (rule.homes.iter())
            .any(|home| file == *home || (home.ends_with('/') && file.starts_with(home)))
    };
    let mut found = Vec::new();
    for (file, text) in texts.iter().filter(|(file, _)| !at_home(file)) {
        for copy in rule.copies.iter().filter(|copy| text.contains(**copy)) {
            found.push(format!("{file}: {copy}"));
        }
    }
    found
}

/// How many numeric bounds in OpenAPI attributes each file holds (those with any).
fn attribute_bounds(texts: &[(String, String)]) -> Vec<(String, usize)> {
    let mut counts = Vec::new();
    for (file, text) in texts {
        let count = (BOUNDS.iter())
            .map(|bound| {
                text.match_indices(bound)
                    .filter(|(at, _)| {
                        let rest = &text[at + bound.len()..];
                        rest.starts_with(|c: char| c.is_ascii_digit())
                    })
                    .count()
            })
            .sum();
        if count > 0 {
            counts.push((file.clone(), count));
        }
    }
    counts
}

#[test]
fn every_rule_is_spelled_in_its_home_only() {
    let texts = production_texts(&workspace_dir());
    assert!(texts.len() > 100, "the production files are found");
    let copies: Vec<String> = (RULES.iter())
        .flat_map(|rule| {
            copies_of(rule, &texts)
                .into_iter()
                .map(move |copy| format!("{copy} (a copy of {})", rule.what))
        })
        .collect();
    assert!(
        copies.is_empty(),
        "literal copies of a rule:\n{}",
        copies.join("\n")
    );
}

#[test]
fn numeric_bounds_in_openapi_attributes_only_go_down() {
    let found = attribute_bounds(&production_texts(&workspace_dir()));
    let mut wrong = Vec::new();
    for (file, count) in &found {
        match BOUNDS_LEFT.iter().find(|(listed, _)| listed == file) {
            Some((_, left)) if count == left => {}
            Some((_, left)) => wrong.push(format!("{file}: {count}, listed {left}")),
            None => wrong.push(format!("{file}: {count}, not listed")),
        }
    }
    for (listed, left) in BOUNDS_LEFT {
        if !found.iter().any(|(file, _)| file == listed) {
            wrong.push(format!("{listed}: none left, listed {left}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "numeric bounds in OpenAPI attributes (read them from the rule's constant through a \
         `schema_with` function):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_copy_is_found_wherever_it_is_spelled() {
    let texts = vec![
        (
            "sidecar/src/console/x.rs".to_owned(),
            "max=\"1000000\"".to_owned(),
        ),
        (
            "sidecar/crates/core/src/service/keys.rs".to_owned(),
            "maximum = 1000000".to_owned(),
        ),
        (
            "a.rs".to_owned(),
            "#[param(minimum = 1, maximum = 10)] max_length = n".to_owned(),
        ),
    ];
    let rate = RULES
        .iter()
        .find(|rule| rule.what.contains("rate"))
        .expect("the rate rule");
    assert_eq!(
        copies_of(rate, &texts),
        ["sidecar/src/console/x.rs: max=\"1000000\""]
    );
    assert_eq!(attribute_bounds(&texts[2..]), [("a.rs".to_owned(), 2)]);
}

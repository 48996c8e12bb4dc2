//! The drawn crate graph is the one Cargo builds (issue 69). Cargo refuses only cycles: an edge
//! nobody drew, such as `shortlink-domains -> shortlink-webhooks`, would build. So this test reads
//! the project's dependencies from `cargo metadata` and the graph from docs/ARCHITECTURE.md ("The
//! crates", the block after `<!-- crate-graph -->`), and fails on an edge either one has and the
//! other has not. Dev-dependencies (tests' helpers) are not layers and are left out.

use shortlink_e2e::paths::workspace_dir;
use std::collections::{BTreeMap, BTreeSet};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Each workspace member's normal and build dependencies on other members.
fn cargo_graph() -> Graph {
    let metadata = shortlink_e2e::paths::workspace_metadata();
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|package| package["name"].as_str().expect("a name"))
        .collect();
    packages
        .iter()
        .map(|package| {
            let uses = (package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter())
            .filter(|dependency| dependency["kind"].as_str() != Some("dev"))
            .map(|dependency| dependency["name"].as_str().expect("a name"))
            .filter(|name| members.contains(name))
            .map(str::to_owned)
            .collect();
            (package["name"].as_str().expect("a name").to_owned(), uses)
        })
        .collect()
}

/// The full graph: the block after `<!-- crate-graph -->`.
fn drawn_graph(architecture: &str) -> Graph {
    block_after(architecture, "<!-- crate-graph -->")
}

/// The block after `marker`: one line per crate, `crate -> used crates` (none after the arrow
/// for a crate that uses no other).
fn block_after(architecture: &str, marker: &str) -> Graph {
    let (_, after) = architecture
        .split_once(marker)
        .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md has a {marker} block"));
    let block = after
        .trim_start()
        .strip_prefix("```text\n")
        .expect("a text fence right after the marker");
    let (block, _) = block.split_once("```").expect("the fence closes");
    block
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (name, uses) = line
                .split_once("->")
                .unwrap_or_else(|| panic!("`crate -> uses` expected, not {line:?}"));
            let uses = uses.split_whitespace().map(str::to_owned).collect();
            (name.trim().to_owned(), uses)
        })
        .collect()
}

/// The edges of `a` that `b` lacks, as `from -> to`, and the crates `a` has that `b` lacks.
fn missing_from(a: &Graph, b: &Graph) -> Vec<String> {
    let mut missing = Vec::new();
    for (from, uses) in a {
        let Some(theirs) = b.get(from) else {
            missing.push(format!("{from} (the crate)"));
            continue;
        };
        missing.extend(uses.difference(theirs).map(|to| format!("{from} -> {to}")));
    }
    missing
}

#[test]
fn cargo_builds_the_crate_graph_the_architecture_draws() {
    let architecture = std::fs::read_to_string(workspace_dir().join("docs/ARCHITECTURE.md"))
        .expect("read docs/ARCHITECTURE.md");
    let (drawn, built) = (drawn_graph(&architecture), cargo_graph());
    assert!(built.len() >= 15, "{built:?}");
    let undrawn = missing_from(&built, &drawn);
    assert!(
        undrawn.is_empty(),
        "dependencies that docs/ARCHITECTURE.md does not draw (draw them with why, or remove \
         them):\n{}",
        undrawn.join("\n")
    );
    let unbuilt = missing_from(&drawn, &built);
    assert!(
        unbuilt.is_empty(),
        "drawn in docs/ARCHITECTURE.md but not a dependency in Cargo.toml:\n{}",
        unbuilt.join("\n")
    );
}

/// Every crate each crate of `graph` reaches, itself left out.
fn reach(graph: &Graph) -> Graph {
    let mut reached = Graph::new();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut next: Vec<&String> = graph[start].iter().collect();
        while let Some(name) = next.pop() {
            if seen.insert(name.clone()) {
                next.extend(graph.get(name).into_iter().flatten());
            }
        }
        reached.insert(start.clone(), seen);
    }
    reached
}

/// The crates only tests and fuzzing build: not layers of the product.
const TEST_ONLY: [&str; 3] = ["shortlink-e2e", "testkit", "shortlink-fuzz-bodies"];

/// The one-page map ("The map", `<!-- crate-map -->`) is Cargo's graph seen from above: every
/// production crate is on it, each arrow is a dependency Cargo has, and what each crate reaches
/// through the arrows is what it reaches in Cargo (issue 81: the map drew `store -> model`,
/// which Cargo never had, and left crates out).
#[test]
fn the_one_page_map_is_the_crate_graph_seen_from_above() {
    let architecture = std::fs::read_to_string(workspace_dir().join("docs/ARCHITECTURE.md"))
        .expect("read docs/ARCHITECTURE.md");
    let map = block_after(&architecture, "<!-- crate-map -->");
    let mut built = cargo_graph();
    built.retain(|name, _| !TEST_ONLY.contains(&name.as_str()));
    let (on_map, production): (BTreeSet<_>, BTreeSet<_>) =
        (map.keys().collect(), built.keys().collect());
    assert_eq!(
        on_map, production,
        "the map's crates are the production crates"
    );
    let false_arrows = missing_from(&map, &built);
    assert!(
        false_arrows.is_empty(),
        "arrows Cargo does not have:\n{}",
        false_arrows.join("\n")
    );
    let (drawn_reach, built_reach) = (reach(&map), reach(&built));
    for (name, reached) in &built_reach {
        assert_eq!(
            &drawn_reach[name], reached,
            "{name}: what the map's arrows reach differs from Cargo's"
        );
    }
}

/// The measure: an edge only Cargo has and one only the drawing has are both found.
#[test]
fn the_comparison_finds_an_edge_on_either_side() {
    let drawn = drawn_graph(
        "<!-- crate-graph -->\n```text\nshortlink-api -> shortlink-core\nshortlink-core ->\n```\n",
    );
    let built: Graph = [
        (
            "shortlink-api",
            vec!["shortlink-core", "shortlink-webhooks"],
        ),
        ("shortlink-core", vec![]),
    ]
    .into_iter()
    .map(|(name, uses)| (name.into(), uses.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        missing_from(&built, &drawn),
        ["shortlink-api -> shortlink-webhooks"]
    );
    assert!(missing_from(&drawn, &built).is_empty());
    let mut less = built.clone();
    less.get_mut("shortlink-api")
        .unwrap()
        .remove("shortlink-core");
    assert_eq!(
        missing_from(&drawn, &less),
        ["shortlink-api -> shortlink-core"]
    );
}

/// The `pub use` statements of `source` (comments dropped, one line each).
fn re_exports(source: &str) -> Vec<String> {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
        .split(';')
        .filter_map(|statement| statement.split("pub use ").nth(1))
        .map(|path| path.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Issue 81: each crate goes by its own name. The binary once re-exported the crates split out of
/// it under their old module names (`shortlink_sidecar::storage` was `shortlink_store`), so its
/// tests and the crates below named one thing two ways. So: no member re-exports another member
/// whole or one of its items under another name (`LINK_PREFIX as KEY_PREFIX`), and the binary, the
/// top of the graph, re-exports nothing of the crates below it.
#[test]
fn no_crate_is_re_exported_under_another_name() {
    let root = workspace_dir();
    let members: BTreeSet<String> = cargo_graph()
        .keys()
        .map(|name| name.replace('-', "_"))
        .collect();
    let mut found = Vec::new();
    for src in crate::sizes::member_sources() {
        let mut files = Vec::new();
        crate::sizes::production_files(&root, &src, &mut files);
        let is_binary = src == std::path::Path::new("sidecar/src");
        for file in files {
            let source = std::fs::read_to_string(root.join(&file)).expect("a source file");
            for path in re_exports(&source) {
                let head = path.split([':', ' ']).next().unwrap_or_default();
                let whole = !path.contains("::");
                let renamed = path.contains(" as ");
                if members.contains(head) && (whole || renamed || is_binary) {
                    found.push(format!("{}: pub use {path}", file.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "re-exported crates: {found:#?}");
}

#[test]
fn a_crate_re_exported_under_an_old_name_is_seen() {
    let source = "pub use shortlink_store as storage; // the old name\npub use shortlink_core::{\n    limits, metrics,\n};";
    assert_eq!(
        re_exports(source),
        [
            "shortlink_store as storage",
            "shortlink_core::{ limits, metrics, }"
        ]
    );
}

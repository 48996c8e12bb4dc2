//! The layers point one way: in every crate of the workspace (the sidecar's, the module, `wire`,
//! the code scheme, the test kits), no two files of different folders import each other, directly or around a circle, and no circle
//! runs through a folder's base file (its `mod.rs` or `lib.rs`, `x.rs` beside `x/`, or a shared
//! root such as `console/session.rs`) except the few listed in [`ALLOWED`] with their reason.
//! `scripts/import-circles` reads the sources and lists every circle; these tests judge its report
//! and print the circles with their edges.

use shortlink_e2e::paths::workspace_dir;
use std::path::Path;
use std::process::{Command, Output};

/// The circles through a base file that remain, each as the script prints it (`<src dir>: <files>`)
/// with why it is left. A circle that grows, a new one, or one listed here that is gone fails the
/// test, so the list stays what is true.
const ALLOWED: &[(&str, &str)] = &[
    (
        "sidecar/crates/core/src: projection/card.rs projection/connection.rs projection/mod.rs projection/primaries.rs projection/slots.rs projection/state.rs",
        "the parts are impl blocks of mod.rs's Projection (and RecordWrite), and Projection holds \
         their state (connection::Slot, primaries::Primaries), so moving the struct to a file of \
         its own would not break the circle; splitting that state per part would, a change of \
         its own",
    ),
    (
        "sms/src: gsm.rs gsm/indic.rs",
        "indic.rs is gsm.rs's national tables, split out for length; they mark an unassigned \
         position with gsm.rs's NONE, the value gsm.rs's decoder tests for",
    ),
];

/// Every crate's src/ folder: each member of the workspace (`Cargo.toml`'s `members`) that has
/// one, so that a new crate is measured the day it is added.
fn source_dirs() -> Vec<String> {
    let manifest =
        std::fs::read_to_string(workspace_dir().join("Cargo.toml")).expect("read Cargo.toml");
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .expect("Cargo.toml lists its members on one line");
    let mut dirs: Vec<String> = members
        .trim_end_matches(']')
        .split(',')
        .map(|member| member.trim().trim_matches('"'))
        .filter(|member| !member.is_empty())
        .map(|member| format!("{member}/src"))
        .filter(|dir| workspace_dir().join(dir).is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn import_circles(dir: &Path, args: &[String]) -> Output {
    Command::new("python3")
        .current_dir(dir)
        .arg(workspace_dir().join("scripts/import-circles"))
        .args(args)
        .output()
        .expect("run python3 scripts/import-circles")
}

/// The base-file circles of `report` that `allowed` does not list, and the listed ones it does
/// not have.
fn judge(report: &str, allowed: &[&str]) -> (Vec<String>, Vec<String>) {
    let found: Vec<String> = report
        .lines()
        .filter_map(|line| {
            let (root, rest) = line.split_once(": base ")?;
            let files = rest.split_once(": ")?.1;
            let files = files.split(" (via ").next().unwrap_or(files);
            Some(format!("{root}: {files}"))
        })
        .collect();
    let unlisted = found
        .iter()
        .filter(|circle| !allowed.contains(&circle.as_str()))
        .cloned()
        .collect();
    let gone = allowed
        .iter()
        .filter(|entry| !found.iter().any(|circle| circle == *entry))
        .map(|entry| entry.to_string())
        .collect();
    (unlisted, gone)
}

#[test]
fn no_import_circle_crosses_a_folder_or_runs_through_a_base_file() {
    let dirs = source_dirs();
    let args: Vec<String> = std::iter::once("--edges".to_string())
        .chain(dirs.iter().cloned())
        .collect();
    let output = import_circles(&workspace_dir(), &args);
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "import circles across folders (CROSS):\n{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The script read every crate.
    for dir in &dirs {
        assert!(
            report.contains(&format!("{dir}: read ")),
            "{dir} not read:\n{report}"
        );
    }
    assert!(dirs.len() >= 10, "{dirs:?}");
    let allowed: Vec<&str> = ALLOWED.iter().map(|(circle, _)| *circle).collect();
    let (unlisted, gone) = judge(&report, &allowed);
    assert!(
        unlisted.is_empty(),
        "import circles through a folder's base file (a leaf the base imports back; move the \
         shared part into its own file, or list the circle in ALLOWED with why):\n{}\n\n{report}",
        unlisted.join("\n")
    );
    assert!(
        gone.is_empty(),
        "listed in ALLOWED but no longer a circle: take them out of the list\n{}",
        gone.join("\n")
    );
}

/// The measure itself: a circle between two folders fails it; one inside a folder passes when it
/// is between leaves, and when it runs through the folder's base file only if it is listed.
#[test]
fn the_measure_tells_a_crossing_circle_from_one_inside_a_folder() {
    let dir = testkit::temp_dir();
    let write = |path: &str, text: &str| {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    let run = || {
        let output = import_circles(dir.path(), &["src".to_string()]);
        let report = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.code(), report)
    };
    // Two leaves of a/ import each other; the base a/mod.rs imports both but is imported by none.
    write(
        "src/lib.rs",
        "mod a;\nmod b;\npub fn wire() { a::run(); }\n",
    );
    write(
        "src/a/mod.rs",
        "mod inner;\nmod other;\npub struct A;\npub fn run() { inner::I; other::O; }\n",
    );
    write("src/a/inner.rs", "pub struct I;\nuse super::other::O;\n");
    write("src/a/other.rs", "pub struct O;\nuse super::inner::I;\n");
    write("src/b.rs", "pub struct B;\npub fn f() { crate::a::A; }\n");
    let (code, report) = run();
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("src: read 5 files"), "{report}");
    assert!(
        report.contains("same  2: a/inner.rs a/other.rs"),
        "{report}"
    );
    assert_eq!(judge(&report, &[]), (vec![], vec![]), "{report}");

    // A leaf takes a type from its base, which uses the leaf: a circle through a/mod.rs. It fails
    // unless listed, and a listed one that is gone fails too.
    write(
        "src/a/inner.rs",
        "pub struct I;\nuse super::other::O;\nuse super::A;\n",
    );
    let (code, report) = run();
    assert_eq!(code, Some(0), "{report}");
    let circle = "src: a/inner.rs a/mod.rs a/other.rs";
    assert!(
        report.contains("base  3: a/inner.rs a/mod.rs a/other.rs (via a/mod.rs)"),
        "{report}"
    );
    assert_eq!(judge(&report, &[]), (vec![circle.to_string()], vec![]));
    assert_eq!(judge(&report, &[circle]), (vec![], vec![]));
    assert_eq!(
        judge(&report, &[circle, "src: a/x.rs a/mod.rs"]),
        (vec![], vec!["src: a/x.rs a/mod.rs".to_string()])
    );

    // A shared root: c/root.rs, which every other file of c/ imports, imports a leaf back.
    write(
        "src/lib.rs",
        "mod a;\nmod b;\nmod c;\npub fn wire() { a::run(); }\n",
    );
    write("src/c/mod.rs", "mod root;\nmod x;\nmod y;\nmod z;\n");
    write("src/c/root.rs", "pub struct Root;\nuse super::x::X;\n");
    for leaf in ["x", "y", "z"] {
        let text = format!(
            "pub struct {};\nuse super::root::Root;\n",
            leaf.to_uppercase()
        );
        write(&format!("src/c/{leaf}.rs"), &text);
    }
    let (code, report) = run();
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report.contains("base  2: c/root.rs c/x.rs (via c/root.rs)"),
        "{report}"
    );
    std::fs::remove_dir_all(dir.path().join("src/c")).unwrap();

    // The crate root is read like any file: one that defines what a part uses is a base file.
    write("src/a/inner.rs", "pub struct I;\nuse super::other::O;\n");
    write(
        "src/lib.rs",
        "mod a;\nmod b;\npub struct Root;\npub fn wire() { a::run(); b::f(); }\n",
    );
    write("src/b.rs", "pub struct B;\npub fn f() { crate::Root; }\n");
    let (code, report) = run();
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report.contains("base  2: b.rs lib.rs (via lib.rs)"),
        "{report}"
    );
    assert_eq!(judge(&report, &[]).0, vec!["src: b.rs lib.rs".to_string()]);

    // a/inner.rs now reaches b.rs, which reaches back into a/: a circle across folders.
    write("src/b.rs", "pub struct B;\npub fn f() { crate::a::A; }\n");
    write(
        "src/a/inner.rs",
        "pub struct I;\nuse super::A;\nuse crate::b::B;\n",
    );
    let (code, report) = run();
    assert_eq!(code, Some(1), "{report}");
    assert!(
        report.contains("CROSS 4: a/inner.rs a/mod.rs a/other.rs b.rs"),
        "{report}"
    );

    // A call through `super::` with a turbofish is an edge (the conversions store called its
    // rollup so, unseen); a `pub(super)` test module is left out like any other.
    let dir = testkit::temp_dir();
    let write = |path: &str, text: &str| {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("src/lib.rs", "mod d;\n");
    write("src/d/mod.rs", "mod store;\nmod rollup;\n");
    write(
        "src/d/store.rs",
        "pub struct Row;\npub fn sql() { super::rollup::hex::<u8>(); }\n",
    );
    write(
        "src/d/rollup.rs",
        "pub fn hex<T>() {}\nfn add() { super::store::Row; }\n\
         #[cfg(test)]\npub(super) mod tests { fn t() { super::super::store::Row; } }\n",
    );
    let output = import_circles(dir.path(), &["src".to_string()]);
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        report.contains("same  2: d/rollup.rs d/store.rs"),
        "{report}"
    );
    write("src/d/store.rs", "pub struct Row;\n#[cfg(test)]\npub(super) mod tests { fn t() { super::super::rollup::hex::<u8>(); } }\n");
    let output = import_circles(dir.path(), &["src".to_string()]);
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(!report.contains("same "), "{report}");
}

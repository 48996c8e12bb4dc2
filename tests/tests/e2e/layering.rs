//! The layers point one way (issue 33): no two files of different folders import each other,
//! directly or around a circle, in the sidecar or the module. `scripts/import-circles` reads the
//! sources and lists every circle; this fails on any that crosses a folder and prints them with
//! their edges.

use std::path::Path;
use std::process::Command;

#[test]
fn no_import_circle_crosses_a_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("python3")
        .current_dir(&root)
        .args([
            "scripts/import-circles",
            "--edges",
            "sidecar/src",
            "ngx-module/src",
        ])
        .output()
        .expect("run python3 scripts/import-circles");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "import circles across folders (CROSS):\n{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The script read the crates: a circle within a folder is allowed and always present.
    assert!(report.contains("sidecar/src: same"), "{report}");
    assert!(report.contains("ngx-module/src: same"), "{report}");
}

/// The measure itself: a circle between two folders fails it, one inside a folder does not.
#[test]
fn the_measure_tells_a_crossing_circle_from_one_inside_a_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = testkit::temp_dir();
    let write = |path: &str, text: &str| {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("src/lib.rs", "mod a;\nmod b;\n");
    write(
        "src/a/mod.rs",
        "mod inner;\npub struct A;\nuse self::inner::I;\n",
    );
    write("src/a/inner.rs", "pub struct I;\nuse super::A;\n");
    write("src/b.rs", "pub struct B;\npub fn f() { crate::a::A; }\n");
    let run = || {
        Command::new("python3")
            .arg(root.join("scripts/import-circles"))
            .arg(dir.path().join("src"))
            .output()
            .expect("run python3 scripts/import-circles")
    };
    let inside = run();
    let report = String::from_utf8_lossy(&inside.stdout).into_owned();
    assert!(inside.status.success(), "{report}");
    assert!(report.contains("same  2: a/inner.rs a/mod.rs"), "{report}");

    // a/inner.rs now reaches b.rs, which reaches back into a/: a circle across folders.
    write(
        "src/a/inner.rs",
        "pub struct I;\nuse super::A;\nuse crate::b::B;\n",
    );
    let crossing = run();
    let report = String::from_utf8_lossy(&crossing.stdout).into_owned();
    assert_eq!(crossing.status.code(), Some(1), "{report}");
    assert!(
        report.contains("CROSS 3: a/inner.rs a/mod.rs b.rs"),
        "{report}"
    );
}

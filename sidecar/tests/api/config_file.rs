//! The `--config` TOML file: applied to real commands, below environment and flags, and every
//! problem reported at once with file, line and key.

use std::path::Path;
use std::process::{Command, Output};

const SECRET: &str = "00112233445566778899aabbccddeeff";

/// The sidecar binary with no `SHORTLINK_*` variable but those given.
fn sidecar(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"));
    command.env_clear().env("PATH", "/usr/bin:/bin").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run shortlink-sidecar")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_config_file_configures_a_real_command() {
    let dir = testkit::temp_dir();
    let database = dir.path().join("from-file.db");
    let file = write(
        dir.path(),
        "sidecar.toml",
        &format!(
            "database_url = \"sqlite://{}\"\ncode_secret = \"{SECRET}\"\nallow_hosts = [\"example.com\", \"example.org\"]\n",
            database.display()
        ),
    );
    let output = sidecar(&["--config", &file, "keys", "list"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        database.exists(),
        "keys list did not use the file's database_url"
    );
}

#[test]
fn flags_win_over_the_environment_which_wins_over_the_file() {
    let dir = testkit::temp_dir();
    let file = write(
        dir.path(),
        "sidecar.toml",
        &format!("code_secret = \"{SECRET}\"\ncode_length = 11\n"),
    );
    // The file alone: its code_length is out of range.
    let output = sidecar(&["--config", &file, "check-config"], &[]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("code length 11"),
        "{}",
        stderr(&output)
    );
    // The environment wins over the file.
    let env = [("SHORTLINK_CODE_LENGTH", "6")];
    let output = sidecar(&["--config", &file, "check-config"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    // A flag wins over the environment.
    let env = [
        ("SHORTLINK_CODE_LENGTH", "12"),
        ("SHORTLINK_CONFIG", file.as_str()),
    ];
    let output = sidecar(&["check-config", "--code-length", "7"], &env);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = sidecar(&["check-config"], &env);
    assert!(
        stderr(&output).contains("code length 12"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn check_config_reports_every_problem_with_file_line_and_key() {
    let dir = testkit::temp_dir();
    let file = write(
        dir.path(),
        "sidecar.toml",
        "listen = 8700\nlisen = \"127.0.0.1:1\"\ndb_max_connections = \"many\"\nanonymize_ip = \"yes\"\nshort_domains = \"a.example\"\nredis_timeout = 1.5\n[extra]\nx = 1\n",
    );
    let output = sidecar(&["--config", &file, "check-config"], &[]);
    assert!(!output.status.success());
    let text = stderr(&output);
    for expected in [
        format!("{file}:1: key `listen`: invalid value '8700'"),
        format!("{file}:2: key `lisen`: unknown key; did you mean `listen`?"),
        format!("{file}:3: key `db_max_connections`: invalid value 'many'"),
        format!("{file}:4: key `anonymize_ip`: expected true or false"),
        format!("{file}:6: key `redis_timeout`: expected a whole number or a string"),
        format!("{file}:7: key `extra`: unknown key"),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    assert!(text.contains("6 problems"), "{text}");
    // A file with problems stops every command, not only check-config.
    let output = sidecar(&["--config", &file, "migrate"], &[]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("key `lisen`"));

    // Not TOML at all, and a missing file.
    let broken = write(dir.path(), "broken.toml", "code_length = 6\nx = [\n");
    let output = sidecar(&["--config", &broken, "check-config"], &[]);
    assert!(
        stderr(&output).contains(&format!("{broken}:2: not valid TOML")),
        "{}",
        stderr(&output)
    );
    let output = sidecar(
        &["--config", "/nonexistent/sidecar.toml", "check-config"],
        &[],
    );
    assert!(stderr(&output).contains("/nonexistent/sidecar.toml: cannot read it"));
}

#[test]
fn check_config_reports_every_problem_of_the_merged_settings() {
    let dir = testkit::temp_dir();
    let file = write(
        dir.path(),
        "sidecar.toml",
        "code_secret_file = \"/nonexistent/secret\"\nsequence_block = 0\nbootstrap_api_key = \"short\"\n",
    );
    let output = sidecar(&["--config", &file, "check-config"], &[]);
    assert!(!output.status.success());
    let text = stderr(&output);
    for expected in [
        "/nonexistent/secret",
        "--sequence-block",
        "--bootstrap-api-key",
        "3 problem",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let good = write(
        dir.path(),
        "good.toml",
        &format!("code_secret = \"{SECRET}\"\n"),
    );
    let output = sidecar(&["--config", &good, "check-config"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{good}: ok\n")
    );
}

#[test]
fn check_config_reads_the_hosting_networks_file() {
    let dir = testkit::temp_dir();
    let bad = write(
        dir.path(),
        "hosting.txt",
        "AS16509 # AWS\n203.0.113.0/24\nAS-cloud\n",
    );
    let check = |file: &str| {
        let args = ["check-config", "--code-secret", SECRET];
        sidecar(&[&args[..], &["--hosting-networks", file]].concat(), &[])
    };
    let output = check(&bad);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(
        text.contains("--hosting-networks") && text.contains(&bad) && text.contains("line 3"),
        "{text}"
    );
    let missing = dir.path().join("missing.txt");
    let output = check(missing.to_str().unwrap());
    assert!(
        stderr(&output).contains("missing.txt"),
        "{}",
        stderr(&output)
    );
    let good = write(dir.path(), "good.txt", "AS16509\n203.0.113.0/24\n");
    let output = check(&good);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn check_config_reports_domain_health_settings() {
    let dir = testkit::temp_dir();
    let missing = dir.path().join("missing.pem");
    let output = sidecar(
        &[
            "check-config",
            "--code-secret",
            SECRET,
            "--domain-webhook-url",
            "ftp://hooks.example/x",
        ],
        &[],
    );
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("not an http:// or https:// URL"), "{text}");
    let output = sidecar(
        &[
            "check-config",
            "--code-secret",
            SECRET,
            "--certificate-edge",
            "127.0.0.1:8443",
            "--certificate-ca",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("--certificate-ca"), "{text}");
    // The click curve's half-life, from the file: a duration, more than zero.
    let good = write(
        dir.path(),
        "curve.toml",
        &format!("code_secret = \"{SECRET}\"\ndomain_health_click_half_life = \"20m\"\n"),
    );
    let output = sidecar(&["--config", &good, "check-config"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let zero = write(
        dir.path(),
        "zero.toml",
        &format!("code_secret = \"{SECRET}\"\ndomain_health_click_half_life = \"0s\"\n"),
    );
    let output = sidecar(&["--config", &zero, "check-config"], &[]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(
        text.contains("--domain-health-click-half-life must be more than 0"),
        "{text}"
    );
}

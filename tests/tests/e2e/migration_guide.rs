//! docs/MIGRATING.md followed as written, from YOURLS: a `scripts/run` system, YOURLS 1.9's own
//! tables in a real MariaDB (its generated keywords `1`…`1o`, 7-character keywords, custom ones
//! with `-`, `_`, `.` and `~`), and the guide's own shell blocks run with its placeholders
//! (paths, ports, the YOURLS database) substituted: step 1 puts the domain's server in
//! `var/nginx/servers.d/` and reloads, step 2 imports and verifies. Every imported link must then
//! answer as YOURLS did (301 to its target), as `verify-import` says and as asked directly. Along
//! the way: `import --dry-run` counts the visits it would import, a keyword over 64 characters is
//! refused by the import and not asked by `verify-import` (for that reason, not as a difference),
//! and `verify-import`'s own requests add no visit to any link.

use shortlink_e2e::{http_client, paths, status_and_location};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const DOMAIN: &str = "y.old.example";
const TOO_LONG: &str = "k123456789k123456789k123456789k123456789k123456789k123456789k1234";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// The keywords of the YOURLS instance: its generated ones (base 36, one and two characters)
/// and custom ones of the shapes that broke on a pool domain.
fn keywords() -> Vec<String> {
    let base36 = |mut n: u32| {
        let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut out = Vec::new();
        while n > 0 {
            out.push(digits[(n % 36) as usize]);
            n /= 36;
        }
        out.reverse();
        String::from_utf8(out).unwrap()
    };
    let mut keywords: Vec<String> = (1..=60).map(base36).collect();
    // YOURLS takes keywords up to 100 characters; ours stop at 64.
    keywords.push(TOO_LONG.to_owned());
    for custom in [
        "Promo12",
        "abcdefg",
        "Summer7",
        "spring-sale",
        "x_y",
        "my.link",
        "a~b",
        "Promo",
        "promo",
    ] {
        keywords.push(custom.to_owned());
    }
    keywords
}

fn target(keyword: &str) -> String {
    format!(
        "https://yourls-target.example/{}",
        keyword.replace('~', "-tilde-")
    )
}

/// A fenced `sh` block of docs/MIGRATING.md: the first one after the line containing `after`,
/// its list indentation removed.
fn guide_block(guide: &str, after: &str) -> String {
    let start = guide
        .find(after)
        .unwrap_or_else(|| panic!("MIGRATING.md has no {after:?}"));
    let rest = &guide[start..];
    let open = rest.find("```sh\n").expect("a sh block after it") + "```sh\n".len();
    let close = rest[open..].find("```").expect("the block ends") + open;
    rest[open..close]
        .lines()
        .map(|line| line.trim_start())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `scripts/run` (not `--check`: the system keeps running), in a process group of its own.
struct Run {
    child: Child,
}

impl Run {
    /// Started on state directory `var` and `ports` (HTTP, API, sidecar, Redis, HTTPS), its status
    /// and metrics servers on ports of their own (never `scripts/run`'s defaults: another stack may
    /// hold them), once it
    /// says it is up.
    fn start(var: &Path, ports: [u16; 5]) -> Run {
        let log = var.join("run.out");
        let out = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(paths::workspace_dir().join("scripts/run"));
        command
            .env("SHORTLINK_VAR", var)
            .env("SHORTLINK_BIN_DIR", paths::profile_dir())
            .env("SHORTLINK_GEOIP_DB", paths::test_geo_db())
            .env("SHORTLINK_WORKERS", "1");
        let [status, metrics] = testkit::free_ports::<2>();
        let variables = [
            "HTTP", "API", "SIDECAR", "REDIS", "HTTPS", "STATUS", "METRICS",
        ];
        let ports = ports.into_iter().chain([status, metrics]);
        for (variable, port) in variables.iter().zip(ports) {
            command.env(format!("SHORTLINK_{variable}_PORT"), port.to_string());
        }
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start scripts/run");
        let mut run = Run { child };
        let up = testkit::wait_until(Duration::from_secs(120), || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("Ctrl-C stops everything")
                || matches!(run.child.try_wait(), Ok(Some(_)))
        });
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            up && output.contains("Ctrl-C stops everything"),
            "scripts/run did not come up:\n{output}"
        );
        run
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // scripts/run stops its servers on TERM; the group is killed if it has not within 30 s.
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let stopped = testkit::wait_until(Duration::from_secs(30), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if !stopped {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = self.child.wait();
        }
    }
}

fn run_bash(script: &str, env: &[(&str, String)]) -> std::process::Output {
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(paths::workspace_dir());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run bash")
}

#[test]
fn the_yourls_path_of_the_migration_guide_keeps_every_old_answer() {
    // YOURLS's database.
    let mariadb = testkit::mariadb();
    let yourls = mariadb.fresh_database_url();
    let database = yourls.rsplit('/').next().unwrap().to_owned();
    for sql in testkit::yourls::SCHEMA {
        mariadb.query_in(&database, sql).unwrap();
    }
    let keywords = keywords();
    let rows: Vec<String> = keywords
        .iter()
        .enumerate()
        .map(|(i, keyword)| {
            format!(
                "('{keyword}', '{}', 'Title {i}', '2020-01-01 10:00:00', '203.0.113.9', {})",
                target(keyword),
                i % 3
            )
        })
        .collect();
    mariadb
        .query_in(
            &database,
            &format!(
                "INSERT INTO yourls_url (keyword, url, title, timestamp, ip, clicks) VALUES {}",
                rows.join(",")
            ),
        )
        .unwrap();
    mariadb
        .query_in(
            &database,
            "INSERT INTO yourls_log (click_time, shorturl, referrer, user_agent, ip_address, country_code) VALUES
                ('2020-02-01 08:00:00', '1', 'direct', 'Mozilla/5.0 (X11; Linux x86_64; rv:66.0) Gecko/20100101 Firefox/66.0', '198.51.100.7', 'DE'),
                ('2020-02-02 08:00:00', 'Promo12', 'https://t.co/x', 'Mozilla/5.0 (X11; Linux x86_64; rv:66.0) Gecko/20100101 Firefox/66.0', '198.51.100.8', 'DE')",
        )
        .unwrap();

    // The system, as `scripts/run` starts it.
    let var = testkit::temp_dir();
    let var_path = var.path().to_str().unwrap().to_owned();
    let [http_port, api_port, sidecar_port, redis_port, https_port] = testkit::free_ports::<5>();
    let ports = [http_port, api_port, sidecar_port, redis_port, https_port];
    let geo = paths::test_geo_db();
    let run = Run::start(var.path(), ports);
    // The guide's blocks, with its placeholders made this system's.
    let guide = std::fs::read_to_string(paths::workspace_dir().join("docs/MIGRATING.md")).unwrap();
    let localize = |block: String| {
        block
            .replace("$PWD/var", &var_path)
            .replace(" var/", &format!(" {var_path}/"))
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{http_port}"))
            .replace("127.0.0.1:6390", &format!("127.0.0.1:{redis_port}"))
            .replace("mysql://yourls:pw@db/yourls", &yourls)
            .replace(
                "target/quick/",
                &format!("{}/", paths::profile_dir().display()),
            )
    };
    let env = [
        ("SHORTLINK_VAR", var_path.clone()),
        (
            "SHORTLINK_BIN_DIR",
            paths::profile_dir().display().to_string(),
        ),
        ("SHORTLINK_GEOIP_DB", geo.display().to_string()),
    ];

    // Step 1: the domain's server, out of the pool.
    let step1 = localize(guide_block(
        &guide,
        "1. **Give each old domain a server of its own**",
    ));
    assert!(step1.contains("servers.d/"), "{step1}");
    let output = run_bash(&step1, &env);
    assert!(
        output.status.success(),
        "step 1:\n{step1}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(Path::new(&format!("{var_path}/nginx/servers.d/{DOMAIN}.conf")).exists());

    // Step 2: import, then verify (exit status 0: nothing differs). First what the import would
    // do: the guide's import command with --dry-run.
    let step2 = localize(guide_block(&guide, "2. **Import**"));
    let dry_run = step2.replacen(
        "--source-domain y.old.example\n",
        "--source-domain y.old.example --dry-run\n",
        1,
    );
    let dry_run = &dry_run[..dry_run.find("verify-import").unwrap()];
    let dry_run = &dry_run[..dry_run.rfind('\n').unwrap()];
    let output = run_bash(dry_run, &env);
    let text = String::from_utf8_lossy(&output.stdout);
    let n = keywords.len();
    let kept = n - 1;
    assert!(
        output.status.success() && text.contains(&format!("{kept} would be imported")),
        "{dry_run}\n{text}"
    );
    assert!(text.contains("2 visits would be imported"), "{text}");

    let output = run_bash(&step2, &env);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "step 2:\n{step2}\n{text}");
    assert!(
        text.contains(&format!(
            "{n} links read: {kept} imported, 0 already imported, skipped: 1 invalid_code; \
             2 visits imported"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{kept} links asked of http://127.0.0.1:{http_port}: {kept} answer as before, 0 differ \
             (1 not asked, 1 of them refused by the import"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{TOO_LONG} ({DOMAIN}): not asked: the import refuses it (imported code is 65 \
             characters; it must be 1 to 64)"
        )),
        "{text}"
    );

    // verify-import's requests are no visits: a visitor's click after them is the only one
    // added to the visit YOURLS logged for `1`, once the consumer has stored that click (the
    // stream is read in order, so verify's request, earlier, has been read by then).
    let client = http_client();
    let response = client
        .get(format!("http://127.0.0.1:{http_port}/1"))
        .header("Host", DOMAIN)
        .header("User-Agent", BROWSER)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 301);
    let api_key = std::fs::read_to_string(var.path().join("api-key")).unwrap();
    let clicks = || -> i64 {
        let stats: serde_json::Value = client
            .get(format!(
                "http://127.0.0.1:{api_port}/api/v1/links/1/stats?include_bots=true"
            ))
            .bearer_auth(api_key.trim())
            .send()
            .unwrap()
            .json()
            .unwrap();
        stats["totals"]["clicks"].as_i64().unwrap_or(-1)
    };
    testkit::wait_until(Duration::from_secs(30), || clicks() >= 2);
    assert_eq!(clicks(), 2, "the logged visit and the click, nothing else");

    // And asked directly: each old answer, YOURLS's 301 to the target.
    let answer = |keyword: &str| {
        let request = client.get(format!("http://127.0.0.1:{http_port}/{keyword}"));
        status_and_location(&request.header("Host", DOMAIN).send().unwrap())
    };
    for keyword in keywords.iter().filter(|k| k.as_str() != TOO_LONG) {
        assert_eq!(
            answer(keyword),
            (301, target(keyword)),
            "/{keyword} on {DOMAIN}"
        );
    }

    // scripts/run rewrites nginx.conf at every start, never servers.d: after a restart the old
    // codes still answer.
    drop(run);
    let _run = Run::start(var.path(), ports);
    for keyword in ["1", "z", "1o", "a~b", "Promo12"] {
        assert_eq!(
            answer(keyword),
            (301, target(keyword)),
            "/{keyword} on {DOMAIN} after a restart"
        );
    }
}

//! Every shell command the docs show runs as written. The pages are found by walking README.md,
//! docs/, sidecar/README.md, ngx-module/README.md and deploy/; each fenced shell block either runs
//! against one real `scripts/run` stack and must succeed, or carries
//! `<!-- docs-test: skip (reason) -->` on the line before its fence. The conventions (labels,
//! ports, `$key`, shown outputs, shared state) are in docs/DOCS-TESTS.md.

use shortlink_e2e::docs::{self, Bindings, Block};
use shortlink_e2e::paths;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;
use testkit::Lifeline;

/// Longest a single step may take (a command that waits for ever fails here, not in CI's timeout).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The pages the test reads, relative to the workspace, in a stable order.
fn pages() -> Vec<PathBuf> {
    let root = paths::workspace_dir();
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs = markdown_in(&root, Path::new("docs"), false);
    docs.sort();
    pages.extend(docs);
    pages.push(PathBuf::from("sidecar/README.md"));
    pages.push(PathBuf::from("ngx-module/README.md"));
    let mut deploy = markdown_in(&root, Path::new("deploy"), true);
    deploy.sort();
    pages.extend(deploy);
    pages
}

fn markdown_in(root: &Path, dir: &Path, recursive: bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let entries =
        std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("read a directory entry");
        let relative = dir.join(entry.file_name());
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() && recursive {
            found.extend(markdown_in(root, &relative, true));
        } else if kind.is_file() && relative.extension().is_some_and(|e| e == "md") {
            found.push(relative);
        }
    }
    found
}

fn read_page(page: &Path) -> String {
    let path = paths::workspace_dir().join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Unlabeled fences and malformed markers fail before anything runs: a fence must say what it
/// holds (`sh` for commands, `text` for a diagram), so no command hides from the test unlabeled.
#[test]
fn every_fence_is_labeled_and_every_marker_is_well_formed() {
    let mut problems = String::new();
    for page in pages() {
        let (blocks, bad) = docs::blocks(&read_page(&page));
        for block in blocks.iter().filter(|b| b.label.is_empty()) {
            let _ = writeln!(
                problems,
                "{}:{}: a fence without a label (sh for commands, text for the rest)",
                page.display(),
                block.line
            );
        }
        for marker in bad {
            let _ = writeln!(
                problems,
                "{}:{}: not a skip marker (`<!-- docs-test: skip (reason) -->`): {}",
                page.display(),
                marker.line,
                marker.text
            );
        }
    }
    assert!(problems.is_empty(), "{problems}");
}

/// `scripts/run` in the background as a user starts it (no `--check`: it stays up), on free ports
/// and a state directory of its own; stopped by its pid with SIGTERM when dropped, also when a
/// step fails (its trap stops Redis, the sidecar and nginx).
struct Stack {
    run: Lifeline,
    var: PathBuf,
    /// (scripts/run's default, the port this stack uses), as the docs write the defaults.
    ports: Vec<(u16, u16)>,
}

impl Stack {
    fn start(dir: &Path) -> Self {
        let var = dir.join("var");
        let [http, https, api, sidecar, redis, status, metrics] = testkit::free_ports::<7>();
        let ports = vec![
            (8080, http),
            (8443, https),
            (8081, api),
            (8700, sidecar),
            (6390, redis),
            (8082, status),
            (8701, metrics),
        ];
        let run = Lifeline::builder(
            paths::workspace_dir().join("scripts/run"),
            dir.join("run.log"),
        )
        .env("SHORTLINK_VAR", &var)
        .env("SHORTLINK_BIN_DIR", paths::profile_dir())
        // The end-to-end tests' small geo database: no 64 MB download for a fresh state directory.
        .env("SHORTLINK_GEOIP_DB", paths::test_geo_db())
        .env("SHORTLINK_WORKERS", "1")
        .env("SHORTLINK_HTTP_PORT", http.to_string())
        .env("SHORTLINK_HTTPS_PORT", https.to_string())
        .env("SHORTLINK_API_PORT", api.to_string())
        .env("SHORTLINK_SIDECAR_PORT", sidecar.to_string())
        .env("SHORTLINK_REDIS_PORT", redis.to_string())
        .env("SHORTLINK_STATUS_PORT", status.to_string())
        .env("SHORTLINK_METRICS_PORT", metrics.to_string())
        .capture_stdout()
        .spawn();
        run.wait_for_line(Duration::from_secs(120), |line| {
            line.contains("Ctrl-C stops everything")
        });
        Stack { run, var, ports }
    }

    fn api_key(&self) -> String {
        std::fs::read_to_string(self.var.join("api-key"))
            .expect("scripts/run wrote var/api-key")
            .trim()
            .to_owned()
    }

    /// The last lines of each log, for a failure message.
    fn logs(&self) -> String {
        let mut text = String::new();
        for log in ["sidecar.log", "nginx/error.log", "redis.log"] {
            let body = std::fs::read_to_string(self.var.join(log)).unwrap_or_default();
            let tail: Vec<&str> = body.lines().rev().take(15).collect();
            let _ = writeln!(text, "--- {log} (last lines)");
            for line in tail.into_iter().rev() {
                let _ = writeln!(text, "{line}");
            }
        }
        let _ = writeln!(text, "--- scripts/run\n{}", self.run.log_text());
        text
    }
}

/// One bash process per page: its blocks run in order in it, so a variable one block sets (or
/// `export`s) is there for the next. Each step runs as `{ step; }` with stdin from /dev/null and its
/// output in files; `set -e -o pipefail` ends the shell at the first failing command.
struct Session {
    bash: Child,
    stdin: ChildStdin,
    dir: PathBuf,
    steps: usize,
}

impl Session {
    fn start(dir: PathBuf, stack: &Stack) -> Self {
        std::fs::create_dir_all(&dir).expect("make the session's directory");
        let root = paths::workspace_dir();
        // The page's commands run where a user runs them, at the checkout's root: `var` is the
        // stack's state directory, the rest links to the checkout; files they write stay here.
        for entry in std::fs::read_dir(&root).expect("read the workspace") {
            let name = entry.expect("an entry").file_name();
            if name == "var" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            std::os::unix::fs::symlink(root.join(&name), dir.join(&name)).expect("link");
        }
        std::os::unix::fs::symlink(&stack.var, dir.join("var")).expect("link var");
        let log = std::fs::File::create(dir.join("bash.log")).expect("bash's log");
        let path = format!(
            "{}:{}",
            paths::profile_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let var = stack.var.display();
        let redis = stack.ports.iter().find(|(d, _)| *d == 6390).unwrap().1;
        let mut bash = Command::new("bash")
            .args(["--noprofile", "--norc", "-s"])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &dir)
            .env("LC_ALL", "C.UTF-8")
            // The sidecar's commands find the stack's data as scripts/run's sidecar does.
            .env(
                "SHORTLINK_DATABASE_URL",
                format!("sqlite://{var}/shortlink.db"),
            )
            .env("SHORTLINK_REDIS_URL", format!("redis://127.0.0.1:{redis}"))
            .env("SHORTLINK_CODE_SECRET_FILE", format!("{var}/code-secret"))
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("start bash");
        let stdin = bash.stdin.take().expect("bash's stdin");
        let mut session = Session {
            bash,
            stdin,
            dir,
            steps: 0,
        };
        let key = stack.api_key();
        session.send(&format!(
            "set -e -o pipefail\n\
             # An HTTP error is a failed command, as a refused request is a wrong example.\n\
             curl() {{ command curl --fail-with-body \"$@\"; }}\n\
             key='{key}'\nadmin_key='{key}'\n"
        ));
        session
    }

    fn send(&mut self, text: &str) {
        self.stdin
            .write_all(text.as_bytes())
            .and_then(|()| self.stdin.flush())
            .expect("write to bash");
    }

    /// Runs one step; its stdout, or why it failed.
    fn run(&mut self, script: &str) -> Result<String, String> {
        self.steps += 1;
        let n = self.steps;
        let out = self.dir.join(format!("step-{n}.out"));
        let err = self.dir.join(format!("step-{n}.err"));
        let done = self.dir.join(format!("step-{n}.done"));
        self.send(&format!(
            "{{\n{script}\n}} </dev/null >'{}' 2>'{}'\n: >'{}'\n",
            out.display(),
            err.display(),
            done.display()
        ));
        let mut exited = None;
        let finished = testkit::wait_until(STEP_TIMEOUT, || {
            if done.exists() {
                return true;
            }
            exited = self.bash.try_wait().ok().flatten();
            exited.is_some()
        });
        let stdout = std::fs::read_to_string(&out).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        let bash_log = std::fs::read_to_string(self.dir.join("bash.log")).unwrap_or_default();
        match (finished, exited) {
            (true, None) => Ok(stdout),
            (true, Some(status)) => Err(format!(
                "failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}{bash_log}"
            )),
            (false, _) => Err(format!(
                "still running after {STEP_TIMEOUT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
            )),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // This test's own bash, by its handle.
        let _ = self.bash.kill();
        let _ = self.bash.wait();
    }
}

/// What a page's run came to.
struct Outcome {
    ran: Vec<String>,
    skipped: Vec<String>,
    failure: Option<String>,
}

fn run_page(page: &Path, blocks: &[Block], stack: &Stack, work: &Path) -> Outcome {
    let mut outcome = Outcome {
        ran: Vec::new(),
        skipped: Vec::new(),
        failure: None,
    };
    let mut session: Option<Session> = None;
    let mut bindings = Bindings::new();
    for block in blocks.iter().filter(|b| b.is_shell()) {
        let at = format!("{}:{}", page.display(), block.line);
        if let Some(reason) = &block.skip {
            outcome.skipped.push(format!("{at} ({reason})"));
            continue;
        }
        let session = session.get_or_insert_with(|| {
            let name = page.display().to_string().replace('/', "_");
            Session::start(work.join(name), stack)
        });
        for step in docs::steps(block) {
            let script = docs::bind(
                &docs::substitute_ports(&step.script, &stack.ports),
                &bindings,
            );
            let result = session.run(&script).and_then(|stdout| {
                let shown: Vec<String> = step
                    .shown
                    .iter()
                    .map(|s| docs::substitute_ports(s, &stack.ports))
                    .collect();
                docs::check_shape(&shown, &stdout)
                    .map_err(|e| format!("the output is not what the page shows: {e}"))
            });
            match result {
                Ok(found) => bindings.extend(found),
                Err(why) => {
                    outcome.failure = Some(format!("{at}: the step\n{script}{why}"));
                    return outcome;
                }
            }
        }
        outcome.ran.push(at);
    }
    outcome
}

#[test]
fn every_shell_block_runs_or_says_why_not() {
    let pages: Vec<(PathBuf, Vec<Block>)> = pages()
        .into_iter()
        .map(|page| {
            let (blocks, _) = docs::blocks(&read_page(&page));
            (page, blocks)
        })
        .collect();
    let dir = testkit::temp_dir();
    let stack = Stack::start(dir.path());
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    let mut failures = Vec::new();
    for (page, blocks) in &pages {
        let outcome = run_page(page, blocks, &stack, &dir.path().join("pages"));
        ran.extend(outcome.ran);
        skipped.extend(outcome.skipped);
        failures.extend(outcome.failure);
    }
    println!("ran {} blocks:", ran.len());
    ran.iter().for_each(|b| println!("  {b}"));
    println!("skipped {} blocks:", skipped.len());
    skipped.iter().for_each(|b| println!("  {b}"));
    assert!(
        failures.is_empty(),
        "{}\n\n{}",
        failures.join("\n\n"),
        stack.logs()
    );
    assert!(!ran.is_empty(), "no block ran: the pages were not found");
}

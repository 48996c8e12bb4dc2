//! Child processes that cannot outlive the test process.
//!
//! Each server runs under a tiny `sh` guardian whose stdin is a pipe held by the test process. The
//! guardian starts the server, reports its PID, and blocks reading stdin. When the pipe closes — on
//! [`Lifeline::stop`], on drop, or because the test process died, even by SIGKILL — the guardian sends
//! the server its stop signal, escalates to SIGKILL after 10 s, and removes the server's scratch
//! directory. Statics are never dropped in Rust, so this is also what stops per-process servers.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const GUARDIAN: &str = r#"
sig=$1; cleanup=$2; log=$3; capture=$4; shift 4
if [ "$capture" = 1 ]; then
    "$@" </dev/null 2>>"$log" &
else
    "$@" </dev/null >>"$log" 2>&1 &
fi
child=$!
echo "$child"
read _ignored
kill -s "$sig" "$child" 2>/dev/null
tries=0
while kill -0 "$child" 2>/dev/null && [ "$tries" -lt 100 ]; do
    sleep 0.1; tries=$((tries + 1))
done
kill -s KILL "$child" 2>/dev/null
wait "$child" 2>/dev/null
if [ -n "$cleanup" ]; then rm -rf "$cleanup"; fi
"#;

/// Signals the tests send; names as `kill -s` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
    Quit,
    Kill,
    Hup,
    Usr2,
    Winch,
    Stop,
    Cont,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Int => "INT",
            Signal::Quit => "QUIT",
            Signal::Kill => "KILL",
            Signal::Hup => "HUP",
            Signal::Usr2 => "USR2",
            Signal::Winch => "WINCH",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
        }
    }
}

/// How to start a process under a lifeline.
pub struct Builder {
    program: OsString,
    args: Vec<OsString>,
    stop_signal: Signal,
    log: PathBuf,
    capture_stdout: bool,
    cleanup: Option<PathBuf>,
    envs: Vec<(OsString, OsString)>,
}

impl Builder {
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The signal that asks the process to stop (default SIGTERM).
    pub fn stop_signal(mut self, signal: Signal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// Hand the process's stdout to the test ([`Lifeline::wait_for_line`]) instead of the log.
    pub fn capture_stdout(mut self) -> Self {
        self.capture_stdout = true;
        self
    }

    /// A directory removed once the process has stopped, even if the test process died first.
    pub fn cleanup(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cleanup = Some(dir.into());
        self
    }

    pub fn spawn(self) -> Lifeline {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARDIAN)
            .arg("lifeline")
            .arg(self.stop_signal.name())
            .arg(self.cleanup.as_deref().unwrap_or(Path::new("")))
            .arg(&self.log)
            .arg(if self.capture_stdout { "1" } else { "0" })
            .arg(&self.program)
            .args(&self.args)
            .envs(self.envs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut guardian = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", self.program));
        let stdin = guardian.stdin.take();
        let mut stdout = BufReader::new(guardian.stdout.take().expect("piped stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read the child's pid");
        let pid = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("guardian of {:?} said {first:?}", self.program));

        // Drain stdout on a thread so a chatty child never blocks on a full pipe.
        let (lines_tx, lines) = mpsc::channel();
        let log = self.log.clone();
        std::thread::spawn(move || {
            let mut log = OpenOptions::new().create(true).append(true).open(log).ok();
            for line in stdout.lines().map_while(Result::ok) {
                if let Some(log) = log.as_mut() {
                    let _ = writeln!(log, "{line}");
                }
                let _ = lines_tx.send(line);
            }
        });

        Lifeline {
            pid,
            program: self.program,
            log: self.log,
            guardian,
            stdin,
            lines: Mutex::new(lines),
        }
    }
}

/// A running child process, stopped when this is dropped or the test process ends.
pub struct Lifeline {
    pid: u32,
    program: OsString,
    log: PathBuf,
    guardian: Child,
    stdin: Option<ChildStdin>,
    lines: Mutex<Receiver<String>>,
}

impl Lifeline {
    /// Starts describing a process; `log` receives its stderr (and stdout unless captured).
    pub fn builder(program: impl AsRef<OsStr>, log: impl Into<PathBuf>) -> Builder {
        Builder {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            stop_signal: Signal::Term,
            log: log.into(),
            capture_stdout: false,
            cleanup: None,
            envs: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The log so far, for assertions and failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` to the process itself (not its guardian).
    pub fn signal(&self, signal: Signal) {
        let status = Command::new("kill")
            .args(["-s", signal.name(), &self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {} {}", signal.name(), self.pid);
    }

    /// Whether the process still exists.
    pub fn is_alive(&self) -> bool {
        Command::new("kill")
            .args(["-0", &self.pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    /// Waits for a stdout line (needs `capture_stdout`) that satisfies `matches`, and returns it.
    pub fn wait_for_line(&self, timeout: Duration, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if matches(&line) => return line,
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => panic!(
                    "{:?} printed no expected line within {timeout:?}; log:\n{}",
                    self.program,
                    self.log_text()
                ),
            }
        }
    }

    /// Stops the process with its stop signal and waits until it and its guardian are gone.
    pub fn stop(&mut self) {
        self.stdin.take();
        let _ = self.guardian.wait();
    }
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        self.stop();
    }
}

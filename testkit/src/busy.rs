//! A machine made busy on purpose (issue 82): processes that spin on the CPU while a test runs,
//! so that it shows a loaded machine slowing requests down and never making them fail.

use crate::process::Lifeline;

/// Spinning processes, stopped when this is dropped (or the test process ends: [`Lifeline`]).
pub struct CpuHogs {
    _hogs: Vec<Lifeline>,
    _dir: tempfile::TempDir,
}

impl CpuHogs {
    /// One spinning process per core of the machine: every core kept busy.
    pub fn on_every_core() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Self::start(cores)
    }

    /// `count` processes, each spinning on a core for as long as it runs.
    pub fn start(count: usize) -> Self {
        let dir = crate::temp_dir();
        let hogs = (0..count)
            .map(|n| {
                Lifeline::builder("sh", dir.path().join(format!("hog-{n}.log")))
                    .args(["-c", "while :; do :; done"])
                    .spawn()
            })
            .collect();
        Self {
            _hogs: hogs,
            _dir: dir,
        }
    }
}

#![deny(unsafe_code)]

use shortlink_sidecar::cli;
use std::process::ExitCode;

/// jemalloc hands freed pages back to the system after a short decay, where glibc keeps them in
/// per-thread arenas (tokio's blocking threads parse batches and drive SQLite, each with its own
/// arena). Under a steady soak glibc's RSS only ever stepped up; jemalloc's stays level and costs
/// the batch path less CPU. mimalloc was tried too: it kept more and ran slower here.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// One arena instead of jemalloc's four per CPU. Threads take arenas in turn as they start, and
/// tokio starts blocking threads as work comes and retires them when idle, so a long batch kept
/// reaching arenas a short one had not touched: peak RSS grew with the batch's length (108 →
/// 121 MiB on SQLite, 68 → 74 MiB on PostgreSQL, 100k → 1M links). With one it stays level
/// (88 → 90, 44 → 47 MiB) at the same speed: per-thread caches serve most allocations, and
/// this process has two worker threads on two CPUs.
// SAFETY: jemalloc reads this `const char *` once, before its first allocation; it points to a
// NUL-terminated static string. jemalloc's own definition of the symbol is weak, for this.
// Unprefixed: Debian's jemalloc is the process's malloc (Cargo.toml).
#[allow(unsafe_code)]
#[export_name = "malloc_conf"]
static JEMALLOC_CONF: &[u8; 10] = b"narenas:1\0";

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match shortlink_sidecar::config_file::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(error) => {
            eprintln!("shortlink-sidecar: {error}");
            return ExitCode::FAILURE;
        }
    };
    shortlink_api::serving::init_tracing();
    match cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shortlink-sidecar: {error}");
            ExitCode::FAILURE
        }
    }
}

//! Compose throughput (issue 37): `POST /api/v1/compose` with N NDJSON recipients (a phone to
//! normalise, a variable, a target; the template `Hi {{name}}, 20% off today: {{link}} Reply STOP
//! to end`) against `POST /api/v1/links/batch` with N items of the same links, in the same run on
//! fresh databases, against the release `shortlink-sidecar serve` binary, straight to it. Both
//! count links durable in SQL and present in Redis (checked equal to N). Prints a markdown table
//! with the ratio compose / batch (the target is 0.8 or more). Sizes `BENCH_SIZES` (default
//! 1000000), backends `BENCH_BACKENDS` (default sqlite). Run through `bench/compose/run`.

mod common;

use common::{measure, target};
use std::path::PathBuf;

const TEMPLATE: &str = "Hi%20%7B%7Bname%7D%7D%2C%2020%25%20off%20today%3A%20%7B%7Blink%7D%7D%20Reply%20STOP%20to%20end";

/// An NDJSON body of `n` lines.
fn ndjson(n: usize, line: impl Fn(usize) -> String) -> Vec<u8> {
    (0..n).map(line).collect::<Vec<_>>().join("\n").into_bytes()
}

/// The batch items: the links compose issues for the same recipients.
fn batch_line(i: usize) -> String {
    format!(
        "{{\"url\":\"{}\",\"campaign\":\"c42\",\"ref\":\"r{i}\"}}",
        target(i)
    )
}

/// The recipients: a French mobile number written nationally, a name, the target.
fn compose_line(i: usize) -> String {
    format!(
        "{{\"phone\":\"061{i:07}\",\"ref\":\"r{i}\",\"variables\":{{\"name\":\"Client {i}\"}},\"url\":\"{}\"}}",
        target(i)
    )
}

fn main() {
    let backends = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite".into());
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar"));
    let runtime = common::runtime();
    let dir = testkit::temp_dir();
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let compose_path = format!("/compose?template={TEMPLATE}&country=FR&campaign=c42&budget=1");
    println!("| backend | recipients | round | batch links/s | compose recipients/s | compose / batch | batch CPU µs/link | compose CPU µs/recipient | batch VmHWM | compose VmHWM |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for backend in ["sqlite", "postgres", "mariadb"] {
        if !backends.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        for &n in &sizes {
            let cell = |label, path: &str, payload| {
                measure(
                    &runtime,
                    &binary,
                    backend,
                    (path, payload),
                    n,
                    dir.path(),
                    label,
                    false,
                )
            };
            // The cells alternate within each round, so a change in the machine's load between
            // rounds moves both sides of a ratio, and the median ratio is the one to read.
            let mut ratios = Vec::with_capacity(rounds);
            for round in 1..=rounds {
                let batch = cell("batch", "/links/batch", ndjson(n, batch_line));
                let compose = cell("compose", &compose_path, ndjson(n, compose_line));
                let rate = |secs: f64| n as f64 / secs;
                let per = |cpu: f64| cpu * 1e6 / n as f64;
                ratios.push(batch.secs / compose.secs);
                println!(
                    "| {backend} | {n} | {round} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} | {:.1} MiB | {:.1} MiB |",
                    rate(batch.secs),
                    rate(compose.secs),
                    batch.secs / compose.secs,
                    per(batch.cpu),
                    per(compose.cpu),
                    batch.hwm_kib as f64 / 1024.0,
                    compose.hwm_kib as f64 / 1024.0,
                );
            }
            ratios.sort_by(f64::total_cmp);
            println!(
                "| {backend} | {n} | median | | | **{:.2}** (target ≥ 0.8) | | | | |",
                ratios[ratios.len() / 2]
            );
        }
    }
}

//! The issuing choice with the drain state consulted (issue 55) against the choice as it was
//! before drains, in the same run: per link, what a create pays on top of today's pick (the
//! snapshot's read lock and `Arc` clone, the drained-host lookups), over a list of three
//! domains with a standby, for nothing drained and for one domain drained. Prints nanoseconds
//! per pick and the ratio; a create's own latency (milliseconds: bench/create-latency) is what
//! the difference is to be read against. Run: `bench/domain-pick/run`.

use shortlink_domains::drain::{Drain, Mode, Snapshots};
use shortlink_domains::IssuingBases;
use std::hint::black_box;
use std::time::{Duration, Instant};

const LIST: &str = "https://s1.example weight=3 https://s2.example https://s3.example \
                    https://s9.example standby";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The best of `rounds` timings of `n` calls of `f` (the least disturbed by the other builders).
fn best(rounds: usize, n: usize, codes: &[String], mut f: impl FnMut(&str) -> usize) -> Duration {
    (0..rounds)
        .map(|_| {
            let started = Instant::now();
            let mut sum = 0usize;
            for i in 0..n {
                sum = sum.wrapping_add(f(&codes[i % codes.len()]));
            }
            black_box(sum);
            started.elapsed() / n as u32
        })
        .min()
        .expect("at least one round")
}

fn main() {
    let n = env_usize("BENCH_N", 1_000_000);
    let rounds = env_usize("BENCH_ROUNDS", 7);
    let list = IssuingBases::parse(LIST).expect("a valid list");
    let codes: Vec<String> = (0..4096).map(|i| format!("k3Xq{i:05}")).collect();
    let nothing = Snapshots::default();
    let one = Snapshots::default();
    one.put(
        "s2.example",
        Drain {
            mode: Mode::Drained,
            ..Drain::default()
        },
    );
    println!("| pick | ns per link | ratio to before |");
    println!("|---|---|---|");
    // Interleaved rounds would be fairer on a busy machine; the best of each is what is compared.
    let before = best(rounds, n, &codes, |code| list.pick(code, None).len());
    let row = |name: &str, took: Duration| {
        println!(
            "| {name} | {:.1} | {:.3} |",
            took.as_nanos() as f64,
            took.as_nanos() as f64 / before.as_nanos().max(1) as f64
        );
    };
    row("before: pick (no drain state)", before);
    for (name, snapshots) in [("nothing drained", &nothing), ("s2 drained", &one)] {
        let took = best(rounds, n, &codes, |code| {
            let snapshot = snapshots.current();
            list.pick_live(code, None, snapshot.as_ref()).url.len()
        });
        row(&format!("after: snapshot + pick_live, {name}"), took);
    }
}

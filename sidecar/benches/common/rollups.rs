//! Synthetic visit rollups for the benchmarks that read statistics (analytics, console): the
//! rows the consumer would have written for millions of visits, without consuming them.

use shortlink_visits::rollup::Interval;

/// The SQL that stores rollups of `visits` visits of `code` (`*`: all links) spread evenly over
/// the 30 days before today, as the consumer writes them: hourly and daily buckets and daily
/// breakdown rows (60 agents, one in ten a link preview; 300 places; 40 referrers). Returns the
/// first day's start and the statements.
pub fn statements(code: &str, visits: i64) -> (i64, Vec<String>) {
    let days = 30i64;
    let to = Interval::Day.floor(chrono::Utc::now().timestamp());
    let from = to - days * 86_400;
    let per_hour = visits / (days * 24);
    let mut statements: Vec<String> = Vec::new();
    for day in 0..days {
        let d = from + day * 86_400;
        statements.push(format!(
            "INSERT INTO visit_buckets VALUES ('{code}', 86400, {d}, {}, {}, {}, {})",
            per_hour * 24 * 8 / 10,
            per_hour * 24 / 10,
            per_hour * 24 / 10,
            per_hour * 24 / 3
        ));
        for h in 0..24 {
            statements.push(format!(
                "INSERT INTO visit_buckets VALUES ('{code}', 3600, {}, {}, {}, {}, {})",
                d + h * 3600,
                per_hour * 8 / 10,
                per_hour / 10,
                per_hour / 10,
                per_hour / 3
            ));
        }
        let share = per_hour * 24;
        let mut values = Vec::new();
        for a in 0..60 {
            values.push(format!(
                "('{code}', {d}, 'browser{}', 'os{}', '{}', '{}', {}, {}, {})",
                a % 20,
                a % 6,
                ["desktop", "mobile", "tablet"][a % 3],
                if a % 10 == 0 { "Slack" } else { "" },
                share / 60,
                1,
                1
            ));
        }
        statements.push(format!(
            "INSERT INTO visit_agents VALUES {}",
            values.join(", ")
        ));
        let mut values = Vec::new();
        for p in 0..300 {
            values.push(format!(
                "('{code}', {d}, 'C{}', 'region{}', 'city{p}', {}, 1, 1)",
                p % 30,
                p % 100,
                share / 300
            ));
        }
        statements.push(format!(
            "INSERT INTO visit_places VALUES {}",
            values.join(", ")
        ));
        let mut values = Vec::new();
        for s in 0..40 {
            values.push(format!(
                "('{code}', {d}, 'ref{}.example', 's{}.example', {}, 1, 1)",
                s % 20,
                s / 20,
                share / 40
            ));
        }
        statements.push(format!(
            "INSERT INTO visit_sources VALUES {}",
            values.join(", ")
        ));
    }
    (from, statements)
}

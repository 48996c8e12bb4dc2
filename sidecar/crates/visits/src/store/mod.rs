//! Storage of visits, rollups and stats: the [`VisitStore`] trait and what it reads and writes.
//! Its one implementation, for every SQL backend, is `shortlink-visits-sql` (the binary opens it);
//! that crate's docs say how a batch is written once and only once.

mod api;

pub use self::api::{
    BatchOutcome, DayPartitions, Dimension, Entry, IdleLink, RuleEntry, Stats, StatsQuery,
    VisitStore,
};
// The reads every backend answers alike, for the SQL implementation.
pub use self::api::{
    breakdown_days, dense_series, folding, rank_breakdowns, GroupRow, BREAKDOWN_TABLES,
};
pub use super::rollup::{Counts, ALL_LINKS};

#[cfg(test)]
mod tests {
    use super::api::*;
    use super::*;
    use crate::rollup::Interval;

    #[test]
    fn series_is_dense() {
        let query = StatsQuery {
            workspace: shortlink_model::WorkspaceId::DEFAULT,
            code: None,
            from: 0,
            to: 4 * 3600,
            interval: Interval::Hour,
            include_bots: false,
            top: 10,
        };
        let one = Counts {
            humans: 1,
            ..Counts::default()
        };
        let series = dense_series(&query, vec![(3600, one), (3 * 3600, one)]);
        let humans: Vec<i64> = series.iter().map(|(_, c)| c.humans).collect();
        assert_eq!(humans, [0, 1, 0, 1]);
        assert_eq!(breakdown_days(&query), (0, 86_400));
    }

    #[test]
    fn breakdowns_rank_per_dimension() {
        let row = |values: [&str; 2], humans, bots| GroupRow {
            values: values.map(str::to_owned).to_vec(),
            humans,
            bots,
            previews: 0,
            scanners: 0,
        };
        let rows = [
            row(["Chrome", ""], 3, 0),
            row(["", ""], 3, 0),
            row(["Safari", ""], 3, 0),
            row(["Chrome", "curl"], 0, 5),
            row(["Firefox", ""], 1, 0),
        ];
        let dims = [Dimension::Browser, Dimension::Agent];
        let got = rank_breakdowns(&dims, &rows, false, 3);
        let values = |i: usize| -> Vec<(Option<&str>, i64)> {
            got[i]
                .1
                .iter()
                .map(|e| (e.value.as_deref(), e.humans + e.bots))
                .collect()
        };
        // Ranked by humans; ties by value, unknown last; cut at `top`.
        assert_eq!(
            values(0),
            [(Some("Chrome"), 8), (Some("Safari"), 3), (None, 3)]
        );
        // Machines only, ranked by everyone.
        assert_eq!(values(1), [(Some("curl"), 5)]);
        let with_bots = rank_breakdowns(&dims, &rows, true, 1);
        assert_eq!(with_bots[0].1[0].value.as_deref(), Some("Chrome"));
        assert_eq!(with_bots[0].1[0].bots, 5);
    }
}

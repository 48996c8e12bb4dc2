//! A job's groups decide in request order (issue 82). A batch or compose writes two groups at
//! once, each in its own transaction, and each reads its authority just before it commits
//! ([`super::authority`]). Left to race, the later group could commit first, the revoke land,
//! and the earlier group be taken back: the answer then refused lines with `revoked_api_key`
//! and created lines after them, which a campaign tool reading "stopped at line n" gets wrong.
//! It happened on a loaded machine, where the scheduler decides which group gets the database
//! first.
//!
//! So each group takes a [`Turn`] where its job hands them out in order, and decides (its final
//! read of the authority, then its commit) only in its turn: it passes the turn on once its fate
//! is sealed, when that read found it standing (holding the rows, so nothing can stop it any
//! more) or when it ended. Only the decision is ordered, not the writes. On SQLite, whose one
//! writer serialises the transactions anyway, a group waits for its turn before it begins its
//! transaction (no overlap is lost). On PostgreSQL and MariaDB the next group writes at once,
//! beside the one ahead, and waits for its turn only before its final read; it must then hold
//! nothing the groups ahead of it wait for, or the job deadlocks where the database cannot see it
//! (one wait is in the database, the other here). What it could hold, and how each is kept out:
//!
//! - **A unique key**: the database makes the second inserter of a code wait until the first
//!   commits. Each group [`Turn::arrive`]s in turn order with its explicit codes (aliases,
//!   imported codes); one that shares a code with a group ahead that has not passed waits for its
//!   turn before it writes, so the first occurrence inserts first and wins, as in one transaction.
//! - **The workspace's gate** ([`super::in_flight`]), fair: a delete queued there keeps later
//!   readers out. Groups enter it in turn order (inside [`Turn::arrive`]), so the group ahead is
//!   never queued behind a delete that waits for the one behind.
//! - **Anything else**: a pool connection the group ahead waits for, a generated code an import's
//!   restored code ahead collides with, MariaDB's share lock on the workspace's row (each insert's
//!   foreign key check takes one; a suspend queues behind it, and the next share request behind
//!   the suspend). Not foreseen: the group waits for its turn only while the job moves
//!   ([`Turn::wait_while_moving`]: a group ticks [`Turn::progress`] at each chunk). A turn ahead
//!   that made no progress for a third of `--db-timeout` may be waiting on it: it gives way (rolls
//!   back and takes back its records), waits for its turn, and writes again, as on SQLite. Within
//!   two such windows of the group ahead's last tick the one behind has let go, well inside the
//!   databases' lock wait (`--db-timeout` too), so the group ahead never fails on it; a group
//!   ahead that is merely slow costs the one behind a rewrite, never a line. A lock wait that
//!   runs out all the same (a commit slower than `--db-timeout` on a loaded machine, a lock
//!   taken outside the job), or a deadlock the database breaks, is a rewrite too: the group
//!   rolls back, takes back its records and writes again in its turn ([`super::batch`]).
//! - **Gaps**: on MariaDB a group's transaction runs at READ COMMITTED, so its checks of taken
//!   codes lock the rows they find and no gap the next group's generated codes fall into.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

use crate::sync::LockOrRecover;

/// Where a job hands out its turns, in the order it calls [`Turns::take`].
#[derive(Debug)]
pub struct Turns(Arc<Order>);

#[derive(Debug)]
struct Order {
    /// The next turn to hand out.
    next: Mutex<u64>,
    /// Every turn below it has arrived ([`Turn::arrive`]) or passed.
    arrived: Mark,
    /// Every turn below it has passed.
    passed: Mark,
    /// The explicit codes of the groups arrived and not passed, each with the turns writing it.
    codes: Mutex<HashMap<String, BTreeSet<u64>>>,
    /// Ticked as the job's groups move on: what a turn waiting behind them watches.
    progress: AtomicU64,
}

/// How far a job's turns got: every turn below `below` is marked.
#[derive(Debug)]
struct Mark {
    /// Those marked out of order (a group that wrote nothing may be dropped before the ones ahead
    /// of it have passed).
    ahead: Mutex<BTreeSet<u64>>,
    below: watch::Sender<u64>,
}

impl Mark {
    fn new() -> Self {
        Mark {
            ahead: Mutex::new(BTreeSet::new()),
            below: watch::Sender::new(0),
        }
    }

    fn set(&self, number: u64) {
        let mut ahead = self.ahead.lock_or_recover();
        ahead.insert(number);
        let mut below = *self.below.borrow();
        while ahead.remove(&below) {
            below += 1;
        }
        self.below.send_replace(below);
    }

    /// Waits until every turn below `number` is marked.
    async fn reached(&self, number: u64) {
        let mut below = self.below.subscribe();
        // The sender lives in `self`: the wait cannot fail.
        let _ = below.wait_for(|&below| below >= number).await;
    }
}

impl Default for Turns {
    fn default() -> Self {
        Turns(Arc::new(Order {
            next: Mutex::new(0),
            arrived: Mark::new(),
            passed: Mark::new(),
            codes: Mutex::new(HashMap::new()),
            progress: AtomicU64::new(0),
        }))
    }
}

impl Turns {
    /// The next turn, after every one taken before it.
    pub fn take(&self) -> Turn {
        let mut next = self.0.next.lock_or_recover();
        let number = *next;
        *next += 1;
        Turn {
            order: Arc::clone(&self.0),
            number,
            arrived: false,
            passed: false,
            codes: Vec::new(),
        }
    }
}

/// A group's place in its job's order: passed on when dropped, if not before.
#[derive(Debug)]
pub struct Turn {
    order: Arc<Order>,
    number: u64,
    arrived: bool,
    passed: bool,
    /// The codes it holds in [`Order::codes`].
    codes: Vec<String>,
}

impl Turn {
    /// Comes in after every turn before it has (`enter`ed, the workspace's gate), with the
    /// explicit `codes` its group writes. Returns what `enter` gave, and whether the group may
    /// write before its turn: `false` when a group ahead, not yet passed, writes one of its codes.
    pub async fn arrive<T>(
        &mut self,
        codes: impl IntoIterator<Item = String>,
        enter: impl Future<Output = T>,
    ) -> (T, bool) {
        self.order.arrived.reached(self.number).await;
        let entered = enter.await;
        let mut clear = true;
        if !self.passed {
            let mut held = self.order.codes.lock_or_recover();
            for code in codes {
                // Held by this group as well, waiting: a later one sharing it waits too.
                let writers = held.entry(code.clone()).or_default();
                clear &= writers.first().is_none_or(|&first| first >= self.number);
                if writers.insert(self.number) {
                    self.codes.push(code);
                }
            }
        }
        self.mark_arrived();
        (entered, clear)
    }

    fn mark_arrived(&mut self) {
        if !std::mem::replace(&mut self.arrived, true) {
            self.order.arrived.set(self.number);
        }
    }

    /// Waits until every turn taken before this one has passed.
    pub async fn wait(&self) {
        self.order.passed.reached(self.number).await;
    }

    /// [`Self::wait`] as long as the job moves: `false` once no group of it ticked
    /// [`Self::progress`] for `still` (the turns ahead may be waiting on this one's group).
    pub async fn wait_while_moving(&self, still: Duration) -> bool {
        loop {
            let seen = self.order.progress.load(Ordering::Relaxed);
            if tokio::time::timeout(still, self.wait()).await.is_ok() {
                return true;
            }
            if self.order.progress.load(Ordering::Relaxed) == seen {
                return false;
            }
        }
    }

    /// Tells the turns behind that the group has moved on (a chunk written, its records sent).
    pub fn progress(&self) {
        self.order.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Lets the turns after this one go (once it and those before it have passed).
    pub fn pass(&mut self) {
        if std::mem::replace(&mut self.passed, true) {
            return;
        }
        self.mark_arrived();
        if !self.codes.is_empty() {
            let mut held = self.order.codes.lock_or_recover();
            for code in self.codes.drain(..) {
                if let Some(writers) = held.get_mut(&code) {
                    writers.remove(&self.number);
                    if writers.is_empty() {
                        held.remove(&code);
                    }
                }
            }
        }
        self.progress();
        self.order.passed.set(self.number);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn goes(turn: &Turn) -> bool {
        tokio::time::timeout(Duration::from_millis(20), turn.wait())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_turn_waits_for_every_turn_before_it() {
        let turns = Turns::default();
        let (mut first, second, third) = (turns.take(), turns.take(), turns.take());
        assert!(goes(&first).await);
        assert!(!goes(&third).await, "two turns ahead");
        // The second passes (dropped unused) before the first: the third still waits.
        drop(second);
        assert!(!goes(&third).await, "the first has not passed");
        first.pass();
        assert!(goes(&third).await);
    }

    #[tokio::test]
    async fn a_turn_passes_once() {
        let turns = Turns::default();
        let (mut first, second) = (turns.take(), turns.take());
        first.pass();
        first.pass();
        drop(first);
        assert!(goes(&second).await);
        let third = turns.take();
        assert!(!goes(&third).await, "the second has not passed");
    }

    fn codes(codes: &[&str]) -> Vec<String> {
        codes.iter().map(|code| code.to_string()).collect()
    }

    #[tokio::test]
    async fn a_group_sharing_a_code_with_one_ahead_waits_for_its_turn() {
        let turns = Turns::default();
        let (mut first, mut second, mut third) = (turns.take(), turns.take(), turns.take());
        assert!(first.arrive(codes(&["a", "b"]), async {}).await.1);
        assert!(!second.arrive(codes(&["c", "b"]), async {}).await.1);
        first.pass();
        // The first has passed, but the second writes `b` too, after its turn.
        assert!(!third.arrive(codes(&["b"]), async {}).await.1);
        second.pass();
        let mut fourth = turns.take();
        assert!(
            !fourth.arrive(codes(&["a", "b"]), async {}).await.1,
            "the third has `b`"
        );
        drop((third, fourth));
        let mut fifth = turns.take();
        assert!(fifth.arrive(codes(&["a", "b", "c"]), async {}).await.1);
    }

    #[tokio::test]
    async fn turns_arrive_in_order() {
        let turns = Turns::default();
        let (mut first, mut second) = (turns.take(), turns.take());
        let arriving = tokio::time::timeout(Duration::from_millis(20), second.arrive([], async {}));
        assert!(arriving.await.is_err(), "the first has not arrived");
        first.arrive([], async {}).await;
        assert!(second.arrive([], async {}).await.1);
        // A turn dropped unused counts as arrived.
        let (third, mut fourth) = (turns.take(), turns.take());
        drop(third);
        assert!(fourth.arrive([], async {}).await.1);
    }

    #[tokio::test]
    async fn a_turn_waits_while_the_job_moves() {
        let turns = Turns::default();
        let (mut first, second) = (turns.take(), turns.take());
        let still = Duration::from_millis(20);
        assert!(!second.wait_while_moving(still).await, "nothing moved");
        // Ticks far more often than `still`, however loaded the machine.
        let still = Duration::from_secs(5);
        let moving = async {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                first.progress();
            }
            first.pass();
        };
        let (waited, ()) = tokio::join!(second.wait_while_moving(still), moving);
        assert!(waited, "the first moved on, then passed");
    }
}

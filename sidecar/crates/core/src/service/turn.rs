//! A job's groups decide in request order (issue 82). A batch or compose writes two groups at
//! once, each in its own transaction, and each reads its authority just before it commits
//! ([`super::authority`]). Left to race, the later group could commit first, the revoke land,
//! and the earlier group be taken back: the answer then refused lines with `revoked_api_key`
//! and created lines after them, which a campaign tool reading "stopped at line n" gets wrong.
//! It happened on a loaded machine, where the scheduler decides which group gets the database
//! first.
//!
//! So each group takes a [`Turn`] where its job hands them out in order, waits for it before it
//! begins its transaction, and passes it on once its fate is sealed: when its final read of the
//! authority found it standing (holding the rows, so nothing can stop it any more), or when it
//! ended. The next group's transaction overlaps this one's commit, as before; what it no longer
//! does is commit before this one knows whether it may.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

use crate::sync::LockOrRecover;

/// Where a job hands out its turns, in the order it calls [`Turns::take`].
#[derive(Debug)]
pub struct Turns(Arc<Order>);

#[derive(Debug)]
struct Order {
    /// The next turn to hand out, and those passed out of order (a group that wrote nothing
    /// may be dropped before the ones ahead of it have passed).
    state: Mutex<(u64, BTreeSet<u64>)>,
    /// Every turn below it has passed.
    passed: watch::Sender<u64>,
}

impl Default for Turns {
    fn default() -> Self {
        Turns(Arc::new(Order {
            state: Mutex::new((0, BTreeSet::new())),
            passed: watch::Sender::new(0),
        }))
    }
}

impl Turns {
    /// The next turn, after every one taken before it.
    pub fn take(&self) -> Turn {
        let mut state = self.0.state.lock_or_recover();
        let number = state.0;
        state.0 += 1;
        Turn {
            order: Arc::clone(&self.0),
            number,
            passed: false,
        }
    }
}

/// A group's place in its job's order: passed on when dropped, if not before.
#[derive(Debug)]
pub struct Turn {
    order: Arc<Order>,
    number: u64,
    passed: bool,
}

impl Turn {
    /// Waits until every turn taken before this one has passed.
    pub async fn wait(&self) {
        let mut passed = self.order.passed.subscribe();
        // The sender lives in `self.order`: the wait cannot fail.
        let _ = passed.wait_for(|&passed| passed >= self.number).await;
    }

    /// Lets the turns after this one go (once it and those before it have passed).
    pub fn pass(&mut self) {
        if std::mem::replace(&mut self.passed, true) {
            return;
        }
        let mut state = self.order.state.lock_or_recover();
        state.1.insert(self.number);
        let mut below = *self.order.passed.borrow();
        while state.1.remove(&below) {
            below += 1;
        }
        self.order.passed.send_replace(below);
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
}

//! Bulk writes wait for a busy database instead of failing (issue 82).
//!
//! A pool answers [`sqlx::Error::PoolTimedOut`] after `--db-timeout` both when the database cannot
//! be reached and when every connection is at work for others. A single create's caller is better
//! told 503 at once; a batch, a compose or a reissue is a campaign's thousands of lines, and on a
//! loaded machine (SMS campaigns come in bursts) SQLite's one writer is held past three seconds by
//! the group before, the visit consumer and the checkpointer in turn: 8,000 lines answered 503
//! "not stored; retry later" at a time, while the database was answering all along. Inside
//! [`waiting_while_busy`], a write that timed out waiting for a connection tries again as long as
//! every connection of its pool is open and in use, up to [`Patience`]: a busy database slows the
//! request down, and only one that cannot be reached (connections failing to open) is answered
//! 503. The pool's own queue stays the order writers get in.

use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool, Transaction};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How long a bulk write waits, in all, for a pool whose connections are all at work: past it,
/// a connection is held without end (a stuck statement), and the write fails as unavailable.
#[derive(Debug, Clone, Copy)]
pub struct Patience(pub Duration);

impl Patience {
    /// Ten minutes: a batch group's transaction on SQLite takes seconds when the machine is at a
    /// load of twenty, so a queue of them is minutes at worst.
    pub const BULK: Patience = Patience(Duration::from_secs(600));
}

tokio::task_local! {
    static PATIENCE: Patience;
}

/// Runs `work` with its writes waiting out a busy pool (see the module's documentation). Writes
/// made in tasks it spawns wait as usual.
pub async fn waiting_while_busy<F: Future>(patience: Patience, work: F) -> F::Output {
    PATIENCE.scope(patience, work).await
}

/// A connection from `pool`, waiting while it is busy if the task is [`waiting_while_busy`].
pub(crate) async fn acquire<DB: Database>(
    pool: &Pool<DB>,
) -> Result<PoolConnection<DB>, sqlx::Error> {
    retry_while_busy(pool, || pool.acquire()).await
}

/// A transaction begun on `pool` with `statement` (or the backend's plain `BEGIN`), waiting while
/// the pool is busy if the task is [`waiting_while_busy`].
pub(crate) async fn begin<DB: Database>(
    pool: &Pool<DB>,
    statement: Option<&'static str>,
) -> Result<Transaction<'static, DB>, sqlx::Error> {
    retry_while_busy(pool, || async {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    })
    .await
}

async fn retry_while_busy<DB: Database, T, F: Future<Output = Result<T, sqlx::Error>>>(
    pool: &Pool<DB>,
    mut attempt: impl FnMut() -> F,
) -> Result<T, sqlx::Error> {
    let Ok(Patience(patience)) = PATIENCE.try_with(|patience| *patience) else {
        return attempt().await;
    };
    let deadline = Instant::now() + patience;
    loop {
        match attempt().await {
            Err(sqlx::Error::PoolTimedOut) if busy(pool) && Instant::now() < deadline => {
                tracing::debug!("the database is busy: a bulk write waits on");
            }
            result => return result,
        }
    }
}

/// Every connection the pool may open is open and taken: the database answers, for others.
fn busy<DB: Database>(pool: &Pool<DB>) -> bool {
    pool.size() >= pool.options().get_max_connections() && pool.num_idle() == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::SqlitePoolOptions;

    async fn pool_of_one() -> Pool<sqlx::Sqlite> {
        SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_millis(100))
            .connect("sqlite::memory:")
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_bulk_write_waits_for_a_connection_held_past_the_timeout() {
        let pool = pool_of_one().await;
        let held = pool.acquire().await.unwrap();
        let (released, release) = tokio::sync::oneshot::channel::<()>();
        let holder = tokio::spawn(async move {
            let _ = release.await;
            drop(held);
        });
        let waiting = tokio::spawn({
            let pool = pool.clone();
            waiting_while_busy(Patience::BULK, async move { begin(&pool, None).await })
        });
        // Five timeouts' worth of waiting: a plain acquire would have failed at the first.
        for _ in 0..5 {
            assert!(
                pool.acquire().await.is_err(),
                "the connection is still held"
            );
        }
        assert!(!waiting.is_finished());
        released.send(()).unwrap();
        holder.await.unwrap();
        waiting
            .await
            .unwrap()
            .expect("the bulk write got its connection");
    }

    #[tokio::test]
    async fn a_plain_write_still_times_out() {
        let pool = pool_of_one().await;
        let _held = pool.acquire().await.unwrap();
        assert!(matches!(
            acquire(&pool).await,
            Err(sqlx::Error::PoolTimedOut)
        ));
    }

    #[tokio::test]
    async fn a_bulk_write_gives_up_after_its_patience() {
        let pool = pool_of_one().await;
        let _held = pool.acquire().await.unwrap();
        let patience = Patience(Duration::from_millis(250));
        let waited = waiting_while_busy(patience, acquire(&pool)).await;
        assert!(matches!(waited, Err(sqlx::Error::PoolTimedOut)));
    }
}

//! What the connection's FIFO holds for each command in flight, and how a reply lands there: a
//! slot that a waiting task reads as a future, or a visit event whose reply is only counted (or
//! redirected, on a cluster).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::events::KeptCommand;
use crate::redis::error::RedisError;
use crate::redis::resp::Frame;

/// Where one reply lands. Shared by the connection's FIFO and the task awaiting it; if the task
/// gives up (timeout, client gone) the reply still arrives here and is dropped.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) result: Cell<Option<Result<Frame, RedisError>>>,
    pub(super) waker: Cell<Option<Waker>>,
}

/// The reply to one command, as a future.
pub struct Reply(pub(super) Rc<Slot>);

impl Future for Reply {
    type Output = Result<Frame, RedisError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.0.result.take() {
            Some(result) => Poll::Ready(result),
            None => {
                self.0.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

pub(super) enum Pending {
    Wait(Rc<Slot>),
    /// An event command carrying `visits`: its reply is read and dropped, an error reply counted
    /// against the visits. On a cluster `command` keeps its bytes, to send it again elsewhere if
    /// the node redirects it.
    Event {
        visits: u32,
        command: Option<KeptCommand>,
    },
}

/// The text of an error reply that redirects a cluster command (`-MOVED ...`, `-ASK ...`): the
/// node did not run it. Any other error (`-TRYAGAIN`, `-CLUSTERDOWN`, `-OOM`) is a failure.
pub(super) fn redirection(reply: &[u8]) -> Option<&[u8]> {
    let text = reply.strip_prefix(b"-")?.strip_suffix(b"\r\n")?;
    (text.starts_with(b"MOVED ") || text.starts_with(b"ASK ")).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::redirection;

    #[test]
    fn only_moved_and_ask_redirect_an_event_command() {
        assert_eq!(
            redirection(b"-MOVED 3999 127.0.0.1:6381\r\n"),
            Some(&b"MOVED 3999 127.0.0.1:6381"[..])
        );
        assert_eq!(
            redirection(b"-ASK 12 [::1]:7000\r\n"),
            Some(&b"ASK 12 [::1]:7000"[..])
        );
        for failure in [
            &b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"[..],
            b"-CLUSTERDOWN The cluster is down\r\n",
            b"-MOVEDX 1 a:1\r\n",
            b"+OK\r\n",
        ] {
            assert_eq!(redirection(failure), None);
        }
    }
}

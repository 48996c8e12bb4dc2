//! The slow path: suspend the request, ask Redis on the event loop, answer when the reply (or
//! the deadline) comes.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use nginx_sys::{
    ngx_http_finalize_request, ngx_http_request_t, ngx_http_run_posted_requests, ngx_int_t,
    NGX_DONE, NGX_HTTP_INTERNAL_SERVER_ERROR,
};
use ngx::async_::{sleep, spawn, Task};
use ngx::core::Pool;

use crate::cache::Cached;
use crate::conf::{LocConf, MainConf};
use crate::record::{self, Link};
use crate::redis::resp::Frame;
use crate::redis::RedisError;
use crate::respond::{self, Outcome};
use crate::{ffi, worker};

/// What Redis said about a code, decoded.
pub enum Resolution {
    Link(Link),
    Missing,
    Failed(RedisError),
}

impl Resolution {
    fn outcome(&self) -> Outcome<'_> {
        match self {
            Resolution::Link(link) => Outcome::Link(link),
            Resolution::Missing => Outcome::Missing,
            Resolution::Failed(why) => Outcome::Failed(*why),
        }
    }
}

/// Per-request state, in the request pool. Dropping it (when nginx frees the request) drops
/// the task, which cancels a lookup still in flight.
struct RequestCtx {
    /// True while the handler that spawned the task is still on the stack.
    in_handler: Cell<bool>,
    /// A resolution reached before the handler returned; the handler answers it.
    early: Cell<Option<Resolution>>,
    task: Cell<Option<Task<()>>>,
}

/// Codes longer than this never get here: aliases stop at 64 characters.
const MAX_CODE: usize = shortcode::ALIAS_MAX_LEN;

/// The code, owned by the task without a heap allocation.
struct CodeBuf {
    bytes: [u8; MAX_CODE],
    len: usize,
}

impl CodeBuf {
    fn new(code: &[u8]) -> Option<Self> {
        let mut bytes = [0; MAX_CODE];
        bytes.get_mut(..code.len())?.copy_from_slice(code);
        Some(Self {
            bytes,
            len: code.len(),
        })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Starts the lookup of `code` and returns what the content handler should return.
pub fn start(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    code: &[u8],
) -> ngx_int_t {
    let Some(owned) = CodeBuf::new(code) else {
        return respond::answer(r, mcf, lcf, Outcome::Missing);
    };
    // SAFETY: the request pool is live; the context is dropped by the pool's cleanup.
    let pool = unsafe { Pool::from_ngx_pool(r.pool) };
    let ctx = pool.allocate(RequestCtx {
        in_handler: Cell::new(true),
        early: Cell::new(None),
        task: Cell::new(None),
    });
    if ctx.is_null() {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    // SAFETY: `r.main` is the live main request; the extra reference keeps the request alive
    // until finish() finalizes it (nginx's r->main->count++).
    unsafe { (*r.main).set_count((*r.main).count() + 1) };

    let task = spawn(run(r, ctx, mcf, lcf, owned));
    // SAFETY: `ctx` was just allocated in the live request's pool.
    let ctx = unsafe { &*ctx };
    ctx.in_handler.set(false);
    if let Some(resolution) = ctx.early.take() {
        // ngx 0.5.1 may run the task to completion inside spawn(): answer synchronously.
        // SAFETY: undoes the reference taken above; the request stays alive for the return.
        unsafe { (*r.main).set_count((*r.main).count() - 1) };
        let rc = respond::answer(r, mcf, lcf, resolution.outcome());
        respond::track(r, mcf, lcf, code, rc);
        return rc;
    }
    ctx.task.set(Some(task));
    NGX_DONE as ngx_int_t
}

async fn run(
    r: *mut ngx_http_request_t,
    ctx: *const RequestCtx,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    code: CodeBuf,
) {
    let resolution = CatchUnwind(pin!(resolve(mcf, lcf, &code)))
        .await
        .unwrap_or(Resolution::Failed(RedisError::Protocol));
    // SAFETY: the context lives in the request pool. The request is alive: we hold a reference
    // on it, and if nginx tears it down anyway, the pool cleanup drops this task before the
    // memory goes, so this code never runs on a freed request.
    let ctx = unsafe { &*ctx };
    if ctx.in_handler.get() {
        ctx.early.set(Some(resolution));
        return;
    }
    // Detach first: finalizing may free the request and with it the task handle.
    if let Some(task) = ctx.task.take() {
        task.detach();
    }
    ffi::guard((), || finish(r, mcf, lcf, &code, &resolution));
}

fn finish(
    r: *mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &CodeBuf,
    resolution: &Resolution,
) {
    // SAFETY: see run(); `r` is alive until finalize below releases our reference.
    unsafe {
        let c = (*r).connection;
        let rc = ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
            let rc = respond::answer(&mut *r, mcf, lcf, resolution.outcome());
            respond::track(&*r, mcf, lcf, code.as_bytes(), rc);
            rc
        });
        ngx_http_finalize_request(r, rc);
        // We are outside the request's own event handler: run what finalizing posted, as
        // ngx_http_upstream does.
        ngx_http_run_posted_requests(c);
    }
}

async fn resolve(mcf: &MainConf, lcf: &LocConf, code: &CodeBuf) -> Resolution {
    let reply = match worker::with(mcf, |w| w.lookup(code.as_bytes())) {
        Some(Ok(reply)) => reply,
        Some(Err(why)) => return Resolution::Failed(why),
        None => return Resolution::Failed(RedisError::Unavailable),
    };
    let resolution = match deadline(reply, lcf.timeout_ms()).await {
        Err(()) => Resolution::Failed(RedisError::Timeout),
        Ok(Err(why)) => Resolution::Failed(why),
        Ok(Ok(frame)) => interpret(frame),
    };
    let cached = match &resolution {
        Resolution::Link(link) => Some(Cached::Link(link.clone())),
        Resolution::Missing => Some(Cached::Missing),
        Resolution::Failed(_) => None,
    };
    if let Some(value) = cached {
        let now = crate::handler::now_ms();
        worker::with(mcf, |w| w.remember(code.as_bytes(), value, now));
    }
    resolution
}

/// Reads the reply to `MGET sl:c:<code> sl:meta:projection`. A record is served whatever the
/// marker says; a missing record is only a 404 while the marker proves Redis holds every link.
fn interpret(reply: Frame) -> Resolution {
    let Frame::Array(items) = reply else {
        return Resolution::Failed(match reply {
            Frame::Error(_) => RedisError::ErrorReply,
            _ => RedisError::BadValue,
        });
    };
    match <[Frame; 2]>::try_from(items) {
        Ok([Frame::Bulk(value), _]) => match record::decode(&value) {
            Ok(link) => Resolution::Link(link),
            Err(_) => Resolution::Failed(RedisError::BadValue),
        },
        Ok([Frame::Null, Frame::Null]) => Resolution::Failed(RedisError::Unprojected),
        Ok([Frame::Null, _]) => Resolution::Missing,
        _ => Resolution::Failed(RedisError::BadValue),
    }
}

/// `fut`'s output, or `Err(())` once `ms` milliseconds have passed.
async fn deadline<F: Future + Unpin>(mut fut: F, ms: u64) -> Result<F::Output, ()> {
    let mut timer = pin!(sleep(Duration::from_millis(ms)));
    poll_fn(|cx| {
        if let Poll::Ready(out) = Pin::new(&mut fut).poll(cx) {
            return Poll::Ready(Ok(out));
        }
        timer.as_mut().poll(cx).map(|()| Err(()))
    })
    .await
}

/// A panic inside the lookup becomes an error result instead of unwinding through nginx's
/// event handlers (the task is polled from them).
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(link: Option<&str>, marker: bool) -> Frame {
        let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
        Frame::Array(vec![
            link.map_or(Frame::Null, bulk),
            if marker { bulk("1") } else { Frame::Null },
        ])
    }

    fn failure(resolution: Resolution) -> Option<RedisError> {
        match resolution {
            Resolution::Failed(why) => Some(why),
            _ => None,
        }
    }

    #[test]
    fn a_record_is_served_with_or_without_the_marker() {
        for marker in [true, false] {
            let got = interpret(reply(Some("1|L|302|0|0|https://example.com/"), marker));
            assert!(matches!(
                got,
                Resolution::Link(Link::Live { status: 302, .. })
            ));
        }
    }

    #[test]
    fn a_missing_record_is_unknown_only_while_the_marker_is_there() {
        assert!(matches!(interpret(reply(None, true)), Resolution::Missing));
        assert_eq!(
            failure(interpret(reply(None, false))),
            Some(RedisError::Unprojected)
        );
    }

    #[test]
    fn anything_else_is_a_failure_never_a_404() {
        let bad = [
            Frame::Null,
            Frame::Bulk(b"1|L|302|0|0|https://example.com/".to_vec()),
            Frame::Error(b"ERR wrong".to_vec()),
            Frame::Array(vec![Frame::Null]),
            Frame::Array(vec![Frame::Integer(1), Frame::Null]),
            reply(Some("garbage"), true),
        ];
        for frame in bad {
            assert!(failure(interpret(frame.clone())).is_some(), "{frame:?}");
        }
    }
}

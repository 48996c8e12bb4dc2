//! The slow path: suspend the request, ask Redis on the event loop, answer when the reply (or
//! the deadline) comes. Also the click count of a link with `max_visits`, one script before the
//! answer (idempotent per click: `shortlink_wire::click_count`), whether the record came from the
//! cache or from Redis.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use nginx_sys::{
    ngx_http_finalize_request, ngx_http_request_t, ngx_http_run_posted_requests, ngx_int_t,
    ngx_time, NGX_DONE, NGX_HTTP_INTERNAL_SERVER_ERROR,
};
use ngx::async_::{sleep, spawn, Task};
use ngx::core::Pool;

use crate::cache::{Cached, Hit, Scope};
use crate::conf::{LocConf, MainConf};
use crate::handler::Verdict;
use crate::password::{Client, Submitted};
use crate::redis::cluster::slots::{self, Redirect};
use crate::redis::cluster::Target;
use crate::redis::resp::Frame;
use crate::redis::RedisError;
use crate::request::workspace::HostWorkspace;
use crate::request::{click, signals};
use crate::respond::{self, Outcome};
use crate::scheme::{self, SchemeState};
use crate::status::{Counter, DomainCounts};
use crate::{ffi, worker};
use shortlink_wire::agent::Audience;
use shortlink_wire::keys;
use shortlink_wire::record::{self, Checked, Link};

/// What Redis said about a code, decoded.
pub enum Resolution {
    Link(Link),
    /// A link whose click was counted (`max_visits`) or whose password was given right.
    Checked(Link, Checked),
    /// A link with a card, asked for by a preview fetcher, and the card's value.
    Card(Link, Vec<u8>),
    /// A wrong password (counted).
    WrongPassword,
    /// An attempt over a budget: the seconds until the next one may be made.
    RateLimited(u64),
    Missing,
    Failed(RedisError),
}

/// What the shape check said about a code it sent to Redis.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// The code's check character failed under this module's scheme: looked up because the
    /// projection marker has not shown that scheme to be the sidecar's, or because the location
    /// carries imported codes. A miss is a 404 only while the marker names this scheme.
    pub bad_check: bool,
    /// Who may answer from what the lookup finds: [`Scope::Imported`] when only an imported-codes
    /// location would have looked the code up.
    pub scope: Scope,
    /// The host's workspace: a link of another answers as a missing record (and is cached as
    /// found, for the hosts of its own).
    pub workspace: HostWorkspace,
    /// An imported code ending in punctuation (`promo.`): if it is missing, the code without the
    /// punctuation (`promo`) is served instead, from the cache or by a second lookup.
    pub strip_on_miss: bool,
}

/// What the task does before answering.
pub enum Job {
    /// Read the record (and the marker).
    Lookup(Candidate),
    /// Count a click on this link (a cache hit on a link with `max_visits`), given the click's
    /// verdict: a machine's click reads the count without spending it.
    Count(Link, Audience),
    /// Read this link's card (a cache hit on a link with a card, from a preview fetcher).
    Card(Link),
    /// A password page's form: read the record, count the attempt, check the password. Boxed:
    /// the task carries its job, and plain lookups should not carry a password's room.
    Unlock(Box<Unlock>),
}

pub struct Unlock {
    pub password: Submitted,
    pub client: Client,
    pub record: Record,
}

/// Where an unlock finds the link.
pub enum Record {
    /// A copy of the cached link: only the attempt goes to Redis.
    Cached(Link),
    /// Not cached: read it first.
    Lookup(Candidate),
}

impl Resolution {
    fn outcome(&self) -> Outcome<'_> {
        match self {
            Resolution::Link(link) => Outcome::Link(link),
            Resolution::Checked(link, checked) => Outcome::Checked(link, *checked),
            Resolution::Card(link, card) => Outcome::Card(link, card),
            Resolution::WrongPassword => Outcome::WrongPassword,
            Resolution::RateLimited(wait) => Outcome::RateLimited(*wait),
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
    /// A resolution reached before the handler returned, and the code it answers (the path's,
    /// or without its punctuation after a miss); the handler answers it.
    early: Cell<Option<(Resolution, CodeBuf)>>,
    task: Cell<Option<Task<()>>>,
}

/// Codes longer than this never get here: aliases and imported codes stop at 64 characters.
const MAX_CODE: usize = if shortcode::ALIAS_MAX_LEN > shortcode::IMPORTED_MAX_LEN {
    shortcode::ALIAS_MAX_LEN
} else {
    shortcode::IMPORTED_MAX_LEN
};

/// The code, owned by the task without a heap allocation.
struct CodeBuf {
    bytes: [u8; MAX_CODE],
    len: usize,
    /// The code is the path's without its trailing punctuation (counted once answered).
    recovered: bool,
}

impl CodeBuf {
    fn new(code: &[u8], recovered: bool) -> Option<Self> {
        let mut bytes = [0; MAX_CODE];
        bytes.get_mut(..code.len())?.copy_from_slice(code);
        Some(Self {
            bytes,
            len: code.len(),
            recovered,
        })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Serves the code without its trailing punctuation from now on: a prefix of it.
    fn strip(&mut self) -> bool {
        let Some(len) = crate::handler::stripped_code(self.as_bytes()).map(<[u8]>::len) else {
            return false;
        };
        self.len = len;
        self.recovered = true;
        true
    }
}

/// Starts `job` for `code` and returns what the content handler should return. `recovered`:
/// `code` is the path's without its trailing punctuation.
pub fn start(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    code: &[u8],
    job: Job,
    recovered: bool,
) -> ngx_int_t {
    let Some(owned) = CodeBuf::new(code, recovered) else {
        return respond::answer(r, mcf, lcf, domain, Outcome::Missing).rc;
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

    let task = spawn(run(r, ctx, mcf, lcf, domain, owned, job));
    // SAFETY: `ctx` was just allocated in the live request's pool.
    let ctx = unsafe { &*ctx };
    ctx.in_handler.set(false);
    if let Some((resolution, code)) = ctx.early.take() {
        // ngx 0.5.1 may run the task to completion inside spawn(): answer synchronously.
        // SAFETY: undoes the reference taken above; the request stays alive for the return.
        unsafe { (*r.main).set_count((*r.main).count() - 1) };
        let answered = respond::answer(r, mcf, lcf, domain, resolution.outcome());
        respond::track(r, mcf, lcf, code.as_bytes(), answered);
        respond::count_recovered(r, mcf, lcf, code.recovered, answered);
        return answered.rc;
    }
    ctx.task.set(Some(task));
    NGX_DONE as ngx_int_t
}

async fn run(
    r: *mut ngx_http_request_t,
    ctx: *const RequestCtx,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    mut code: CodeBuf,
    job: Job,
) {
    let resolution = CatchUnwind(pin!(perform(r, mcf, lcf, &mut code, job)))
        .await
        .unwrap_or(Resolution::Failed(RedisError::Protocol));
    // SAFETY: the context lives in the request pool. The request is alive: we hold a reference
    // on it, and if nginx tears it down anyway, the pool cleanup drops this task before the
    // memory goes, so this code never runs on a freed request.
    let ctx = unsafe { &*ctx };
    if ctx.in_handler.get() {
        ctx.early.set(Some((resolution, code)));
        return;
    }
    // Detach first: finalizing may free the request and with it the task handle.
    if let Some(task) = ctx.task.take() {
        task.detach();
    }
    ffi::guard((), || finish(r, mcf, lcf, domain, &code, &resolution));
}

fn finish(
    r: *mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    code: &CodeBuf,
    resolution: &Resolution,
) {
    // SAFETY: see run(); `r` is alive until finalize below releases our reference.
    unsafe {
        let c = (*r).connection;
        let rc = ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
            let answered = respond::answer(&mut *r, mcf, lcf, domain, resolution.outcome());
            respond::track(&mut *r, mcf, lcf, code.as_bytes(), answered);
            respond::count_recovered(&mut *r, mcf, lcf, code.recovered, answered);
            answered.rc
        });
        ngx_http_finalize_request(r, rc);
        // We are outside the request's own event handler: run what finalizing posted, as
        // ngx_http_upstream does.
        ngx_http_run_posted_requests(c);
    }
}

async fn perform(
    r: *mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &mut CodeBuf,
    job: Job,
) -> Resolution {
    let now = ngx_time() as u64;
    let (link, unlocked, verdict) = match job {
        Job::Count(link, verdict) => (link, false, Some(verdict)),
        Job::Card(link) => return card(mcf, lcf, code, link).await,
        Job::Lookup(candidate) => match resolve_or_stripped(mcf, lcf, code, candidate).await {
            Resolution::Link(link) if foreign(&link, candidate.workspace) => {
                return Resolution::Missing;
            }
            // SAFETY: the request outlives its task (see `run`).
            Resolution::Link(link) if click::wants_card(unsafe { &*r }, &link.view()) => {
                return card(mcf, lcf, code, link).await;
            }
            Resolution::Link(link) if link.view().needs_count(now, false) => {
                // SAFETY: the request outlives its task (see `run`); nothing else holds it now.
                let verdict = signals::verdict(unsafe { &mut *r }, mcf, link.workspace()).audience;
                (link, false, Some(verdict))
            }
            other => return other,
        },
        Job::Unlock(form) => {
            let Unlock {
                password,
                client,
                record,
            } = *form;
            let link = match record {
                Record::Cached(link) => link,
                Record::Lookup(candidate) => {
                    match resolve_or_stripped(mcf, lcf, code, candidate).await {
                        // Before the attempt is counted: another workspace's link is not there.
                        Resolution::Link(link) if foreign(&link, candidate.workspace) => {
                            return Resolution::Missing;
                        }
                        Resolution::Link(link) => link,
                        other => return other,
                    }
                }
            };
            // A link that asks no password now (none, not open yet, over) answers the POST as
            // it would a GET.
            let protected = link.view().needs_password(now);
            if protected {
                if let Err(resolution) = unlock(mcf, lcf, code, &link, &password, &client).await {
                    return resolution;
                }
            }
            if !link.view().needs_count(now, protected) {
                let checked = Checked {
                    visits: None,
                    unlocked: protected,
                    verdict: None,
                };
                return Resolution::Checked(link, checked);
            }
            // A right password's click is a person's: spent as ever.
            (link, protected, None)
        }
    };
    // SAFETY: the request outlives its task (see `run`); nothing else holds it now.
    let r = unsafe { &mut *r };
    crate::count::count(r, mcf, lcf, code.as_bytes(), link, unlocked, verdict).await
}

/// [`resolve`], and for an imported code ending in punctuation that is missing (or another
/// workspace's), the code without it: from the cache, else by a second lookup on the same path
/// (its own shape check, deadline and fallback). An exact match always wins. On a Redis failure
/// of either lookup the fallback gets the path's code and applies the same rule.
async fn resolve_or_stripped(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &mut CodeBuf,
    candidate: Candidate,
) -> Resolution {
    let exact = resolve(mcf, lcf, code, candidate).await;
    if !candidate.strip_on_miss {
        return exact;
    }
    let missing = match &exact {
        Resolution::Missing => true,
        Resolution::Link(link) => foreign(link, candidate.workspace),
        _ => false,
    };
    if !(missing && code.strip()) {
        return exact;
    }
    drop(exact);
    // Boxed: every other lookup's task carries no room for a second one.
    Box::pin(resolve_stripped(mcf, lcf, code, candidate)).await
}

/// The second lookup of [`resolve_or_stripped`], for `code` now without its punctuation.
async fn resolve_stripped(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &CodeBuf,
    exact: Candidate,
) -> Resolution {
    let trusts_check = || crate::worker::with(mcf, |w| w.trusts_check()).unwrap_or(false);
    let rejected = match crate::handler::verdict(mcf, lcf, code.as_bytes(), trusts_check) {
        Verdict::Lookup { bad_check, scope } => {
            if let Some(cached) = from_cache(mcf, lcf, code) {
                return cached;
            }
            let stripped = Candidate {
                bad_check,
                scope,
                strip_on_miss: false,
                ..exact
            };
            return resolve(mcf, lcf, code, stripped).await;
        }
        Verdict::CheckReject => Counter::CheckRejects,
        Verdict::NoCode | Verdict::NoScheme => Counter::Invalid,
    };
    crate::status::bump(mcf, rejected);
    Resolution::Missing
}

/// The cached record of a code served after its exact form missed, as a lookup would resolve
/// it (a copy: the task owns what it answers).
fn from_cache(mcf: &MainConf, lcf: &LocConf, code: &CodeBuf) -> Option<Resolution> {
    worker::with(mcf, |w| {
        let (hit, _) = w.cached(code.as_bytes(), ffi::now_ms(), lcf.cache_scope())?;
        Some(match hit? {
            Hit::Link(link) => Resolution::Link(link.to_link()),
            Hit::Missing => Resolution::Missing,
        })
    })
    .flatten()
}

/// Whether `link` belongs to a workspace other than the host's. Links from the cache were
/// judged before their job was made (`handler::answer_from_cache`).
fn foreign(link: &Link, host: HostWorkspace) -> bool {
    !host.admits(link.workspace().map(|name| name.as_bytes()))
}

/// `GET sl:p:<code>`: the card a preview fetcher gets. Without one (deleted meanwhile, Redis
/// failing) the fetcher gets what a click gets: a card never costs a click its answer.
async fn card(mcf: &MainConf, lcf: &LocConf, code: &CodeBuf, link: Link) -> Resolution {
    let reply = match worker::with(mcf, |w| w.card(code.as_bytes())) {
        Some(Ok(reply)) => reply,
        _ => return Resolution::Link(link),
    };
    match deadline(pin!(reply), lcf.timeout_ms()).await {
        Ok(Ok(Frame::Bulk(value))) => Resolution::Card(link, value),
        _ => Resolution::Link(link),
    }
}

/// Checks the password, then has Redis check the attempt against the client's and the link's
/// budgets (one `EVAL`; a wrong password is counted, a right one only checked). `Err` is the
/// resolution to answer instead of the link.
async fn unlock(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &CodeBuf,
    link: &Link,
    password: &Submitted,
    client: &Client,
) -> Result<(), Resolution> {
    let right = link
        .view()
        .extras
        .and_then(|extras| extras.password.as_ref())
        .is_some_and(|expected| expected.matches(password.as_bytes()));
    let client_key = keys::password_client_key(code.as_bytes(), client.as_bytes());
    let link_key = keys::password_link_key(code.as_bytes());
    let reply = match worker::with(mcf, |w| w.count_attempt(&client_key, &link_key, right)) {
        Some(Ok(reply)) => reply,
        Some(Err(why)) => return Err(Resolution::Failed(why)),
        None => return Err(Resolution::Failed(RedisError::Unavailable)),
    };
    match deadline(pin!(reply), lcf.timeout_ms()).await {
        Err(()) => Err(Resolution::Failed(RedisError::Timeout)),
        Ok(Err(why)) => Err(Resolution::Failed(why)),
        Ok(Ok(Frame::Integer(0))) if right => Ok(()),
        Ok(Ok(Frame::Integer(0))) => Err(Resolution::WrongPassword),
        Ok(Ok(Frame::Integer(wait))) if wait > 0 => Err(Resolution::RateLimited(wait as u64)),
        Ok(Ok(Frame::Error(_))) => Err(Resolution::Failed(RedisError::ErrorReply)),
        Ok(Ok(_)) => Err(Resolution::Failed(RedisError::BadValue)),
    }
}

async fn resolve(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &CodeBuf,
    candidate: Candidate,
) -> Resolution {
    let Some(ticket) = worker::with(mcf, |w| w.ticket_for(code.as_bytes())) else {
        return Resolution::Failed(RedisError::Unavailable);
    };
    let sent = std::time::Instant::now();
    let reply = deadline(pin!(ask(mcf, code.as_bytes())), lcf.timeout_ms()).await;
    crate::status::observe_redis(mcf, sent.elapsed());
    let resolution = match reply {
        Err(()) => Resolution::Failed(RedisError::Timeout),
        Ok(Err(why)) => Resolution::Failed(why),
        Ok(Ok(frame)) => {
            let (resolution, marker) = interpret(frame, &mcf.expected_scheme, candidate.bad_check);
            if let Some((state, value)) = marker {
                worker::with(mcf, |w| {
                    w.observe_scheme(state, mcf.expected_scheme.as_str(), &value)
                });
            }
            match resolution {
                // On a replica a link created a moment ago may not be there yet: the fallback
                // (the sidecar, reading SQL) knows. Not cached, so the next request asks again.
                Resolution::Missing if lcf.miss_fallback() => {
                    Resolution::Failed(RedisError::NotYetThere)
                }
                other => other,
            }
        }
    };
    let cached = match &resolution {
        Resolution::Link(link) => Some(Cached::Link(link.clone())),
        Resolution::Missing => Some(Cached::Missing),
        _ => None,
    };
    if let Some(value) = cached {
        let now = ffi::now_ms();
        worker::with(mcf, |w| {
            w.remember(code.as_bytes(), value, now, ticket, candidate.scope)
        });
    }
    resolution
}

/// Redirections a lookup follows before it is a failure: one `-ASK` after a `-MOVED` is the
/// most a reshard asks of a client that has just read the map.
const MAX_REDIRECTS: usize = 3;

/// How often a lookup waiting for the worker's first slot map looks again.
const MAP_WAIT_MS: u64 = 5;

/// Sends the lookup and awaits its reply; on a cluster, follows `-MOVED` (the map learns it)
/// and `-ASK` (map unchanged) to the node named. Other error replies (`-TRYAGAIN`,
/// `-CLUSTERDOWN`) come back as they are: a failure, never a 404. A record missing on a replica
/// is asked of the primary: the replica may not have it yet, and a 404 must be the primary's.
async fn ask(mcf: &MainConf, code: &[u8]) -> Result<Frame, RedisError> {
    // A worker's first lookups may come before its first slot map: they wait for the read
    // (within the lookup's deadline) rather than go to the fallback.
    while worker::with(mcf, |w| w.cluster().is_some_and(|c| c.first_map_pending())).unwrap_or(false)
    {
        sleep(Duration::from_millis(MAP_WAIT_MS)).await;
    }
    let mut target = Target::Read;
    for _ in 0..=MAX_REDIRECTS {
        let reply = worker::with(mcf, |w| w.lookup(code, &target))
            .unwrap_or(Err(RedisError::Unavailable))?;
        let frame = match reply.await {
            Ok(frame) => frame,
            Err(why) => {
                worker::with(mcf, |w| w.cluster().map(|c| c.failed()));
                return Err(why);
            }
        };
        let Frame::Error(error) = &frame else {
            let ask_owner = matches!(target, Target::Read)
                && record_missing(&frame)
                && worker::with(mcf, |w| w.cluster().is_some_and(|c| c.reads_replica(code)))
                    .unwrap_or(false);
            if ask_owner {
                target = Target::Owner;
                continue;
            }
            return Ok(frame);
        };
        target = match slots::redirect(error) {
            Some(Redirect::Moved { slot, node }) => {
                worker::with(mcf, |w| w.cluster().map(|c| c.moved(slot, &node)));
                Target::Node(node)
            }
            Some(Redirect::Ask { node, .. }) => {
                worker::with(mcf, |w| w.cluster().map(|c| c.asked()));
                Target::Ask(node)
            }
            None => {
                worker::with(mcf, |w| w.cluster().map(|c| c.failed()));
                return Ok(frame);
            }
        };
    }
    worker::with(mcf, |w| w.cluster().map(|c| c.failed()));
    Err(RedisError::ErrorReply)
}

/// Whether a lookup's reply holds no record.
fn record_missing(reply: &Frame) -> bool {
    matches!(reply, Frame::Array(items) if items.first() == Some(&Frame::Null))
}

/// Reads the reply to `MGET sl:c:<code> sl:meta:projection`, and the state the marker puts this
/// worker's code scheme in (with the marker's value, for the log). A record is served whatever
/// the marker says; a missing record is only a 404 while the marker proves Redis holds every
/// link, and names this module's scheme (or, from a sidecar that publishes none, the code passed
/// the check character).
pub(crate) fn interpret(
    reply: Frame,
    expected: &scheme::Expected,
    bad_check: bool,
) -> (Resolution, Option<(SchemeState, Vec<u8>)>) {
    let Frame::Array(items) = reply else {
        let why = match reply {
            Frame::Error(_) => RedisError::ErrorReply,
            _ => RedisError::BadValue,
        };
        return (Resolution::Failed(why), None);
    };
    let [record, marker] = match <[Frame; 2]>::try_from(items) {
        Ok(pair) => pair,
        Err(_) => return (Resolution::Failed(RedisError::BadValue), None),
    };
    let marker = match marker {
        Frame::Bulk(value) => Some((scheme::state_of(&value, expected), value)),
        _ => None,
    };
    let state = marker.as_ref().map(|(state, _)| *state);
    let resolution = match (record, state) {
        (Frame::Bulk(value), _) => match record::decode(&value) {
            Ok(link) => Resolution::Link(link),
            Err(_) => Resolution::Failed(RedisError::BadValue),
        },
        (Frame::Null, None) => Resolution::Failed(RedisError::Unprojected),
        (Frame::Null, Some(SchemeState::Matching)) => Resolution::Missing,
        (Frame::Null, Some(SchemeState::Unknown)) if !bad_check => Resolution::Missing,
        (Frame::Null, Some(_)) => Resolution::Failed(RedisError::SchemeMismatch),
        _ => Resolution::Failed(RedisError::BadValue),
    };
    (resolution, marker)
}

/// `fut`'s output, or `Err(())` once `ms` milliseconds have passed.
pub(crate) async fn deadline<F: Future + Unpin>(mut fut: F, ms: u64) -> Result<F::Output, ()> {
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

    const OURS: &str = "v1-L6-c1-0123456789abcdef";

    fn interpret(reply: Frame) -> Resolution {
        interpret_as(reply, false)
    }

    fn interpret_as(reply: Frame, bad_check: bool) -> Resolution {
        super::interpret(reply, &scheme::Expected::new(OURS, true), bad_check).0
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
    fn a_miss_is_a_404_only_under_the_markers_own_scheme() {
        let miss =
            |marker: &str| Frame::Array(vec![Frame::Null, Frame::Bulk(marker.as_bytes().to_vec())]);
        let ours = format!("1700000000000 {OURS}");
        assert!(matches!(interpret(miss(&ours)), Resolution::Missing));
        assert!(matches!(
            interpret_as(miss(&ours), true),
            Resolution::Missing
        ));
        let theirs = "1700000000000 v1-L6-c1-fedcba9876543210";
        for bad_check in [false, true] {
            assert_eq!(
                failure(interpret_as(miss(theirs), bad_check)),
                Some(RedisError::SchemeMismatch)
            );
        }
        // A marker without a fingerprint vouches only for codes that passed the check.
        assert!(matches!(
            interpret(miss("1700000000000")),
            Resolution::Missing
        ));
        assert_eq!(
            failure(interpret_as(miss("1700000000000"), true)),
            Some(RedisError::SchemeMismatch)
        );
        // A record is served under any scheme.
        let hit = Frame::Array(vec![
            Frame::Bulk(b"1|L|302|0|0|https://example.com/".to_vec()),
            Frame::Bulk(theirs.as_bytes().to_vec()),
        ]);
        assert!(matches!(interpret_as(hit, true), Resolution::Link(_)));
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

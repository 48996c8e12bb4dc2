//! Turning a resolved code into nginx's answer. 404, 410 and 503 are returned as plain status
//! codes so that `error_page` can brand them; redirects get `Location` and `Cache-Control`; a
//! link that is not open yet gets wire's "not yet" page.

use nginx_sys::{
    ngx_cached_time, ngx_http_named_location, ngx_http_request_t, ngx_int_t, ngx_pnalloc,
    ngx_str_t, ngx_time, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_MOVED_TEMPORARILY,
    NGX_HTTP_NOT_FOUND, NGX_HTTP_SERVICE_UNAVAILABLE,
};
use ngx::ngx_string;

use crate::cache::CachedLink;
use crate::conf::{LocConf, MainConf};
use crate::events::Visit;
use crate::headers::push_header;
use crate::not_found;
use crate::redis::RedisError;
use crate::request::value::slice_or_empty;
use crate::request::{click, click_id, location, signals};
use crate::status::{bump, Counter, DomainCounter, DomainCounts};
use crate::{page, worker};
use shortlink_wire::agent::Audience;
use shortlink_wire::click_id::location_parts;
use shortlink_wire::click_id::ClickId;
use shortlink_wire::event::OrphanKind;
use shortlink_wire::not_found::Case;
use shortlink_wire::preview::{self, card_page, CARD_STATUS};
use shortlink_wire::record::password::{
    password_page, rate_limited_page, PASSWORD_STATUS, RATE_LIMITED_STATUS, UNLOCKED_STATUS,
};
use shortlink_wire::record::{
    not_yet_page, quarantine_page, Answer, Checked, Chosen, Extras, Link, LinkView, NOT_YET_STATUS,
    QUARANTINE_STATUS,
};
use shortlink_wire::rules;

/// nginx-sys has no constant for it; nginx knows 410 and renders its error page.
const HTTP_GONE: ngx_int_t = 410;

/// What the lookup found, borrowed from the cache or owned by the lookup task.
pub enum Outcome<'a> {
    Link(&'a Link),
    /// A cache hit, read in place in its slot.
    CachedLink(CachedLink<'a>),
    /// A link whose click was counted or whose password was given right.
    Checked(&'a Link, Checked),
    /// A preview fetcher asking for a link with a card: the card's value from `sl:p:<code>`.
    Card(&'a Link, &'a [u8]),
    /// A wrong password (counted).
    WrongPassword,
    /// An attempt over a budget: the seconds until the next one may be made.
    RateLimited(u64),
    Missing,
    Failed(RedisError),
}

/// What [`answer`] returned to nginx, and what the visit records.
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    pub rc: ngx_int_t,
    /// The status a visit records (a redirect, a 410, a card's 200); `None`: not a visit (404,
    /// pages, failures).
    pub visit: Option<u16>,
    /// The click-time rule that chose the target.
    pub chosen: Option<Chosen>,
    /// The id sent to the landing page (a link with a click id parameter).
    pub click_id: Option<ClickId>,
    /// A 404 that is an orphan visit (no link of the host's workspace holds the code).
    pub orphan: Option<OrphanKind>,
    /// The click-time verdict, when the click had a cap to spend (the visit records it).
    pub verdict: Option<Audience>,
}

impl From<ngx_int_t> for Answered {
    /// An answer that is not a visit.
    fn from(rc: ngx_int_t) -> Self {
        Answered {
            rc,
            visit: None,
            chosen: None,
            click_id: None,
            orphan: None,
            verdict: None,
        }
    }
}

/// Answers an outcome. Callers then pass the result to [`track`], outside any borrow of the
/// worker state (a cache hit answers while borrowing the cache).
pub fn answer(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    outcome: Outcome<'_>,
) -> Answered {
    let (view, checked, card) = match outcome {
        Outcome::Link(link) => (link.view(), Checked::default(), None),
        Outcome::CachedLink(link) => (link.view(), Checked::default(), None),
        Outcome::Checked(link, checked) => (link.view(), checked, None),
        Outcome::Card(link, value) => (link.view(), Checked::PREVIEW, preview::decode(value)),
        Outcome::WrongPassword => {
            bump(mcf, Counter::PasswordRejects);
            return page::send(r, PASSWORD_STATUS, &password_page(true)).into();
        }
        Outcome::RateLimited(wait) => {
            bump(mcf, Counter::PasswordRejects);
            if retry_after(r, wait).is_none() {
                return (NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t).into();
            }
            return page::send(r, RATE_LIMITED_STATUS, &rate_limited_page()).into();
        }
        Outcome::Missing => {
            bump(mcf, Counter::NotFound);
            domain.bump(DomainCounter::NotFound);
            let rc = not_found_redirect(r, mcf, lcf, Case::Unknown);
            return Answered {
                orphan: Some(OrphanKind::InvalidShortUrl),
                ..rc.unwrap_or(NGX_HTTP_NOT_FOUND as ngx_int_t).into()
            };
        }
        Outcome::Failed(why) => return failed(r, mcf, lcf, domain, why).into(),
    };
    let now = ngx_time() as u64;
    let country = |ip| mcf.geo.as_ref().and_then(|geo| geo.country(ip));
    // Only a split sticky by cookie reads them: looked up for a link with rules alone.
    let cookies = match view.extras {
        Some(extras) if !extras.rules.is_empty() => click::visitor_cookies(r, mcf),
        _ => &[],
    };
    let answer = view.answer_checked(now, checked, || click::of(r, now, cookies), country);
    match answer {
        Answer::Redirect {
            status,
            target,
            forward_query,
            chosen,
        } => {
            if chosen.is_some() {
                bump(mcf, Counter::RuleRedirects);
            }
            if let Some(card) = card {
                bump(mcf, Counter::PreviewCards);
                let rc = page::send(r, CARD_STATUS, &card_page(&card, target));
                return Answered {
                    rc,
                    visit: Some(CARD_STATUS),
                    chosen,
                    click_id: None,
                    orphan: None,
                    verdict: checked.verdict,
                };
            }
            // After a password form: a redirect the browser follows with a GET.
            let status = if is_post(r) { UNLOCKED_STATUS } else { status };
            let forward_query = forward_query || lcf.forward_query();
            // Made even with `shortlink_track off`: the landing page asked for it.
            let param = view
                .extras
                .and_then(|extras| extras.click_id_param.as_ref());
            let click = param.map(|param| (param, click_id::next()));
            let appended = click.as_ref().map(|(p, id)| (p.as_bytes(), id.as_bytes()));
            let rc = redirect(r, mcf, lcf, domain, status, target, forward_query, appended);
            if let (Some(chosen), Some(extras)) = (chosen, view.extras) {
                if chosen.variant.is_some() && keep_visitor(r, extras, chosen, cookies).is_none() {
                    return (NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t).into();
                }
            }
            Answered {
                rc,
                visit: (rc == status as ngx_int_t).then_some(status),
                chosen,
                click_id: click.map(|(_, id)| id),
                orphan: None,
                verdict: checked.verdict,
            }
        }
        Answer::Gone => {
            bump(mcf, Counter::Gone);
            domain.bump(DomainCounter::Gone);
            // The visit stays a 410 whatever the browser is sent: a click on a link that is over.
            let rc = not_found_redirect(r, mcf, lcf, Case::Expired);
            Answered {
                rc: rc.unwrap_or(HTTP_GONE),
                visit: Some(HTTP_GONE as u16),
                chosen: None,
                click_id: None,
                orphan: None,
                verdict: checked.verdict,
            }
        }
        // No visit: the click reached nothing, and the link's owner learns of the quarantine
        // from its webhook and audit row.
        Answer::Quarantined => page::send(r, QUARANTINE_STATUS, quarantine_page()).into(),
        Answer::NotYet { opens_at } => {
            bump(mcf, Counter::NotYet);
            page::send(r, NOT_YET_STATUS, &not_yet_page(opens_at)).into()
        }
        Answer::Password => {
            bump(mcf, Counter::PasswordPrompts);
            page::send(r, PASSWORD_STATUS, &password_page(false)).into()
        }
        // Callers count clicks that need it before answering (`needs_count`); a click that
        // still asks is not redirected uncounted.
        Answer::Count => failed(r, mcf, lcf, domain, RedisError::BadValue).into(),
    }
}

/// A plain link's redirect (no extras: no rules, lifecycle, password, cap, card or click id):
/// nearly every click's answer, made without [`answer`]'s general steps and what they carry from
/// one to the next. `None`: a link with extras, a POST, or a link that redirects no one now
/// (revoked, expired), which [`answer`] answers.
#[inline]
pub fn plain_redirect(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    view: &LinkView<'_>,
) -> Option<Answered> {
    if view.extras.is_some() || is_post(r) {
        return None;
    }
    // wire's rule for a plain link (inlined: its first branch); neither closure is called
    // without extras.
    let now = ngx_time() as u64;
    let answer = view.answer_checked(now, Checked::default(), || click::of(r, now, &[]), |_| None);
    let Answer::Redirect {
        status,
        target,
        forward_query,
        ..
    } = answer
    else {
        return None;
    };
    let forward_query = forward_query || lcf.forward_query();
    let rc = redirect(r, mcf, lcf, domain, status, target, forward_query, None);
    Some(Answered {
        rc,
        visit: (rc == status as ngx_int_t).then_some(status),
        chosen: None,
        click_id: None,
        orphan: None,
        verdict: None,
    })
}

/// A Redis failure: the fallback location if one is set, else 503.
fn failed(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    why: RedisError,
) -> ngx_int_t {
    domain.bump(DomainCounter::RedisErrors);
    bump(
        mcf,
        match why {
            RedisError::Timeout => Counter::RedisTimeouts,
            RedisError::Unprojected => Counter::ProjectionMissing,
            RedisError::SchemeMismatch => Counter::SchemeMismatch,
            _ => Counter::RedisErrors,
        },
    );
    // The fallback answers GETs: a password form meeting a Redis failure gets a 503.
    match lcf.fallback().filter(|_| !is_post(r)) {
        Some(name) => {
            bump(mcf, Counter::Fallbacks);
            domain.bump(DomainCounter::Fallbacks);
            let mut name = ngx_str_t {
                len: name.len(),
                data: name.as_ptr().cast_mut(),
            };
            // SAFETY: `r` is live; nginx only reads the name, which lives in the location
            // configuration.
            unsafe { ngx_http_named_location(r, &mut name) }
        }
        None => {
            bump(mcf, Counter::Unavailable);
            NGX_HTTP_SERVICE_UNAVAILABLE as ngx_int_t
        }
    }
}

/// With `shortlink_track on`, queues a visit event when [`answer`] gave a redirect, a 410 or a
/// preview card: only a known link answers those (pages before the target are not visits yet;
/// Redis failures are not answered by the module), and an orphan visit for a 404 that is one
/// ([`track_orphan`]). Header values are borrowed from the request and encoded (truncated)
/// straight onto the Redis connection's output or into the spool.
pub fn track(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
    answered: Answered,
) {
    if !lcf.track() {
        return;
    }
    match (answered.visit, answered.orphan) {
        (Some(status), _) => queue(r, mcf, lcf, code, status, answered, None, None),
        (None, Some(kind)) => track_orphan(r, mcf, lcf, kind, NGX_HTTP_NOT_FOUND as u16),
        (None, None) => {}
    }
}

/// With `shortlink_track on` on a location with a `shortlink_pool`, queues an orphan visit of
/// `kind`: the path asked for in place of a code, on the same stream and batch as visits. Without
/// a pool every host is served, and a 404 of a host nobody claims is nobody's to count; a host
/// outside the pool never gets here (the handler rejects it first).
pub fn track_orphan(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    kind: OrphanKind,
    status: u16,
) {
    if !lcf.track() || lcf.pool.is_none() {
        return;
    }
    // SAFETY: `ngx_cached_time` always points at the current cached time slot.
    let now = unsafe { (*ngx_cached_time).sec as u64 };
    if worker::with(mcf, |w| w.orphan_allowed(now)) != Some(true) {
        bump(mcf, Counter::OrphansUnrecorded);
        return;
    }
    let uri = click::str_bytes(&r.unparsed_uri);
    let path = uri.split(|&b| b == b'?').next().unwrap_or(uri);
    queue(
        r,
        mcf,
        lcf,
        path,
        status,
        Answered::from(0),
        Some(kind),
        None,
    );
}

/// [`track`] of a plain redirect ([`plain_redirect`]) answered inside a borrow of the worker's
/// state (a cache hit's): the visit goes into `w`'s batch without a second borrow, which cost
/// a tracked redirect ~40 instructions (the thread-local's lookup, the borrow and the call,
/// bench/results/redirect-tracking-2026-11-29.md). A plain redirect is never a 410 or an orphan
/// visit, so nothing on this path borrows the state again.
#[inline]
pub fn track_plain(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    w: &mut worker::Worker,
    code: &[u8],
    answered: Answered,
) {
    if let (true, Some(status)) = (lcf.track(), answered.visit) {
        debug_assert!(answered.orphan.is_none() && status != HTTP_GONE as u16);
        queue(r, mcf, lcf, code, status, answered, None, Some(w));
    }
}

/// Queues one event: a visit of `code`, or with `orphan` an orphan visit of the path `code`,
/// into `held`'s batch when the caller holds the worker's state, else through [`worker::with`].
/// An orphan visit and a 410 (which the sidecar files as one) carry the host's workspace as
/// nginx maps it, so that whose they are never depends on a sidecar's view of the hosts; a
/// redirect's visit does not need it (its link names its workspace) and never pays for it.
#[inline]
#[allow(clippy::too_many_arguments)]
fn queue(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
    status: u16,
    answered: Answered,
    orphan: Option<OrphanKind>,
    held: Option<&mut worker::Worker>,
) {
    use click::{header, str_bytes};
    // SAFETY: `ngx_cached_time` always points at the current cached time slot.
    let time_ms = unsafe {
        let t = &*ngx_cached_time;
        t.sec as u64 * 1000 + t.msec as u64
    };
    let host_workspace = (orphan.is_some() || status == HTTP_GONE as u16)
        .then(|| crate::handler::request_workspace(r, mcf, lcf));
    let workspace = host_workspace.as_ref().map_or(&[][..], |w| w.recorded());
    let signals = match answered.verdict {
        Some(verdict) => signals::of(r, mcf).with_verdict(verdict),
        None => signals::of(r, mcf),
    };
    let ip = click::client_text(r);
    let h = &r.headers_in;
    let visit = Visit {
        code,
        time_ms,
        status,
        ip,
        ua: header(h.user_agent),
        referer: header(h.referer),
        host: str_bytes(&h.server),
        lang: header(h.accept_language),
        chosen: answered.chosen,
        click_id: answered.click_id,
        orphan,
        workspace,
        signals,
    };
    match held {
        Some(w) => w.track(&visit),
        None => {
            worker::with(mcf, |w| w.track(&visit));
        }
    }
}

/// Counts a request answered as the code its path held before trailing punctuation
/// (`recovered`), if the answer is one a known link gives (a redirect, 410 or card: a tap
/// saved), and records it as an orphan visit of kind `recovered` beside its visit; a recovered
/// path that still finds no link is an ordinary 404 (an orphan visit of the code's kind).
#[inline]
pub fn count_recovered(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    recovered: bool,
    answered: Answered,
) {
    if let (true, Some(status)) = (recovered, answered.visit) {
        bump(mcf, Counter::Recovered);
        track_orphan(r, mcf, lcf, OrphanKind::Recovered, status);
    }
}

/// The not-found redirect (`crate::not_found`) of `case` on the request's host, sent: a 302
/// to the URL, with `Cache-Control` as other temporary redirects, the query never forwarded (it
/// was meant for a link that is not there). `None`: no setting applies, today's answer stands.
/// With no setting anywhere this is one thread-local load.
#[inline]
pub fn not_found_redirect(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    case: Case,
) -> Option<ngx_int_t> {
    if !not_found::any() {
        return None;
    }
    redirect_as_set(r, mcf, lcf, case)
}

/// [`not_found_redirect`] once some setting exists; out of line, so that a 404 while none does
/// carries none of it.
#[inline(never)]
fn redirect_as_set(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    case: Case,
) -> Option<ngx_int_t> {
    // SAFETY: it points into request memory (or is empty) for the life of the request.
    let host = unsafe { slice_or_empty(r.headers_in.server.data, r.headers_in.server.len) };
    let url = not_found::with_table(|table| {
        if table.is_empty() {
            return None;
        }
        let url = table.choose(
            host,
            || crate::handler::request_workspace(r, mcf, lcf),
            case,
        )?;
        pool_copy(r, &[url.as_bytes()])
    })??;
    let rc = send_temporary(r, lcf, url);
    (rc != NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t)
        .then(|| bump(mcf, Counter::NotFoundRedirects));
    Some(rc)
}

/// A 302 to `location` (in the request pool) with the location's temporary `Cache-Control`.
fn send_temporary(r: &mut ngx_http_request_t, lcf: &LocConf, location: ngx_str_t) -> ngx_int_t {
    let error = NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    let Some(header) = push_header(r, ngx_string!("Location"), location) else {
        return error;
    };
    r.headers_out.location = header;
    if let Some(cc) = lcf.cache_control().filter(|cc| !cc.temporary.is_empty()) {
        // The value lives in the location configuration; the header filter copies it.
        let value = ngx_str_t {
            len: cc.temporary.len(),
            data: cc.temporary.as_ptr().cast_mut(),
        };
        if push_header(r, ngx_string!("Cache-Control"), value).is_none() {
            return error;
        }
    }
    NGX_HTTP_MOVED_TEMPORARILY as ngx_int_t
}

fn is_post(r: &ngx_http_request_t) -> bool {
    r.method & nginx_sys::NGX_HTTP_POST as usize != 0
}

/// `click`: the click id parameter's name and the id, appended after any forwarded query.
/// Always inlined: a cached plain redirect then passes its eight arguments in no frame
/// (issue 82).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn redirect(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    status: u16,
    target: &[u8],
    forward_query: bool,
    click: Option<(&[u8], &[u8])>,
) -> ngx_int_t {
    let error = NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    let query = forward_query
        .then(|| r.args.as_bytes())
        .filter(|query| !query.is_empty());
    // A plain link's `Location` is its target: one copy, no pieces to put together.
    let value = match (query, click) {
        (None, None) => pool_copy_one(r, target),
        _ => pool_copy(r, &location_parts(target, query, click)),
    };
    let Some(value) = value else {
        return error;
    };
    let Some(location) = push_header(r, ngx_string!("Location"), value) else {
        return error;
    };
    r.headers_out.location = location;

    if let Some(cc) = lcf.cache_control() {
        let value = if matches!(status, 301 | 308) {
            &cc.permanent
        } else {
            &cc.temporary
        };
        if !value.is_empty() {
            // The value lives in the location configuration; the header filter copies it.
            let value = ngx_str_t {
                len: value.len(),
                data: value.as_ptr().cast_mut(),
            };
            if push_header(r, ngx_string!("Cache-Control"), value).is_none() {
                return error;
            }
        }
    }
    bump(mcf, Counter::Redirects);
    domain.bump(DomainCounter::Redirects);
    status as ngx_int_t
}

/// `bytes` in the request pool; `None`: out of memory. [`pool_copy`] of one part, without its
/// walk over parts (issue 82: a plain redirect's `Location`).
#[inline]
fn pool_copy_one(r: &ngx_http_request_t, bytes: &[u8]) -> Option<ngx_str_t> {
    let len = bytes.len();
    // SAFETY: the request pool outlives the response headers.
    let data = unsafe { ngx_pnalloc(r.pool, len) }.cast::<u8>();
    if data.is_null() {
        return None;
    }
    // SAFETY: `data` has room for `len` bytes, and pool memory never overlaps `bytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, len) };
    Some(ngx_str_t { len, data })
}

/// `parts` one after the other in the request pool; `None`: out of memory.
fn pool_copy(r: &ngx_http_request_t, parts: &[&[u8]]) -> Option<ngx_str_t> {
    let len = location::len(parts);
    // SAFETY: the request pool outlives the response headers.
    let data = unsafe { ngx_pnalloc(r.pool, len) }.cast::<u8>();
    if data.is_null() {
        return None;
    }
    let mut at = 0;
    // Most pieces are empty (no query, no id): a copy of none is a call of none.
    for part in parts.iter().filter(|part| !part.is_empty()) {
        // SAFETY: `data` has room for `len` bytes, the sum of the parts' lengths.
        unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), data.add(at), part.len()) };
        at += part.len();
    }
    Some(ngx_str_t { len, data })
}

/// A split that follows the visitor cookie, answering a click that brought none: the cookie,
/// holding the number the click was answered by (`wire::rules::cookie_to_set`). `None`: out of
/// memory.
fn keep_visitor(
    r: &mut ngx_http_request_t,
    extras: &Extras,
    chosen: Chosen,
    cookies: &[u8],
) -> Option<()> {
    let recipient = extras.recipient.is_some();
    let Some(visitor) =
        rules::cookie_to_set(&extras.rules, chosen.rule, recipient, cookies, || {
            click::visitor(r)
        })
    else {
        return Some(());
    };
    // SAFETY: the connection of a live request is live.
    let secure = unsafe { !(*r.connection).ssl.is_null() };
    let cookie = rules::set_cookie(visitor, secure);
    let value = pool_copy(r, &[cookie.as_bytes()])?;
    push_header(r, ngx_string!("Set-Cookie"), value).map(|_| ())
}

/// `Retry-After: <seconds>`, its value in the request pool.
fn retry_after(r: &mut ngx_http_request_t, seconds: u64) -> Option<()> {
    let value = pool_copy(r, &[seconds.to_string().as_bytes()])?;
    push_header(r, ngx_string!("Retry-After"), value).map(|_| ())
}

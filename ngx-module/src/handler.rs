//! The content handler of `shortlink on` locations: every check that needs no lookup, then the
//! cache, then (rarely) Redis.

use nginx_sys::{
    ngx_http_finalize_request, ngx_http_request_t, ngx_int_t, ngx_time, NGX_HTTP_GET,
    NGX_HTTP_HEAD, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_NOT_ALLOWED, NGX_HTTP_NOT_FOUND,
    NGX_HTTP_POST,
};
use ngx::core::Pool;
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf};
use shortcode::Shape;

use crate::app_links::AppFile;
use crate::cache::{Hit, Scope};
use crate::conf::{Dynamic, LocConf, MainConf, PoolSource, WorkspaceSource};
use crate::ffi::now_ms;
use crate::lookup::{Candidate, Job, Record, Unlock};
use crate::password::{self, Client, Submitted};
use crate::request::candidate::{self, CodeCase};
use crate::request::host::Membership;
use crate::request::host_workspaces::HostWorkspaces;
use crate::request::value::{self, slice_or_empty};
use crate::request::workspace::{self, HostWorkspace};
use crate::request::{click, host, signals};
use crate::respond::{self, Answered, Outcome};
use crate::status::{bump, Counter, DomainCounter, DomainCounts};
use crate::{ffi, lookup, page, variables, worker, ShortlinkModule};
use shortlink_wire::event::OrphanKind;
use shortlink_wire::not_found::Case;
use shortlink_wire::path as code_path;
use shortlink_wire::trailing;

pub extern "C" fn redirect_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls content handlers with a live request.
        answer(unsafe { &mut *r })
    })
}

/// A request of a `shortlink on` location, as its content handler or from the end of its
/// rewrite phase (`crate::phase`). The caller guards against panics.
#[inline]
pub(crate) fn answer(r: &mut ngx_http_request_t) -> ngx_int_t {
    // A password page's form: the body first, then the code as for a GET.
    if r.method & NGX_HTTP_POST as usize != 0 {
        return password::read_form(r, Some(form_read));
    }
    handle(r, None)
}

/// nginx's body handler for a password form: the body is in, so the code is handled as for
/// a GET, with the submitted password.
extern "C" fn form_read(r: *mut ngx_http_request_t) {
    let rc = ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls the body handler with the live request whose body it read.
        let r = unsafe { &mut *r };
        match password::submitted(r) {
            Ok(password) => handle(r, Some(&password)),
            Err(rc) => rc,
        }
    });
    // SAFETY: releases the reference the body read took; `rc` may be NGX_DONE when a lookup
    // task holds its own reference and finalizes later.
    unsafe { ngx_http_finalize_request(r, rc) };
}

/// Answers a GET or HEAD, or (with the submitted `password`) a POST.
fn handle(r: &mut ngx_http_request_t, password: Option<&Submitted>) -> ngx_int_t {
    let (Some(mcf), Some(lcf)) = (
        ShortlinkModule::main_conf(r),
        ShortlinkModule::location_conf(r),
    ) else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    bump(mcf, Counter::Requests);
    // Decided first so that every request counts under its domain (or "other", keeping the
    // per-domain table to pool hosts).
    let (allowed, domain) = host_check(r, mcf, lcf);
    domain.bump(DomainCounter::Requests);
    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD | NGX_HTTP_POST) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    // No ngx_http_discard_request_body here: a status answer is finalized by nginx's special
    // response handler, which discards the body (as for `return`); pages discard it themselves.
    if !allowed {
        bump(mcf, Counter::HostRejects);
        return not_found(mcf, domain);
    }
    let Some(route) = &lcf.route else {
        respond::track_orphan(
            r,
            mcf,
            lcf,
            OrphanKind::Regular404,
            NGX_HTTP_NOT_FOUND as u16,
        );
        return not_found(mcf, domain);
    };
    // SAFETY: `unparsed_uri` points into request memory that lives as long as `r`; the slice
    // is not kept past the request (the lookup copies the code).
    let raw_uri: &[u8] =
        unsafe { std::slice::from_raw_parts(r.unparsed_uri.data, r.unparsed_uri.len) };
    let Some(code) = code_path::extract(raw_uri, route, lcf.trailing_slash()) else {
        return recover(r, mcf, lcf, domain, raw_uri, password);
    };
    if lcf.code_case() == CodeCase::Lower {
        return serve(r, mcf, lcf, domain, raw_uri, code, password, Found::Exact);
    }
    // Not through `serve`: a cached plain redirect (nearly every click) returns from here,
    // through no frame but the cache's (issue 82).
    looked_up(r, mcf, lcf, domain, raw_uri, code, password, Found::Exact)
}

/// How the code being served came out of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The path's code as it is.
    Exact,
    /// The path without the punctuation a text glued to it (`shortlink_wire::trailing`): tried
    /// once, never stripped again.
    Stripped,
}

/// A path that is no code as it is: answered as the code it holds without its trailing
/// punctuation (`/abc1234.`, `/abc1234%E3%80%82`), else as today (an app-link file or 404).
/// Reached only once the path failed to be a code, so a redirect never pays for it.
fn recover(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    raw_uri: &[u8],
    password: Option<&Submitted>,
) -> ngx_int_t {
    let path = raw_uri.split(|&b| b == b'?').next().unwrap_or(raw_uri);
    let stripped = trailing::strip(path).and_then(|path| {
        let route = lcf.route.as_ref()?;
        code_path::extract(path, route, lcf.trailing_slash())
    });
    match stripped {
        Some(code) => serve(
            r,
            mcf,
            lcf,
            domain,
            raw_uri,
            code,
            password,
            Found::Stripped,
        ),
        None => not_a_code(r, mcf, lcf, domain, raw_uri),
    }
}

/// Answers `code`: from the cache, else by the shape check, else from Redis.
#[allow(clippy::too_many_arguments)]
fn serve(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    raw_uri: &[u8],
    code: &[u8],
    password: Option<&Submitted>,
    found: Found,
) -> ngx_int_t {
    let code = match lcf.code_case() {
        CodeCase::Exact => code,
        CodeCase::Lower => match lowered(r, mcf, code) {
            Some(code) => code,
            None => return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t,
        },
    };
    looked_up(r, mcf, lcf, domain, raw_uri, code, password, found)
}

/// Answers `code` as it will be looked up: from the cache, else [`after_cache`]. Always inlined,
/// so that the handler's call for a path's own code keeps the cache's answer in its own frame.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn looked_up(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    raw_uri: &[u8],
    code: &[u8],
    password: Option<&Submitted>,
    found: Found,
) -> ngx_int_t {
    let mut cached = FromCache::Miss {
        trusts_check: false,
    };
    match from_cache(r, mcf, lcf, domain, code, password, found, &mut cached) {
        Some(rc) => rc,
        None => after_cache(r, mcf, lcf, domain, raw_uri, code, password, found, cached),
    }
}

/// The first step of [`looked_up`]: `$shortlink_code`, then the cache. Inlined, so that a plain
/// redirect's answer returns through no frame of `serve`'s or [`after_cache`]'s.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn from_cache<'a>(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    code: &'a [u8],
    password: Option<&Submitted>,
    found: Found,
    slow: &mut FromCache<'a>,
) -> Option<ngx_int_t> {
    // What is looked up is what the fallback gets: lower-cased, without the trailing slash.
    // An imported code that may carry glued punctuation goes to the fallback whole: it applies
    // the same rule (exact code first) to it.
    // SAFETY: `code` is a slice of `r.unparsed_uri` or of the request pool, both living as
    // long as the request.
    unsafe { variables::set_code(r, mcf, code) };
    // Cached codes passed the shape check when they were stored (the cache belongs to this
    // configuration): a hit skips the keyed check character, a bogus code costs one probe.
    // Codes only imported-codes locations look up are cached for those locations only.
    // A POST is answered from the cache too: only a link that asks its password goes to Redis
    // (attempts are counted there), or anyone could force a lookup per request.
    answer_from_cache(r, mcf, lcf, domain, code, password, found, slow)
}

/// The rest of [`looked_up`] once the cache has answered `cached`: the hit's answer, else the shape
/// check, else Redis.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn after_cache(
    r: &mut ngx_http_request_t,
    mcf: &'static MainConf,
    lcf: &'static LocConf,
    domain: DomainCounts,
    raw_uri: &[u8],
    code: &[u8],
    password: Option<&Submitted>,
    found: Found,
    cached: FromCache<'_>,
) -> ngx_int_t {
    let recovered = found == Found::Stripped;
    let trusts_check = match cached {
        FromCache::Answered { answered } => {
            bump(mcf, Counter::CacheHits);
            domain.bump(DomainCounter::CacheHits);
            respond::track(r, mcf, lcf, code, answered);
            respond::count_recovered(r, mcf, lcf, recovered, answered);
            return answered.rc;
        }
        FromCache::Later(job) => {
            bump(mcf, Counter::CacheHits);
            domain.bump(DomainCounter::CacheHits);
            return lookup::start(r, mcf, lcf, domain, code, job, recovered);
        }
        FromCache::MissingExact(stripped) => {
            bump(mcf, Counter::CacheHits);
            domain.bump(DomainCounter::CacheHits);
            return serve(
                r,
                mcf,
                lcf,
                domain,
                raw_uri,
                stripped,
                password,
                Found::Stripped,
            );
        }
        FromCache::Miss { trusts_check } => trusts_check,
    };
    let (bad_check, scope) = match verdict(mcf, lcf, code, || trusts_check) {
        Verdict::Lookup { bad_check, scope } => (bad_check, scope),
        Verdict::CheckReject => return check_reject(r, mcf, lcf, domain),
        Verdict::NoCode if found == Found::Exact => {
            return recover(r, mcf, lcf, domain, raw_uri, password)
        }
        Verdict::NoCode => return not_a_code(r, mcf, lcf, domain, raw_uri),
        Verdict::NoScheme => return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t,
    };
    let candidate = Candidate {
        bad_check,
        scope,
        workspace: worker::with(mcf, |w| host_workspace(r, lcf, Some(&mut w.workspaces)))
            .unwrap_or_else(|| host_workspace(r, lcf, None)),
        // Only an imported code can end in punctuation (`.`) and still be a code.
        strip_on_miss: found == Found::Exact
            && scope == Scope::Imported
            && stripped_code(code).is_some(),
    };
    if let Some(password) = password {
        let job = Job::Unlock(Box::new(Unlock {
            password: password.clone(),
            client: Client::of(r),
            record: Record::Lookup(candidate),
        }));
        return lookup::start(r, mcf, lcf, domain, code, job, recovered);
    }
    bump(mcf, Counter::CacheMisses);
    if scope == Scope::Imported {
        bump(mcf, Counter::ImportedLookups);
    }
    lookup::start(r, mcf, lcf, domain, code, Job::Lookup(candidate), recovered)
}

/// What the shape check makes of a code the cache did not answer.
pub(crate) enum Verdict {
    /// Worth a lookup: the parts of its [`Candidate`] the shape decides.
    Lookup { bad_check: bool, scope: Scope },
    /// A wrong check character while the projection marker vouches for this module's scheme.
    CheckReject,
    /// No shape a code of this location can have.
    NoCode,
    /// The configuration has no code scheme.
    NoScheme,
}

/// Decides from `code`'s shape alone whether it is looked up; the handler's table, and the
/// lookup task's for a code stripped after an exact miss. `trusts_check`: whether the worker
/// trusts the check character ([`worker::Worker::trusts_check`]), asked of a bad one only.
pub(crate) fn verdict(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
    trusts_check: impl FnOnce() -> bool,
) -> Verdict {
    let Some(scheme) = &mcf.scheme else {
        return Verdict::NoScheme;
    };
    let shape = scheme.shape(code);
    // Tested only once our shapes have failed: a plain redirect never pays for it.
    let imported = |code| lcf.imported_codes() && candidate::imported_lookup(shape, code);
    let (bad_check, scope) = match shape {
        Shape::Generated | Shape::Alias => (false, Scope::All),
        Shape::BadCheck if imported(code) => (true, Scope::Imported),
        // Only while the projection marker names this module's scheme: under another secret
        // valid codes fail the check (crate::scheme).
        Shape::BadCheck if trusts_check() => {
            return Verdict::CheckReject;
        }
        Shape::BadCheck => (true, Scope::All),
        Shape::Invalid if imported(code) => (false, Scope::Imported),
        Shape::Invalid => return Verdict::NoCode,
    };
    Verdict::Lookup { bad_check, scope }
}

/// `code` without its trailing punctuation, if it has some and something is left.
pub(crate) fn stripped_code(code: &[u8]) -> Option<&[u8]> {
    trailing::strip(code).filter(|code| !code.is_empty())
}

/// `code` as a `shortlink_code_case lower` location looks it up: lower-cased in the request
/// pool (it becomes `$shortlink_code`, which must outlive the handler), or as it is when
/// [`candidate::lowers`] says so. `None`: out of memory. Kept out of line: only `lower`
/// locations call it, and inlined it would grow every request's stack frame.
#[inline(never)]
fn lowered<'a>(r: &ngx_http_request_t, mcf: &MainConf, code: &'a [u8]) -> Option<&'a [u8]> {
    let Some(scheme) = &mcf.scheme else {
        return Some(code);
    };
    if !candidate::lowers(scheme, code) {
        return Some(code);
    }
    // SAFETY: the request's pool is live for the rest of the request.
    let pool = unsafe { Pool::from_ngx_pool(r.pool) };
    let data = pool.alloc_unaligned(code.len()).cast::<u8>();
    if data.is_null() {
        return None;
    }
    // SAFETY: `data` is `code.len()` bytes of the request pool, ours alone, freed with the
    // request (which outlives every use of the code: `$shortlink_code`, the lookup's copy).
    let copy = unsafe { std::slice::from_raw_parts_mut(data, code.len()) };
    copy.copy_from_slice(code);
    copy.make_ascii_lowercase();
    Some(copy)
}

/// A path no code can be: one of the app-link files of the host's workspace, else 404. Asked
/// only once the path failed to be a code, so a redirect never pays for it; the host's workspace
/// only for the two app-link paths.
fn not_a_code(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    raw_uri: &[u8],
) -> ngx_int_t {
    let asked = AppFile::asked(raw_uri).filter(|_| !mcf.app_links.is_empty());
    if let Some(asked) = asked {
        let host = worker::with(mcf, |w| host_workspace(r, lcf, Some(&mut w.workspaces)))
            .unwrap_or_else(|| host_workspace(r, lcf, None));
        if let Some(file) = mcf.app_links.file(host, asked) {
            if r.method & NGX_HTTP_POST as usize != 0 {
                return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
            }
            return page::send_as(r, &page::CONFIG_JSON, 200, file);
        }
    }
    bump(mcf, Counter::Invalid);
    let (case, kind) = if is_root(raw_uri, lcf) {
        (Case::Root, OrphanKind::BaseUrl)
    } else {
        (Case::Unknown, OrphanKind::Regular404)
    };
    unknown(r, mcf, lcf, domain, case, kind)
}

/// A code failing its check character: a mistyped code, as an unknown one.
fn check_reject(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
) -> ngx_int_t {
    bump(mcf, Counter::CheckRejects);
    unknown(
        r,
        mcf,
        lcf,
        domain,
        Case::Unknown,
        OrphanKind::InvalidShortUrl,
    )
}

/// Whether the path is the bare root: `/`, or the location's prefix alone.
fn is_root(raw_uri: &[u8], lcf: &LocConf) -> bool {
    let path = raw_uri.split(|&b| b == b'?').next().unwrap_or(raw_uri);
    path == b"/"
        || matches!(&lcf.route, Some(code_path::Route::Prefix(prefix)) if path == prefix.as_slice())
}

/// A 404 on a pool host: an orphan visit of `kind` ([`respond::track_orphan`]), answered with
/// the not-found redirect of `case` if one is set (`crate::not_found`).
fn unknown(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    case: Case,
    kind: OrphanKind,
) -> ngx_int_t {
    respond::track_orphan(r, mcf, lcf, kind, NGX_HTTP_NOT_FOUND as u16);
    let rc = not_found(mcf, domain);
    respond::not_found_redirect(r, mcf, lcf, case).unwrap_or(rc)
}

fn not_found(mcf: &MainConf, domain: DomainCounts) -> ngx_int_t {
    bump(mcf, Counter::NotFound);
    domain.bump(DomainCounter::NotFound);
    NGX_HTTP_NOT_FOUND as ngx_int_t
}

/// The workspace of the request's host, from this worker's table when it is free (a cache hit
/// answers while it is borrowed: then from nginx's `map`).
pub(crate) fn request_workspace(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
) -> HostWorkspace {
    worker::with(mcf, |w| host_workspace(r, lcf, Some(&mut w.workspaces)))
        .unwrap_or_else(|| host_workspace(r, lcf, None))
}

/// Whether the request's host is served (without `shortlink_pool` every host is), and where it
/// counts per domain: under its host if served, else under "other".
fn host_check(r: &mut ngx_http_request_t, mcf: &MainConf, lcf: &LocConf) -> (bool, DomainCounts) {
    // nginx has already lower-cased the host and dropped the port in `headers_in.server`.
    // SAFETY: it points into request memory (or is empty) for the life of the request.
    let host = unsafe { slice_or_empty(r.headers_in.server.data, r.headers_in.server.len) };
    let pool: &[u8] = match &lcf.pool {
        None => return (true, DomainCounts::of_host(mcf, lcf, host, None)),
        Some(PoolSource::Fixed(set)) => return counted(mcf, lcf, host, set.membership(host)),
        Some(PoolSource::Dynamic(source)) => match value::of(r, *source) {
            Some(pool) => pool,
            None => return (false, DomainCounts::other(mcf, lcf)),
        },
    };
    worker::with(mcf, |w| {
        counted(mcf, lcf, host, w.pools.membership(pool, host))
    })
    .unwrap_or_else(|| {
        let membership = match host::in_pool(host, pool) {
            true => Membership::Inside,
            false => Membership::Outside,
        };
        counted(mcf, lcf, host, membership)
    })
}

/// Inlined into the pool check: as a call, its entry, exit and two-word result were ~30 of a
/// cached redirect's instructions (issue 82).
#[inline(always)]
fn counted(
    mcf: &MainConf,
    lcf: &LocConf,
    host: &[u8],
    membership: Membership<'_>,
) -> (bool, DomainCounts) {
    match membership {
        Membership::Outside => (false, DomainCounts::other(mcf, lcf)),
        Membership::Listed(memo) => (true, DomainCounts::of_host(mcf, lcf, host, Some(memo))),
        Membership::Inside => (true, DomainCounts::of_host(mcf, lcf, host, None)),
    }
}

/// The workspace of the request's host (`shortlink_workspace`). Asked only once a code is known
/// to be a link or is sent to Redis: a 404 the cache or the shape check settles (a code
/// scanner's) never pays for it. A variable's value is evaluated once per host and worker and
/// then read from `hosts` (the value depends on the host only: request::host_workspaces); `None`:
/// evaluated each time (the worker's state is in use further up the stack).
#[inline]
fn host_workspace(
    r: &mut ngx_http_request_t,
    lcf: &LocConf,
    hosts: Option<&mut HostWorkspaces>,
) -> HostWorkspace {
    match lcf.workspace {
        None => HostWorkspace::Unchecked,
        Some(WorkspaceSource::Fixed(name)) => HostWorkspace::of_name(name),
        Some(WorkspaceSource::Dynamic(source)) => host_workspace_of(r, source, hosts),
    }
}

/// [`host_workspace`] from a variable; out of line, so that a location with no variable carries
/// none of it.
#[inline(never)]
fn host_workspace_of(
    r: &mut ngx_http_request_t,
    source: Dynamic,
    hosts: Option<&mut HostWorkspaces>,
) -> HostWorkspace {
    // SAFETY: it points into request memory (or is empty) for the life of the request.
    let host = unsafe { slice_or_empty(r.headers_in.server.data, r.headers_in.server.len) };
    let mut evaluate = || {
        let value = value::of(r, source).unwrap_or_default();
        let workspace = HostWorkspace::of_value(value);
        if workspace == HostWorkspace::Nothing {
            workspace::warn_once(value, host);
        }
        workspace
    };
    match hosts {
        Some(hosts) => hosts.get_or_evaluate(source.id(), host, evaluate),
        None => evaluate(),
    }
}

/// `code` without its trailing punctuation, when a miss of the exact code is followed by a try
/// of it: on imported-codes locations only, where a code may end in `.` (elsewhere such a path is
/// stripped before any lookup).
fn recoverable<'a>(lcf: &LocConf, code: &'a [u8], found: Found) -> Option<&'a [u8]> {
    if found == Found::Stripped || !lcf.imported_codes() {
        return None;
    }
    stripped_code(code)
}

/// What a cache hit gives: the answer, or a link that needs Redis once more first.
enum FromCache<'a> {
    /// Answered without its visit queued (that borrows the worker's state again).
    Answered { answered: Answered },
    /// Count the click (links with `max_visits`), or read the card (a preview fetcher on a link
    /// with one), on a copy of the cached link: their one allocation per click.
    Later(Job),
    /// An imported code ending in punctuation (`promo.`) known missing: serve the code without
    /// it (`promo`), as a lookup would after a miss.
    MissingExact(&'a [u8]),
    /// Not in the cache (or no cache to ask): with whether the worker trusts the check
    /// character, read in the same borrow of its state for the shape check that comes next.
    Miss { trusts_check: bool },
}

/// `password`: a POST's form. A cached link that asks its password is unlocked on a copy of it
/// (Redis counts the attempt); any other is answered as a GET is, without its card. A link of
/// another workspace than the host's is a cached miss, whatever the method: judged first.
///
/// A plain link's GET (nearly every click) is answered, tracked and counted here, in the
/// cache's borrow, and hands back nginx's code alone (`Some`); any other outcome is written to
/// `slow`, every other hit made by [`from_hit`], out of line, so that this path carries none of
/// its frame (issue 82: the closure's 3.6 KiB frame and its 56-byte result moved by value were
/// ~100 instructions of a hot redirect).
#[allow(clippy::too_many_arguments)]
fn answer_from_cache<'a>(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    code: &'a [u8],
    password: Option<&Submitted>,
    found: Found,
    slow: &mut FromCache<'a>,
) -> Option<ngx_int_t> {
    let now = now_ms();
    worker::with(mcf, |w| {
        let trusts_check = w.trusts_check();
        let Some((Some(hit), hosts)) = w.cached(code, now, lcf.cache_scope()) else {
            *slow = FromCache::Miss { trusts_check };
            return None;
        };
        if let (Hit::Link(link), None, Found::Exact) = (hit, password, found) {
            let plain = host_workspace(r, lcf, Some(&mut *hosts))
                .admits(link.workspace())
                .then(|| respond::plain_redirect(r, mcf, lcf, domain, &link.view()))
                .flatten();
            if let Some(answered) = plain {
                respond::track_plain(r, mcf, lcf, w, code, answered);
                bump(mcf, Counter::CacheHits);
                domain.bump(DomainCounter::CacheHits);
                return Some(answered.rc);
            }
        }
        *slow = from_hit(r, mcf, lcf, domain, code, password, found, hit, hosts);
        None
    })
    // `None` from `with`: the worker's state is in use further up the stack, so no cache and
    // no trusted check, as `slow` says already.
    .flatten()
}

/// [`answer_from_cache`] of a hit that is no plain link's GET: a link with extras, a revoked or
/// missing code, a POST, a path with its punctuation stripped, a link of another workspace.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn from_hit<'a>(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    domain: DomainCounts,
    code: &'a [u8],
    password: Option<&Submitted>,
    found: Found,
    hit: Hit<'_>,
    hosts: &mut HostWorkspaces,
) -> FromCache<'a> {
    let outcome = match hit {
        Hit::Link(link) if !host_workspace(r, lcf, Some(hosts)).admits(link.workspace()) => {
            Outcome::Missing
        }
        Hit::Link(link) => {
            let view = link.view();
            if let Some(password) = password {
                if view.needs_password(ngx_time() as u64) {
                    let unlock = Unlock {
                        password: password.clone(),
                        client: Client::of(r),
                        record: Record::Cached(link.to_link()),
                    };
                    return FromCache::Later(Job::Unlock(Box::new(unlock)));
                }
            } else if click::wants_card(r, &view) {
                return FromCache::Later(Job::Card(link.to_link()));
            }
            if view.needs_count(ngx_time() as u64, false) {
                // The one place a cached click pays for its verdict: it has a cap to spend.
                let link = link.to_link();
                let verdict = signals::verdict(r, mcf, link.workspace()).audience;
                return FromCache::Later(Job::Count(link, verdict));
            }
            Outcome::CachedLink(link)
        }
        Hit::Missing => match recoverable(lcf, code, found) {
            Some(stripped) => return FromCache::MissingExact(stripped),
            None => Outcome::Missing,
        },
    };
    FromCache::Answered {
        answered: respond::answer(r, mcf, lcf, domain, outcome),
    }
}

//! The content handler of `shortlink on` locations: every check that needs no lookup, then the
//! cache, then (rarely) Redis.

use nginx_sys::{
    ngx_current_msec, ngx_http_complex_value, ngx_http_discard_request_body, ngx_http_request_t,
    ngx_int_t, ngx_str_t, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_INTERNAL_SERVER_ERROR,
    NGX_HTTP_NOT_ALLOWED, NGX_HTTP_NOT_FOUND, NGX_OK,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf};
use shortcode::Shape;

use crate::cache::Cached;
use crate::conf::{LocConf, MainConf};
use crate::request::{code, host};
use crate::respond::{self, Outcome};
use crate::status::{bump, Counter};
use crate::{ffi, lookup, variables, worker, ShortlinkModule};

pub extern "C" fn redirect_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls content handlers with a live request.
        handle(unsafe { &mut *r })
    })
}

/// nginx's cached clock in milliseconds (monotonic enough for cache ages).
pub fn now_ms() -> u64 {
    // SAFETY: a plain integer nginx updates on this thread.
    unsafe { ngx_current_msec as u64 }
}

fn handle(r: &mut ngx_http_request_t) -> ngx_int_t {
    let (Some(mcf), Some(lcf)) = (
        ShortlinkModule::main_conf(r),
        ShortlinkModule::location_conf(r),
    ) else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    bump(mcf, Counter::Requests);
    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    // SAFETY: `r` is a live request in its content phase.
    let rc = unsafe { ngx_http_discard_request_body(r) };
    if rc != NGX_OK as ngx_int_t {
        return rc;
    }
    if !host_allowed(r, lcf) {
        bump(mcf, Counter::HostRejects);
        return not_found(mcf);
    }
    let Some(route) = &lcf.route else {
        return not_found(mcf);
    };
    // SAFETY: `unparsed_uri` points into request memory that lives as long as `r`; the slice
    // is not kept past this call (the lookup copies the code).
    let raw_uri: &[u8] =
        unsafe { std::slice::from_raw_parts(r.unparsed_uri.data, r.unparsed_uri.len) };
    let Some(code) = code::extract(raw_uri, route) else {
        bump(mcf, Counter::Invalid);
        return not_found(mcf);
    };
    variables::set_code(r, mcf, code);
    let Some(scheme) = &mcf.scheme else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    match scheme.shape(code) {
        Shape::Generated | Shape::Alias => {}
        Shape::BadCheck => {
            bump(mcf, Counter::CheckRejects);
            return not_found(mcf);
        }
        Shape::Invalid => {
            bump(mcf, Counter::Invalid);
            return not_found(mcf);
        }
    }
    if let Some(rc) = answer_from_cache(r, mcf, lcf, code) {
        bump(mcf, Counter::CacheHits);
        return rc;
    }
    bump(mcf, Counter::CacheMisses);
    lookup::start(r, mcf, lcf, code)
}

fn not_found(mcf: &MainConf) -> ngx_int_t {
    bump(mcf, Counter::NotFound);
    NGX_HTTP_NOT_FOUND as ngx_int_t
}

/// Without `shortlink_pool` every host is served.
fn host_allowed(r: &mut ngx_http_request_t, lcf: &LocConf) -> bool {
    let Some(cv) = lcf.pool else {
        return true;
    };
    let mut pool = ngx_str_t::default();
    // SAFETY: `cv` was compiled at config time for this location; nginx evaluates it into
    // request-pool memory.
    if unsafe { ngx_http_complex_value(r, cv, &mut pool) } != NGX_OK as ngx_int_t {
        return false;
    }
    // nginx has already lower-cased the host and dropped the port in `headers_in.server`.
    host::in_pool(r.headers_in.server.as_bytes(), pool.as_bytes())
}

fn answer_from_cache(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
) -> Option<ngx_int_t> {
    let now = now_ms();
    worker::with(mcf, |w| {
        let outcome = match w.cache()?.get(code, now)? {
            Cached::Link(link) => Outcome::Link(link),
            Cached::Missing => Outcome::Missing,
        };
        Some(respond::answer(r, mcf, lcf, outcome))
    })
    .flatten()
}

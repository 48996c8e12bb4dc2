//! The cache zone's first line for a request's code, asked for as the request arrives.
//!
//! A zone hit of a code not read lately (a campaign's link, clicked once) waits for memory: the
//! page walk to the code's set in a zone of hundreds of megabytes (no huge pages for shared
//! memory), then the set's line of tags, then the slot. Those waits were most of `Zone::get`'s
//! 7% of a worker's time in the uniform 1M cell (bench/results/edge-cache-2026-11-26c.md). A
//! `POST_READ` phase handler, registered only with `shortlink_cache_prefetch on` and a zone
//! (off by default: it costs a hot or bogus request ~125 instructions), guesses the code from
//! the parsed path with the route of the server's first `shortlink on` location and asks for
//! the first set's tag line (a prefetch walks the page tables too); nginx then finds the
//! location and runs its phases while the line comes, and the content handler finds it in the
//! cache. Nothing is read or decided here: a wrong guess (another location, a code to
//! lower-case) costs one useless prefetch, and servers without a `shortlink on` location skip
//! it after one test.

use nginx_sys::{
    ngx_array_push, ngx_conf_t, ngx_http_handler_pt, ngx_http_phases_NGX_HTTP_POST_READ_PHASE,
    ngx_http_request_t, ngx_int_t, NGX_DECLINED,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, NgxHttpCoreModule};

use crate::conf::MainConf;
use crate::request::value::slice_or_empty;
use crate::{ffi, ShortlinkModule};
use shortlink_wire::path::Route;

/// Adds the phase handler when `shortlink_cache_prefetch on` asks for it, there is a zone and a
/// location reads it (postconfiguration).
pub fn register(cf: &mut ngx_conf_t) -> Result<(), ()> {
    let Some(mcf) = ShortlinkModule::main_conf(cf) else {
        return Ok(());
    };
    if mcf.cache_zone.is_none() || !mcf.used || mcf.cache_prefetch != Some(true) {
        return Ok(());
    }
    let cmcf = NgxHttpCoreModule::main_conf_mut(cf).ok_or(())?;
    let phase = &mut cmcf.phases[ngx_http_phases_NGX_HTTP_POST_READ_PHASE as usize].handlers;
    // SAFETY: configuration time; the phase's handler array was created by the core module
    // (ngx_http_init_phases) before any postconfiguration runs, with elements of this type.
    let slot = unsafe { ngx_array_push(phase) }.cast::<ngx_http_handler_pt>();
    if slot.is_null() {
        return Err(());
    }
    // SAFETY: a fresh element of the array, sized for a handler pointer.
    unsafe { slot.write(Some(post_read)) };
    Ok(())
}

extern "C" fn post_read(r: *mut ngx_http_request_t) -> ngx_int_t {
    ffi::guard((), || {
        // SAFETY: nginx calls phase handlers with a live request, its server chosen.
        let r = unsafe { &*r };
        prefetch(r);
    });
    NGX_DECLINED as ngx_int_t
}

fn prefetch(r: &ngx_http_request_t) {
    // Before the location is found a request has its server's own configuration.
    let Some(route) = ShortlinkModule::location_conf(r).and_then(|s| s.server_route.as_ref())
    else {
        return;
    };
    // nginx's parsed path (`r->uri`, without the query): no scan for the query's `?`, which the
    // content handler's exact rule (`code::extract`, on the raw URI) makes at about half of this
    // handler's first cost. Escapes and merged slashes differ from the raw URI only in paths
    // that are no code.
    // SAFETY: `uri` points into request memory that outlives this call.
    let path = unsafe { slice_or_empty(r.uri.data, r.uri.len) };
    let Some(code) = guess(route, path) else {
        return;
    };
    if let Some(zone) = ShortlinkModule::main_conf(r).and_then(MainConf::cache_zone) {
        zone.prefetch(code);
    }
}

/// The code a request for `path` likely names under `route`: whatever follows a prefix
/// location's prefix, or the last segment. A guess only (a path that is no code costs one
/// useless prefetch).
fn guess<'u>(route: &Route, path: &'u [u8]) -> Option<&'u [u8]> {
    match route {
        Route::Prefix(prefix) => path.strip_prefix(prefix.as_slice()),
        Route::LastSegment => path.rsplit(|&b| b == b'/').next(),
    }
    .filter(|code| !code.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_guessed_from_the_path_by_the_route() {
        let prefix = Route::Prefix(b"/s/".to_vec());
        assert_eq!(guess(&prefix, b"/s/abc123"), Some(&b"abc123"[..]));
        assert_eq!(
            guess(&Route::LastSegment, b"/go/abc123"),
            Some(&b"abc123"[..])
        );
        assert_eq!(guess(&prefix, b"/other/abc123"), None);
        assert_eq!(guess(&prefix, b"/s/"), None);
        assert_eq!(guess(&Route::LastSegment, b"/go/"), None);
    }
}

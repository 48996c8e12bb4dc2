//! The cache zone's first line for a request's code, asked for as the request arrives.
//!
//! A zone hit of a code not read lately (a campaign's link, clicked once) waits for memory: the
//! page walk to the code's set in a zone of hundreds of megabytes (no huge pages for shared
//! memory), then the set's line of tags, then the slot. Those waits were most of `Zone::get`'s
//! 7% of a worker's time in the uniform 1M cell (bench/results/edge-cache-2026-11-26c.md). A
//! `POST_READ` phase handler, registered only when a zone is configured, guesses the code from
//! the raw URI with the route of the server's `shortlink on` location and asks for the first
//! set's tag line (a prefetch walks the page tables too); nginx then finds the location and runs
//! its phases while the line comes, and the content handler finds it in the cache. Nothing is
//! read or decided here: a wrong guess (another location, a code to lower-case) costs one
//! useless prefetch, and servers without a `shortlink on` location skip it after one compare.

use std::ptr;

use nginx_sys::{
    ngx_array_push, ngx_conf_t, ngx_http_handler_pt, ngx_http_phases_NGX_HTTP_POST_READ_PHASE,
    ngx_http_request_t, ngx_int_t, NGX_DECLINED,
};
use ngx::http::{HttpModuleMainConf, HttpModuleServerConf, NgxHttpCoreModule};

use crate::conf::MainConf;
use crate::request::code::{self, Route, TrailingSlash};
use crate::request::value::slice_or_empty;
use crate::{ffi, ShortlinkModule};

/// Adds the phase handler when there is a zone and a location that reads it (postconfiguration).
pub fn register(cf: &mut ngx_conf_t) -> Result<(), ()> {
    let Some(mcf) = ShortlinkModule::main_conf(cf) else {
        return Ok(());
    };
    if mcf.cache_zone.is_none() || mcf.code_servers.is_empty() {
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
        if let Some(mcf) = ShortlinkModule::main_conf(r) {
            prefetch(r, mcf);
        }
    });
    NGX_DECLINED as ngx_int_t
}

fn prefetch(r: &ngx_http_request_t, mcf: &MainConf) {
    let Some(server) = NgxHttpCoreModule::server_conf(r) else {
        return;
    };
    // SAFETY: `unparsed_uri` points into request memory that outlives this call.
    let raw_uri = unsafe { slice_or_empty(r.unparsed_uri.data, r.unparsed_uri.len) };
    let Some(code) = guess(&mcf.code_servers, ptr::from_ref(server) as usize, raw_uri) else {
        return;
    };
    if let Some(zone) = mcf.cache_zone() {
        zone.prefetch(code);
    }
}

/// The code a request for `raw_uri` to `server` likely names: `None` unless the server has a
/// `shortlink on` location (`servers`, [`MainConf::code_servers`]).
fn guess<'u>(servers: &[(usize, Route)], server: usize, raw_uri: &'u [u8]) -> Option<&'u [u8]> {
    let (_, route) = servers.iter().find(|s| s.0 == server)?;
    code::extract(raw_uri, route, TrailingSlash::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_guessed_only_for_a_server_with_a_shortlink_location() {
        let servers = [(1, Route::Prefix(b"/s/".to_vec())), (2, Route::LastSegment)];
        assert_eq!(guess(&servers, 1, b"/s/abc123?x=1"), Some(&b"abc123"[..]));
        assert_eq!(guess(&servers, 2, b"/go/abc123"), Some(&b"abc123"[..]));
        assert_eq!(guess(&servers, 3, b"/abc123"), None, "a server without one");
        assert_eq!(guess(&servers, 1, b"/other/abc123"), None);
    }
}

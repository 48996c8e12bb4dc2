//! `shortlink_answer_phase rewrite`: a `shortlink on` location answers at the end of its rewrite
//! phase, where `return` answers, instead of as its content handler.
//!
//! A content handler's request first walks the post-rewrite, pre-access, access, post-access and
//! pre-content phases, running every handler nginx has in them whether the location configures
//! it or not: about 400 instructions of a hot redirect's 9,500 (the profile in
//! bench/results/redirect-instructions-profile-2026-11-28.md). Answering here skips that walk,
//! and with it whatever those phases would have done: `limit_req`, `limit_conn`, `allow`/`deny`,
//! `auth_basic`, `auth_request`, a location-level `real_ip_header`, `mirror`, `try_files`. So
//! it is asked for (the default stays `content`), by configurations whose redirect locations have
//! none of them, as the project's templates.
//!
//! The handler is put last in the phase, after the rewrite module's: `set`, `if` and `rewrite`
//! of the location run first, as they would before a content handler; a `rewrite ... last`
//! (the URI changed: nginx finds the location again) or a location whose content handler is
//! not this module's (an `if` block's, a `shortlink_status`) is left to nginx.

use nginx_sys::{
    ngx_array_push, ngx_conf_t, ngx_http_finalize_request, ngx_http_handler_pt,
    ngx_http_phases_NGX_HTTP_REWRITE_PHASE, ngx_http_request_empty_handler, ngx_http_request_t,
    ngx_int_t, NGX_DECLINED, NGX_DONE, NGX_HTTP_INTERNAL_SERVER_ERROR,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, NgxHttpCoreModule};

use crate::conf::AnswerPhase;
use crate::{ffi, handler, ShortlinkModule};

/// Adds the handler when some level says `shortlink_answer_phase rewrite` (postconfiguration),
/// as the phase's last: nginx runs a phase's handlers from the array's end to its start.
pub fn register(cf: &mut ngx_conf_t) -> Result<(), ()> {
    let Some(mcf) = ShortlinkModule::main_conf(cf) else {
        return Ok(());
    };
    if !mcf.used || !mcf.rewrite_phase {
        return Ok(());
    }
    let cmcf = NgxHttpCoreModule::main_conf_mut(cf).ok_or(())?;
    let phase = &mut cmcf.phases[ngx_http_phases_NGX_HTTP_REWRITE_PHASE as usize].handlers;
    // SAFETY: configuration time; the phase's handler array was created by the core module
    // (ngx_http_init_phases) before any postconfiguration runs, with elements of this type.
    let slot = unsafe { ngx_array_push(phase) }.cast::<ngx_http_handler_pt>();
    if slot.is_null() {
        return Err(());
    }
    // SAFETY: `elts` holds `nelts` handler pointers, the last of them the fresh `slot`: moving
    // the others up by one and writing ours first stays inside the array.
    unsafe {
        let first = phase.elts.cast::<ngx_http_handler_pt>();
        std::ptr::copy(first, first.add(1), phase.nelts - 1);
        first.write(Some(rewrite));
    }
    Ok(())
}

extern "C" fn rewrite(r: *mut ngx_http_request_t) -> ngx_int_t {
    // SAFETY: nginx calls phase handlers with a live request, its location found.
    let r = unsafe { &mut *r };
    // Field reads only: nothing there can panic.
    if !answers_here(r) {
        return NGX_DECLINED as ngx_int_t;
    }
    // As ngx_http_core_content_phase runs a content handler: a request the answer leaves
    // waiting (a lookup, a body being read) must not run the phases again on a write event,
    // and the handler's code is finalized (NGX_DONE releases the reference the walk held).
    r.write_event_handler = Some(ngx_http_request_empty_handler);
    let rc = ffi::guard(FAILED, || handler::answer(r));
    // SAFETY: `r` is live; nginx's own content phase makes this very call.
    unsafe { ngx_http_finalize_request(r, rc) };
    NGX_DONE as ngx_int_t
}

/// A panic while answering: as the content handler's guard answers it.
const FAILED: ngx_int_t = NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;

/// Whether the location says `shortlink on` itself (an `if` block's or a `shortlink_status`
/// location's configuration has no route, and keeps its own content handler) and asks to answer
/// here, and the URI is still the one its location was found for.
fn answers_here(r: &ngx_http_request_t) -> bool {
    let Some(lcf) = ShortlinkModule::location_conf(r) else {
        return false;
    };
    lcf.answer_phase() == AnswerPhase::Rewrite && r.uri_changed() == 0 && lcf.route.is_some()
}

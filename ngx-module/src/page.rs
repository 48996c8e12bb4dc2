//! A small page the module writes itself (the "not yet" page, the password form, the app-link
//! files), for answers that are neither a redirect nor an error status nginx renders.

use nginx_sys::{
    ngx_chain_t, ngx_create_temp_buf, ngx_http_discard_request_body, ngx_http_output_filter,
    ngx_http_request_t, ngx_http_send_header, ngx_int_t, ngx_str_t, ngx_uint_t, NGX_ERROR,
    NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_OK,
};
use ngx::ngx_string;
use shortlink_wire::page::SECURITY_HEADERS;

use crate::headers::push_header;

/// What is sent, and for how long a client or CDN may keep it.
pub struct Kind {
    content_type: &'static [u8],
    /// `content_type` up to its parameters, as nginx keeps it apart.
    type_len: usize,
    cache_control: &'static str,
}

/// A page for one person at one moment: never cached.
pub const HTML: Kind = Kind {
    content_type: b"text/html; charset=utf-8",
    type_len: "text/html".len(),
    cache_control: "no-store",
};

/// A file of the deployment's configuration (the app-link files): Apple's and Google's
/// verifiers fetch them at install time and cache them on their side anyway.
pub const CONFIG_JSON: Kind = Kind {
    content_type: b"application/json",
    type_len: "application/json".len(),
    cache_control: "public, max-age=3600",
};

/// Sends `status` with `body` as HTML, never cached; returns what the content handler returns
/// (or what finalizes the request).
pub fn send(r: &mut ngx_http_request_t, status: u16, body: &[u8]) -> ngx_int_t {
    send_as(r, &HTML, status, body)
}

/// Sends `status` with `body` as `kind`.
pub fn send_as(r: &mut ngx_http_request_t, kind: &Kind, status: u16, body: &[u8]) -> ngx_int_t {
    let error = NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    // A GET's stray body must not be read as the connection's next request (a POST's was read).
    // SAFETY: a live request; nginx reads and drops the body on its own events.
    if unsafe { ngx_http_discard_request_body(r) } != NGX_OK as ngx_int_t {
        return error;
    }
    r.headers_out.status = ngx_uint_t::from(status);
    r.headers_out.content_length_n = body.len() as i64;
    // The type lives in static memory; nginx only reads it.
    r.headers_out.content_type = ngx_str_t {
        len: kind.content_type.len(),
        data: kind.content_type.as_ptr().cast_mut(),
    };
    r.headers_out.content_type_len = kind.type_len;
    let cache_control = ngx_str_t {
        len: kind.cache_control.len(),
        data: kind.cache_control.as_ptr().cast_mut(),
    };
    if push_header(r, ngx_string!("Cache-Control"), cache_control).is_none() {
        return error;
    }
    // Every page and file the module writes, as the fallback's (`wire::page`).
    for (name, value) in SECURITY_HEADERS {
        // Both live in static memory; nginx only reads them.
        let name = ngx_str_t {
            len: name.len(),
            data: name.as_ptr().cast_mut(),
        };
        let value = ngx_str_t {
            len: value.len(),
            data: value.as_ptr().cast_mut(),
        };
        if push_header(r, name, value).is_none() {
            return error;
        }
    }
    // SAFETY: `r` is a live request whose response headers are set above.
    let rc = unsafe { ngx_http_send_header(r) };
    if rc == NGX_ERROR as ngx_int_t || rc > NGX_OK as ngx_int_t || r.header_only() != 0 {
        return rc;
    }
    // SAFETY: the request pool outlives the response; the buffer is filled before it is sent.
    let buf = unsafe { ngx_create_temp_buf(r.pool, body.len()) };
    let Some(buf) = (unsafe { buf.as_mut() }) else {
        return error;
    };
    // SAFETY: `ngx_create_temp_buf` gave `body.len()` writable bytes from `buf.pos`.
    unsafe {
        std::ptr::copy_nonoverlapping(body.as_ptr(), buf.pos, body.len());
        buf.last = buf.pos.add(body.len());
    }
    buf.set_last_buf(1);
    buf.set_last_in_chain(1);
    let mut out = ngx_chain_t {
        buf,
        next: std::ptr::null_mut(),
    };
    // SAFETY: the chain lives for this call; the filters copy the link if they keep it.
    unsafe { ngx_http_output_filter(r, &mut out) }
}

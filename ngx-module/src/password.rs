//! POSTs to a code: a password page's form. The body is read (small, in memory) before the code
//! is looked at; the password then travels with the lookup task, which checks it and has Redis
//! count the attempt against the link's and the client's budgets
//! (`shortlink_wire::record::password`).

use nginx_sys::{
    ngx_http_client_body_handler_pt, ngx_http_read_client_request_body, ngx_http_request_t,
    ngx_int_t, NGX_DONE, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NGX_HTTP_SPECIAL_RESPONSE,
};
use shortlink_wire::record::password::{client_key, form_value, FIELD, MAX_PASSWORD_BYTES};

use crate::request::click;

/// Form bodies larger than this are refused: a password form is a few dozen bytes.
const MAX_BODY: usize = 4096;

/// A submitted password, owned by the lookup task.
#[derive(Clone)]
pub struct Submitted {
    bytes: [u8; MAX_PASSWORD_BYTES],
    len: usize,
}

impl Submitted {
    fn new(value: &[u8]) -> Option<Submitted> {
        let mut bytes = [0; MAX_PASSWORD_BYTES];
        bytes.get_mut(..value.len())?.copy_from_slice(value);
        Some(Submitted {
            bytes,
            len: value.len(),
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Who the client is to its attempt budget (after realip): its IPv4 address or IPv6 /64
/// ([`client_key`]).
pub struct Client {
    bytes: [u8; 64],
    len: usize,
}

impl Client {
    pub fn of(r: &ngx_http_request_t) -> Client {
        let key = client_key(click::client_text(r));
        let mut bytes = [0; 64];
        let len = key.len().min(bytes.len());
        bytes[..len].copy_from_slice(&key[..len]);
        Client { bytes, len }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Starts reading a POST's body; nginx calls `then` once it is in, which reads it with
/// [`submitted`] and carries on with the request.
pub fn read_form(r: &mut ngx_http_request_t, then: ngx_http_client_body_handler_pt) -> ngx_int_t {
    // SAFETY: a live request in its content handler, as the call requires; nginx keeps the
    // request alive (its own reference) until `then` finalizes it.
    let rc = unsafe { ngx_http_read_client_request_body(r, then) };
    if rc >= NGX_HTTP_SPECIAL_RESPONSE as ngx_int_t {
        return rc;
    }
    NGX_DONE as ngx_int_t
}

/// The password field of the body just read (empty when the field is absent, so that a POST to
/// a protected link without it is a wrong attempt, and to any other link is harmless).
pub fn submitted(r: &ngx_http_request_t) -> Result<Submitted, ngx_int_t> {
    let too_large = NGX_HTTP_REQUEST_ENTITY_TOO_LARGE as ngx_int_t;
    let mut body = [0u8; MAX_BODY];
    let mut len = 0;
    // SAFETY: after the body handler is called, `request_body` is null or nginx's body, whose
    // chain links and buffers live in the request pool for the life of the request.
    let mut link = unsafe { r.request_body.as_ref() }.map_or(std::ptr::null_mut(), |b| b.bufs);
    // SAFETY: each link of the chain is valid until its `next` is null.
    while let Some(chain) = unsafe { link.as_ref() } {
        // SAFETY: a chain link's buffer is valid; an in-memory one holds `pos..last`.
        let buf = unsafe { &*chain.buf };
        link = chain.next;
        if buf.in_file() != 0 {
            return Err(too_large);
        }
        // An empty body (`Content-Length: 0`, a chunked body of no chunks) ends in a zeroed
        // `last_buf` whose `pos` is null: nothing to read, and no slice may be made of it.
        if buf.pos.is_null() || buf.last <= buf.pos {
            continue;
        }
        let n = buf.last as usize - buf.pos as usize;
        let into = body.get_mut(len..len + n).ok_or(too_large)?;
        // SAFETY: see above; `pos` is not null and `into` has room for `n` bytes.
        into.copy_from_slice(unsafe { std::slice::from_raw_parts(buf.pos, n) });
        len += n;
    }
    let value = form_value(&body[..len], FIELD).unwrap_or_default();
    Submitted::new(&value).ok_or(too_large)
}

//! What click-time rules read of a request ([`shortlink_wire::rules::Click`]), taken from
//! nginx's parsed request without copying. Built only for a link that has rules. The accessors
//! here are the module's one way to read a request's headers and client (the visit event too).

use std::cell::Cell;
use std::net::IpAddr;

use crate::conf::{Dynamic, MainConf};
use crate::request::value;
use nginx_sys::{
    ngx_http_request_t, ngx_str_t, ngx_table_elt_t, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6,
};
use shortlink_wire::agent;
use shortlink_wire::record::LinkView;
use shortlink_wire::rules::{self, Click};

/// The click `r` makes at `now_unix`, with its `cookies` ([`visitor_cookies`]).
pub fn of<'r>(r: &'r ngx_http_request_t, now_unix: u64, cookies: &'static [u8]) -> Click<'r> {
    let h = &r.headers_in;
    let user_agent = header(h.user_agent);
    let client_text = client_text(r);
    Click {
        now_unix,
        user_agent,
        accept_language: header(h.accept_language),
        query: str_bytes(&r.args),
        client: client_addr(r),
        visitor: rules::visitor(client_text, user_agent),
        // The record's, set by the answer.
        recipient: None,
        cookies,
        random: random(),
    }
}

/// The visitor number of `r` by address and `User-Agent` ([`rules::visitor`]).
pub fn visitor(r: &ngx_http_request_t) -> u64 {
    rules::visitor(client_text(r), user_agent(r))
}

/// The request's cookies (`$http_cookie`) when they hold the visitor cookie
/// ([`rules::COOKIE`]), else empty. Read only for a link with rules.
pub fn visitor_cookies(r: &mut ngx_http_request_t, mcf: &MainConf) -> &'static [u8] {
    let Ok(index) = usize::try_from(mcf.cookie_var_index) else {
        return &[];
    };
    let Some(cookies) = value::of(r, Dynamic::Variable(index)) else {
        return &[];
    };
    let named = cookies
        .windows(rules::COOKIE.len() + 1)
        .any(|w| w.starts_with(rules::COOKIE.as_bytes()) && w.ends_with(b"="));
    if !named {
        return &[];
    }
    // SAFETY: the value lives in request memory for the rest of the request, like the header
    // values `header` gives (see there).
    unsafe { std::slice::from_raw_parts(cookies.as_ptr(), cookies.len()) }
}

/// The `User-Agent` of `r` (empty if none).
pub fn user_agent(r: &ngx_http_request_t) -> &[u8] {
    header(r.headers_in.user_agent)
}

/// Whether `r` comes from a link preview fetcher and `link` has a card for it: the one check a
/// plain link never pays for (no card, no look at the agent).
pub fn wants_card(r: &ngx_http_request_t, link: &LinkView<'_>) -> bool {
    link.extras.is_some_and(|extras| extras.has_card) && agent::is_preview(user_agent(r))
}

/// The client's address, read from the connection's socket address, which the realip module
/// replaces as it replaces the text (no parsing per click); `None` on a Unix socket.
pub(crate) fn client_addr(r: &ngx_http_request_t) -> Option<IpAddr> {
    // SAFETY: the connection of a live request is live; `sockaddr` points at an address of the
    // family its first field names, for the life of the connection (or of realip's copy, in the
    // request pool).
    unsafe {
        let sockaddr = (*r.connection).sockaddr;
        match u32::from(sockaddr.as_ref()?.sa_family) {
            AF_INET => {
                let v4 = &*sockaddr.cast::<sockaddr_in>();
                // `s_addr` holds the address in network order: its bytes in memory are the octets.
                Some(IpAddr::from(v4.sin_addr.s_addr.to_ne_bytes()))
            }
            AF_INET6 => {
                let v6 = &*sockaddr.cast::<sockaddr_in6>();
                Some(IpAddr::from(v6.sin6_addr.__in6_u.__u6_addr8))
            }
            _ => None,
        }
    }
}

/// The client's address as text: after the realip module ran, as its settings give it.
pub(crate) fn client_text(r: &ngx_http_request_t) -> &[u8] {
    // SAFETY: the connection of a live request is live.
    str_bytes(unsafe { &(*r.connection).addr_text })
}

/// A request header's value (empty if absent).
pub(crate) fn header(h: *mut ngx_table_elt_t) -> &'static [u8] {
    // SAFETY: a request header pointer is null or an element of the live request's header list;
    // callers use the bytes only while answering the request (or encoding its visit).
    match unsafe { h.as_ref() } {
        Some(h) => str_bytes(&h.value),
        None => &[],
    }
}

/// The bytes of a string of a live request (empty if unset).
pub(crate) fn str_bytes(s: &ngx_str_t) -> &'static [u8] {
    if s.data.is_null() || s.len == 0 {
        return &[];
    }
    // SAFETY: nginx strings of a live request point at `len` readable bytes; see `header`.
    unsafe { std::slice::from_raw_parts(s.data, s.len) }
}

thread_local! {
    /// The worker's SplitMix64 state, seeded once from the clock and the process id: a split
    /// per click needs an even spread, not secrecy.
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// A fresh random number for a split per click.
fn random() -> u64 {
    STATE.with(|state| {
        let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(next);
        rules::mix(next)
    })
}

//! Counters shared by all workers (atomics in a shared memory zone) and the
//! `shortlink_status` page that prints them: `name value` lines, or the Prometheus text format
//! when asked (`?format=prometheus`, or Prometheus's own `Accept`), which adds the per-domain
//! counters and the Redis round-trip histogram.

mod counters;
mod domains;
mod prometheus;
mod zone;

pub use counters::{Counter, Counters};
pub use domains::DomainCounter;

use std::cell::Cell;
use std::ffi::c_void;
use std::fmt::Write;
use std::mem;
use std::time::Duration;

use nginx_sys::{
    ngx_chain_t, ngx_conf_t, ngx_create_temp_buf, ngx_http_discard_request_body,
    ngx_http_output_filter, ngx_http_request_t, ngx_http_send_header, ngx_int_t,
    ngx_shared_memory_add, ngx_shm_zone_t, ngx_slab_calloc, ngx_slab_pool_t, NGX_ERROR,
    NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_NOT_ALLOWED, NGX_HTTP_OK,
    NGX_OK,
};
use ngx::http::{HttpModule, HttpModuleMainConf};
use ngx::ngx_string;

use crate::conf::{ConfError, LocConf, MainConf};
use crate::{ffi, ShortlinkModule};
use counters::{COUNT, NAMES};
use domains::{Domain, DomainTable, Row, RowBump};
use prometheus::Histogram;

/// One `name value` line per counter.
pub fn render(values: &[u64; COUNT]) -> String {
    let mut text = String::with_capacity(COUNT * 24);
    for (name, value) in NAMES.iter().zip(values) {
        let _ = writeln!(text, "{name} {value}");
    }
    text
}

/// Everything the zone holds, zero-filled at first.
#[repr(C)]
pub struct Shared {
    pub counters: Counters,
    latency: Histogram,
    domains: DomainTable,
}

/// Shared memory is allocated in pages; the slab pool takes some, the domain table ~20 KiB.
const ZONE_SIZE: usize = 128 * 1024;

/// Declares the counters zone; nginx maps it before the workers start.
/// Adds the counters zone when the configuration needs one (`shortlink on` anywhere, or a
/// status location).
pub fn add_counters(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), ConfError> {
    if mcf.used || mcf.status {
        mcf.counters = add_zone(cf).ok_or("cannot add the counters zone")?;
    }
    Ok(())
}

fn add_zone(cf: &mut ngx_conf_t) -> Option<*mut ngx_shm_zone_t> {
    let mut name = ngx_string!("shortlink_counters");
    let tag = ShortlinkModule::module() as *const _ as *mut c_void;
    // SAFETY: called at configuration time with a valid `cf`; nginx copies the name.
    let zone = unsafe { ngx_shared_memory_add(cf, &mut name, ZONE_SIZE, tag) };
    // SAFETY: a non-null zone returned by nginx is valid for the configuration's lifetime.
    let zone_ref = unsafe { zone.as_mut()? };
    zone_ref.init = Some(init_zone);
    Some(zone)
}

extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    ffi::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls this with the zone declared in add_zone, its memory mapped.
        let zone = unsafe { &mut *zone };
        if !old.is_null() {
            // Reload: same zone, keep counting where the old configuration left off.
            zone.data = old;
            return NGX_OK as ngx_int_t;
        }
        let pool = zone.shm.addr.cast::<ngx_slab_pool_t>();
        // SAFETY: a fresh zone starts with an initialised slab pool; zeroed memory is a valid
        // `Shared`: atomics at zero, every domain slot empty.
        let counters = unsafe { ngx_slab_calloc(pool, mem::size_of::<Shared>()) };
        if counters.is_null() {
            return NGX_ERROR as ngx_int_t;
        }
        zone.data = counters;
        NGX_OK as ngx_int_t
    })
}

fn shared(mcf: &MainConf) -> Option<&'static Shared> {
    // SAFETY: `mcf.counters` is null or the zone from add_zone; its `data` is null or the
    // `Shared` allocated in init_zone, which lives as long as the shared memory.
    unsafe { mcf.counters.as_ref()?.data.cast::<Shared>().as_ref() }
}

/// The shared counters, once the zone is mapped (in workers).
pub fn counters(mcf: &MainConf) -> Option<&'static Counters> {
    shared(mcf).map(|s| &s.counters)
}

/// Where a request counts per domain (`shortlink_status_domains`, on by default): its row of the
/// shared table, found once per request, since finding it compares host names and costs more
/// than the counting itself.
#[derive(Clone, Copy)]
pub struct DomainCounts(Option<&'static Row>);

impl DomainCounts {
    /// A request whose host passed the pool check (or that has none) counts under that host;
    /// with `memo` (the listed name's cell: `request::host::Membership`), its row is found once
    /// per worker, not by comparing host names per request.
    #[inline]
    pub fn of_host(mcf: &MainConf, lcf: &LocConf, host: &[u8], memo: Option<&Cell<u32>>) -> Self {
        Self::counted(mcf, lcf, |table| match memo {
            None => table.find(host),
            Some(memo) => Domain::from_memo(memo.get()).unwrap_or_else(|| {
                let domain = table.find(host);
                memo.set(domain.memo());
                domain
            }),
        })
    }

    /// A request whose host is not one of ours counts under "other", which keeps the table to
    /// pool hosts whatever `Host` headers arrive.
    pub fn other(mcf: &MainConf, lcf: &LocConf) -> Self {
        Self::counted(mcf, lcf, |_| Domain::Other)
    }

    #[inline]
    fn counted(mcf: &MainConf, lcf: &LocConf, row: impl FnOnce(&DomainTable) -> Domain) -> Self {
        if !lcf.status_domains() {
            return Self(None);
        }
        Self(shared(mcf).map(|s| s.domains.row(row(&s.domains))))
    }

    #[inline]
    pub fn bump(self, counter: DomainCounter) {
        if let Some(row) = self.0 {
            row.bump(counter);
        }
    }
}

/// One Redis lookup's round trip, for the histogram.
pub fn observe_redis(mcf: &MainConf, elapsed: Duration) {
    if let Some(s) = shared(mcf) {
        s.latency.observe(elapsed);
    }
}

pub fn bump(mcf: &MainConf, counter: Counter) {
    if let Some(c) = counters(mcf) {
        c.bump(counter);
    }
}

/// Content handler of `shortlink_status`.
pub extern "C" fn handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    ffi::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls content handlers with a live request.
        serve(unsafe { &mut *r })
    })
}

fn serve(r: &mut ngx_http_request_t) -> ngx_int_t {
    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    // SAFETY: `r` is a live request in its content phase.
    let rc = unsafe { ngx_http_discard_request_body(r) };
    if rc != NGX_OK as ngx_int_t {
        return rc;
    }
    let mcf = ShortlinkModule::main_conf(r);
    let shared = mcf.and_then(shared);
    let zone = mcf.and_then(MainConf::cache_zone);
    let values = shared.map(|s| s.counters.snapshot()).unwrap_or([0; COUNT]);
    // SAFETY: `args` and the Accept header point into the live request's memory.
    let (args, accept) = unsafe {
        (
            bytes(r.args.data, r.args.len),
            r.headers_in
                .accept
                .as_ref()
                .map_or(&[][..], |h| bytes(h.value.data, h.value.len)),
        )
    };
    let text = if prometheus::wanted(args, accept) {
        r.headers_out.content_type = ngx_string!("text/plain; version=0.0.4; charset=utf-8");
        let domains = shared.map(|s| s.domains.snapshot()).unwrap_or_default();
        let latency = shared.map(|s| s.latency.snapshot()).unwrap_or_default();
        let mut text = prometheus::render(&values, &domains, &latency);
        if let Some(zone) = zone {
            zone::prometheus(&mut text, &zone.stats());
        }
        text
    } else {
        r.headers_out.content_type = ngx_string!("text/plain");
        let mut text = render(&values);
        if let Some(zone) = zone {
            zone::plain(&mut text, &zone.stats());
        }
        text
    };

    r.headers_out.status = NGX_HTTP_OK as usize;
    r.headers_out.content_type_len = r.headers_out.content_type.len;
    r.headers_out.content_length_n = text.len() as _;

    // SAFETY: headers are set; the body buffer comes from the request pool and outlives output.
    unsafe {
        let rc = ngx_http_send_header(r);
        if rc == NGX_ERROR as ngx_int_t || rc > NGX_OK as ngx_int_t || r.header_only() != 0 {
            return rc;
        }
        let b = ngx_create_temp_buf(r.pool, text.len());
        if b.is_null() {
            return NGX_ERROR as ngx_int_t;
        }
        let b = &mut *b;
        std::ptr::copy_nonoverlapping(text.as_ptr(), b.last, text.len());
        b.last = b.last.add(text.len());
        b.set_last_buf(u32::from(std::ptr::eq(r, r.main)));
        b.set_last_in_chain(1);
        let mut out = ngx_chain_t {
            buf: b,
            next: std::ptr::null_mut(),
        };
        ngx_http_output_filter(r, &mut out)
    }
}

/// # Safety
/// `data` must be null or point at `len` bytes that outlive the use.
unsafe fn bytes<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if data.is_null() {
        &[]
    } else {
        // SAFETY: per the contract above.
        unsafe { std::slice::from_raw_parts(data, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_line_per_counter() {
        let mut values = [0u64; COUNT];
        values[Counter::Requests as usize] = 7;
        values[Counter::Unavailable as usize] = 2;
        let text = render(&values);
        assert_eq!(text.lines().count(), COUNT);
        assert!(text.starts_with("requests 7\nredirects 0\n"));
        assert!(text.contains("fallbacks 0\nunavailable 2\n"));
        assert!(text.ends_with("events_buffered 0\ncluster_redirects 0\ncluster_failures 0\ncluster_map_reads 0\ncluster_map_changes 0\ncluster_primaries 0\nevents_rerouted 0\nimported_lookups 0\ncluster_replicas_read 0\nrecovered 0\norphans_unrecorded 0\nnot_found_redirects 0\n"));
    }
}

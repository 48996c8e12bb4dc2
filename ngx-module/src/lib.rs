//! `ngx_http_shortlink_module`: answers `GET /<code>` with the link's redirect, looked up in a
//! per-worker cache and then in Redis over non-blocking connections on nginx's own event loop.
//!
//! Layout: `conf/` parses and validates directives, `request/` holds the pure request rules
//! (code in path, host in pool, `Location`), `redis/` speaks RESP over pooled nginx peer
//! connections, `handler.rs` and `lookup.rs` answer requests, `status.rs` keeps the counters.
//! FFI entry points are thin shims over safe Rust, wrapped by [`ffi::guard`] so that no panic
//! crosses into nginx.

mod app_links;
pub mod cache;
pub mod conf;
mod count;
pub mod events;
mod ffi;
pub mod geo;
mod handler;
mod headers;
mod lookup;
mod not_found;
mod page;
mod password;
mod phase;
mod prefetch;
mod prefill;
pub mod redis;
pub mod request;
mod respond;
mod scheme;
mod status;
mod sweeps;
mod variables;
mod worker;

// The link record decoder lives in `shortlink-wire` (linkable without nginx, hence fuzzable).
pub use shortlink_wire::record;

use std::ffi::{c_char, c_void};
use std::ptr;

use nginx_sys::{
    ngx_conf_t, ngx_cycle_t, ngx_http_module_t, ngx_int_t, ngx_module_t, ngx_shared_memory_add,
    ngx_shm_zone_t, ngx_str_t, ngx_uint_t, NGX_ERROR, NGX_HTTP_MODULE, NGX_OK,
};
use ngx::core::{Status, NGX_CONF_ERROR, NGX_CONF_OK};
use ngx::http::{HttpModule, HttpModuleLocationConf, HttpModuleMainConf};

use crate::conf::{LocConf, MainConf};

pub struct ShortlinkModule;

static MODULE_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(ShortlinkModule::preconfiguration),
    postconfiguration: Some(ShortlinkModule::postconfiguration),
    create_main_conf: Some(ShortlinkModule::create_main_conf),
    init_main_conf: Some(ShortlinkModule::init_main_conf),
    create_srv_conf: None,
    merge_srv_conf: None,
    create_loc_conf: Some(ShortlinkModule::create_loc_conf),
    merge_loc_conf: Some(ShortlinkModule::merge_loc_conf),
};

// The export table nginx looks for in a dynamic module. Left out of unit-test builds, which link
// without nginx and must not keep the module's references to nginx symbols alive.
#[cfg(not(test))]
ngx::ngx_modules!(ngx_http_shortlink_module);

#[cfg_attr(not(test), used, no_mangle)]
#[allow(non_upper_case_globals)]
pub static mut ngx_http_shortlink_module: ngx_module_t = ngx_module_t {
    ctx: ptr::addr_of!(MODULE_CTX).cast_mut().cast(),
    // SAFETY: only the address of the command table is taken; nginx reads it at config time.
    commands: unsafe { ptr::addr_of_mut!(conf::commands::COMMANDS[0]) },
    type_: NGX_HTTP_MODULE as ngx_uint_t,
    init_process: Some(init_process),
    exit_process: Some(exit_process),
    ..ngx_module_t::default()
};

impl HttpModule for ShortlinkModule {
    fn module() -> &'static ngx_module_t {
        // SAFETY: nginx writes the module's indices once while loading it, before any request;
        // afterwards the static is only read.
        unsafe { &*ptr::addr_of!(ngx_http_shortlink_module) }
    }

    unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        ffi::guard(Status::NGX_ERROR.into(), || {
            // SAFETY: nginx passes a valid configuration context to module callbacks.
            let cf = unsafe { &mut *cf };
            match variables::register(cf) {
                Ok(()) => Status::NGX_OK.into(),
                Err(()) => Status::NGX_ERROR.into(),
            }
        })
    }

    unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        ffi::guard(Status::NGX_ERROR.into(), || {
            // SAFETY: nginx passes a valid configuration context to module callbacks.
            let cf = unsafe { &mut *cf };
            match prefetch::register(cf).and_then(|()| phase::register(cf)) {
                Ok(()) => Status::NGX_OK.into(),
                Err(()) => Status::NGX_ERROR.into(),
            }
        })
    }

    unsafe extern "C" fn init_main_conf(
        cf: *mut ngx_conf_t,
        conf: *mut std::ffi::c_void,
    ) -> *mut c_char {
        ffi::guard(NGX_CONF_ERROR, || {
            // SAFETY: nginx passes a valid context and the main conf created by create_main_conf.
            let (cf, mcf) = unsafe { (&mut *cf, &mut *conf.cast::<MainConf>()) };
            // The counters zone is the status part's: conf only says whether it is needed.
            let added = mcf
                .finish()
                .and_then(|()| status::add_counters(cf, mcf))
                .and_then(|()| add_cache_zone(cf, mcf));
            match added {
                Ok(()) => NGX_CONF_OK,
                Err(e) => conf::ext::block_error(cf, &e),
            }
        })
    }
}

/// Declares `shortlink_cache_zone`'s zone; nginx maps it (and runs its init in the master)
/// before the workers start.
fn add_cache_zone(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), conf::ConfError> {
    let Some(spec) = mcf.cache_zone.as_ref() else {
        return Ok(());
    };
    let mut name = ngx_str_t {
        len: spec.name.len(),
        data: spec.name.as_ptr().cast_mut(),
    };
    let tag = ShortlinkModule::module() as *const _ as *mut c_void;
    // SAFETY: configuration time with a valid `cf`; nginx copies the name into the cycle pool.
    let zone = unsafe { ngx_shared_memory_add(cf, &mut name, spec.size, tag) };
    // SAFETY: a non-null zone returned by nginx is valid for the configuration's lifetime.
    let zone_ref = unsafe { zone.as_mut() }.ok_or("cannot add the cache zone")?;
    if zone_ref.data.is_null() && zone_ref.init.is_some() {
        return Err("\"shortlink_cache_zone\" names a zone declared twice".into());
    }
    zone_ref.init = Some(init_cache_zone);
    mcf.cache_zone_shm = zone;
    Ok(())
}

extern "C" fn init_cache_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    ffi::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls this with the zone declared in add_cache_zone, mapped, its slab
        // pool initialised.
        match unsafe { cache::zone::init(&mut *zone, old) } {
            true => NGX_OK as ngx_int_t,
            false => NGX_ERROR as ngx_int_t,
        }
    })
}

// SAFETY: the main conf slot of this module holds a `MainConf` (see create_main_conf).
unsafe impl HttpModuleMainConf for ShortlinkModule {
    type MainConf = MainConf;
}

// SAFETY: the location conf slot of this module holds a `LocConf` (see create_loc_conf).
unsafe impl HttpModuleLocationConf for ShortlinkModule {
    type LocationConf = LocConf;
}

/// Subscribes to invalidations as the worker starts, so that its cache is trusted from the
/// first requests on rather than after a handshake those requests would have to start.
extern "C" fn init_process(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    ffi::guard(Status::NGX_OK.into(), || {
        // SAFETY: nginx passes the live cycle; the main conf lives as long as it.
        let mcf = unsafe { cycle.as_ref() }.and_then(ShortlinkModule::main_conf);
        if let Some(mcf) = mcf.filter(|m| m.used) {
            worker::start(mcf);
        }
        Status::NGX_OK.into()
    })
}

extern "C" fn exit_process(_cycle: *mut ngx_cycle_t) {
    ffi::guard((), worker::shutdown);
}

//! What every directive handler shares: the `extern "C"` shim around a safe body, and the
//! checks and look-ups several directives make.

use std::ffi::{c_char, c_void, CStr};
use std::{mem, ptr};

use nginx_sys::{ngx_command_t, ngx_conf_t, ngx_parse_url, ngx_str_t, ngx_url_t, NGX_OK};
use ngx::core::{NGX_CONF_ERROR, NGX_CONF_OK};

use super::parse::ArgError;
use super::{ext, PeerAddr};
use crate::ffi;

/// Runs a directive's body against its conf struct `C` and reports any error the nginx way.
pub fn shim<C>(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
    body: impl FnOnce(&mut ngx_conf_t, &mut C, &[&[u8]]) -> Result<(), ArgError>,
) -> *mut c_char {
    ffi::guard(NGX_CONF_ERROR, || {
        // SAFETY: nginx calls directive handlers with a valid parser context, the command from
        // our table, and the conf struct selected by the command's `conf` offset, which is the
        // `C` this shim was instantiated with.
        let (cf, cmd, conf) = unsafe { (&mut *cf, &*cmd, &mut *conf.cast::<C>()) };
        let name = cmd.name.to_str().unwrap_or("shortlink");
        let args: Vec<Vec<u8>> = ext::values(cf).iter().map(|a| a.to_vec()).collect();
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        match body(cf, conf, &args) {
            Ok(()) => NGX_CONF_OK,
            Err(e) => ext::error(cf, name, &e),
        }
    })
}

pub fn duplicate<T>(slot: &Option<T>) -> Result<(), ArgError> {
    match slot {
        Some(_) => Err(ArgError("is duplicate".into())),
        None => Ok(()),
    }
}

/// Resolves `host:port` (or `unix:/path`) once, at config time, as nginx's upstreams do.
pub fn resolve(cf: &mut ngx_conf_t, address: &[u8]) -> Result<PeerAddr, ArgError> {
    let shown = String::from_utf8_lossy(address);
    // SAFETY: ngx_url_t is plain data for which all-zero is the documented starting state; the
    // URL bytes are copied to the configuration pool first so the results may point into them.
    unsafe {
        let url = ngx_str_t::from_bytes(cf.pool, address)
            .ok_or_else(|| ArgError("cannot allocate memory".into()))?;
        let mut u: ngx_url_t = mem::zeroed();
        u.url = url;
        u.default_port = 6379;
        if ngx_parse_url(cf.pool, &mut u) != NGX_OK as isize {
            let why = if u.err.is_null() {
                "invalid address".into()
            } else {
                CStr::from_ptr(u.err).to_string_lossy()
            };
            return Err(ArgError(format!("{why} in \"{shown}\"")));
        }
        if u.uri.len != 0 {
            return Err(ArgError(format!("unexpected path in \"{shown}\"")));
        }
        if u.naddrs == 0 || u.addrs.is_null() {
            return Err(ArgError(format!("no address found for \"{shown}\"")));
        }
        let addr = u.addrs;
        Ok(PeerAddr {
            sockaddr: (*addr).sockaddr,
            socklen: (*addr).socklen,
            name: ptr::addr_of_mut!((*addr).name),
        })
    }
}

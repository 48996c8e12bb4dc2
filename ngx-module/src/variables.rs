//! `$shortlink_code`: the code parsed from the path, for the fallback location's `proxy_pass`.
//!
//! The handler stores the value straight into the request's indexed variable slot rather than in
//! the module context, because an internal redirect to the named fallback location clears all
//! module contexts but keeps evaluated variables.

use nginx_sys::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_get_variable_index, ngx_http_request_t,
    ngx_http_variable_value_t, ngx_int_t, ngx_pnalloc, NGX_ERROR, NGX_OK,
};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_string;

use crate::conf::MainConf;
use crate::{ffi, ShortlinkModule};

pub fn register(cf: &mut ngx_conf_t) -> Result<(), ()> {
    let mut name = ngx_string!("shortlink_code");
    // SAFETY: called from preconfiguration with a valid `cf`; nginx copies the name. Flags 0:
    // cacheable, which is what lets the stored value survive the internal redirect.
    let var = unsafe { ngx_http_add_variable(cf, &mut name, 0).as_mut() }.ok_or(())?;
    var.get_handler = Some(get_code);
    // SAFETY: as above; the core module's variables array exists by preconfiguration.
    let index = unsafe { ngx_http_get_variable_index(cf, &mut name) };
    if index == NGX_ERROR as ngx_int_t {
        return Err(());
    }
    ShortlinkModule::main_conf_mut(cf).ok_or(())?.code_var_index = index;
    Ok(())
}

/// Evaluated only when the handler has not stored a code for this request.
extern "C" fn get_code(
    _r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    _data: usize,
) -> ngx_int_t {
    ffi::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx passes the variable's value slot for this request.
        unsafe { (*v).set_not_found(1) };
        NGX_OK as ngx_int_t
    })
}

/// Stores `code` (copied to the request pool) as this request's `$shortlink_code`.
pub fn set_code(r: &mut ngx_http_request_t, mcf: &MainConf, code: &[u8]) {
    let Ok(index) = usize::try_from(mcf.code_var_index) else {
        return;
    };
    // SAFETY: the pool belongs to the live request; `r.variables` has one slot per indexed
    // variable and `index` came from ngx_http_get_variable_index for this configuration.
    unsafe {
        let data = ngx_pnalloc(r.pool, code.len()).cast::<u8>();
        if data.is_null() {
            return;
        }
        std::ptr::copy_nonoverlapping(code.as_ptr(), data, code.len());
        let v = &mut *r.variables.add(index);
        v.set_len(code.len() as u32);
        v.set_valid(1);
        v.set_no_cacheable(0);
        v.set_not_found(0);
        v.set_escape(0);
        v.data = data;
    }
}

//! Small helpers over `ngx_conf_t` shared by the directive shims.

use std::ffi::c_char;
use std::fmt::Display;

use nginx_sys::{ngx_conf_t, ngx_str_t, NGX_LOG_EMERG};
use ngx::core::NGX_CONF_ERROR;
use ngx::ngx_conf_log_error;

/// The directive's words, name first.
pub fn args(cf: &ngx_conf_t) -> &[ngx_str_t] {
    // SAFETY: while a directive handler runs, `cf.args` is an array of `ngx_str_t` owned by the
    // parser and valid for the duration of the call.
    unsafe { cf.args.as_ref().map(|a| a.as_slice()).unwrap_or_default() }
}

/// The directive's arguments as byte slices (without the name).
pub fn values(cf: &ngx_conf_t) -> Vec<&[u8]> {
    args(cf).iter().skip(1).map(|s| s.as_bytes()).collect()
}

/// Logs `<directive>: <error>` with the file and line being parsed and fails the config.
pub fn error(cf: &mut ngx_conf_t, directive: &str, err: &dyn Display) -> *mut c_char {
    ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"{directive}\" {err}");
    NGX_CONF_ERROR
}

/// Logs a problem that belongs to no single directive (found once the `http` block is read).
pub fn block_error(cf: &mut ngx_conf_t, err: &dyn Display) -> *mut c_char {
    ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{err}");
    NGX_CONF_ERROR
}

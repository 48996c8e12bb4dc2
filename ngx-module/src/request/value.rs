//! Reading a directive's variables ([`Dynamic`]) for a request.

use nginx_sys::{
    ngx_http_complex_value, ngx_http_get_indexed_variable, ngx_http_request_t,
    ngx_http_variable_value_t, ngx_int_t, ngx_str_t, NGX_OK,
};

use crate::conf::Dynamic;

/// The value for this request; `None` when the variable is not found or evaluation failed.
/// The bytes live in request (or configuration) memory for the rest of the request.
pub fn of(r: &mut ngx_http_request_t, source: Dynamic) -> Option<&[u8]> {
    match source {
        Dynamic::Variable(index) => {
            // SAFETY: `index` came from ngx_http_get_variable_index for this configuration;
            // the value lives in request (or configuration) memory for the rest of the request.
            match unsafe { ngx_http_get_indexed_variable(r, index).as_ref() } {
                // SAFETY: a found variable's `data` holds `len` bytes.
                Some(v) if variable_found(v) => {
                    Some(unsafe { slice_or_empty(v.data, variable_len(v)) })
                }
                _ => None,
            }
        }
        Dynamic::Complex(cv) => {
            let mut value = ngx_str_t::default();
            // SAFETY: `cv` was compiled at config time for this location; nginx evaluates it
            // into request-pool memory.
            if unsafe { ngx_http_complex_value(r, cv, &mut value) } != NGX_OK as ngx_int_t {
                return None;
            }
            // SAFETY: nginx set `value` to `len` bytes of request memory (or len 0).
            Some(unsafe { slice_or_empty(value.data, value.len) })
        }
    }
}

/// The bit-field word of a variable value, read at once (bindgen's getters go bit by bit).
fn variable_word(v: &ngx_http_variable_value_t) -> u32 {
    // SAFETY: `__BindgenBitfieldUnit<[u8; 4]>` is `repr(C)` around its 4-byte storage.
    u32::from_le_bytes(unsafe { *std::ptr::addr_of!(v._bitfield_1).cast::<[u8; 4]>() })
}

fn variable_len(v: &ngx_http_variable_value_t) -> usize {
    (variable_word(v) & 0x0fff_ffff) as usize
}

/// `valid` set and `not_found` clear (bits 28 and 30 of the C bit-fields).
fn variable_found(v: &ngx_http_variable_value_t) -> bool {
    variable_word(v) & (1 << 28 | 1 << 30) == 1 << 28
}

/// # Safety
/// `data` must be null with `len` 0, or point at `len` readable bytes living past the use.
pub unsafe fn slice_or_empty<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: per the contract above.
        unsafe { std::slice::from_raw_parts(data, len) }
    }
}

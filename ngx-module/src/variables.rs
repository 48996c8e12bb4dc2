//! `$shortlink_code`: the code parsed from the path, for the fallback location's `proxy_pass`;
//! `$shortlink_click_token`: the token of a capped click whose count the module sent and did not
//! get back, for the fallback to count the click with (`shortlink_wire::click_count`), empty
//! otherwise.
//!
//! The handler stores the values straight into the request's indexed variable slots rather than in
//! the module context, because an internal redirect to the named fallback location clears all
//! module contexts but keeps evaluated variables.

use nginx_sys::{
    __BindgenBitfieldUnit, ngx_conf_t, ngx_http_add_variable, ngx_http_get_variable_index,
    ngx_http_request_t, ngx_http_variable_value_t, ngx_int_t, ngx_pnalloc, ngx_str_t, NGX_ERROR,
    NGX_OK,
};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_string;

use crate::conf::MainConf;
use crate::{ffi, ShortlinkModule};
use shortlink_wire::click_id::ClickId;

pub fn register(cf: &mut ngx_conf_t) -> Result<(), ()> {
    let index = add_stored(cf, ngx_string!("shortlink_code"))?;
    let click_token_index = add_stored(cf, ngx_string!("shortlink_click_token"))?;
    let mut cookie = ngx_string!("http_cookie");
    // SAFETY: called from preconfiguration with a valid `cf`, whose core module's variables
    // array exists by then; nginx resolves the `http_` prefix once the configuration is read.
    let cookie_index = unsafe { ngx_http_get_variable_index(cf, &mut cookie) };
    if cookie_index == NGX_ERROR as ngx_int_t {
        return Err(());
    }
    let mut fetch_mode = ngx_string!("http_sec_fetch_mode");
    // SAFETY: as above.
    let fetch_mode_index = unsafe { ngx_http_get_variable_index(cf, &mut fetch_mode) };
    if fetch_mode_index == NGX_ERROR as ngx_int_t {
        return Err(());
    }
    let mcf = ShortlinkModule::main_conf_mut(cf).ok_or(())?;
    mcf.code_var_index = index;
    mcf.click_token_var_index = click_token_index;
    mcf.cookie_var_index = cookie_index;
    mcf.fetch_mode_var_index = fetch_mode_index;
    Ok(())
}

/// Adds a variable the handler stores into ([`store`]) and returns its index.
fn add_stored(cf: &mut ngx_conf_t, mut name: ngx_str_t) -> Result<ngx_int_t, ()> {
    // SAFETY: called from preconfiguration with a valid `cf`; nginx copies the name. Flags 0:
    // cacheable, which is what lets the stored value survive the internal redirect.
    let var = unsafe { ngx_http_add_variable(cf, &mut name, 0).as_mut() }.ok_or(())?;
    var.get_handler = Some(get_not_stored);
    // SAFETY: as above; the core module's variables array exists by preconfiguration.
    let index = unsafe { ngx_http_get_variable_index(cf, &mut name) };
    if index == NGX_ERROR as ngx_int_t {
        return Err(());
    }
    Ok(index)
}

/// Evaluated only when the handler has not stored a value for this request: not found (an empty
/// value, for which `proxy_set_header` sends no header).
extern "C" fn get_not_stored(
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

/// Stores `code` as this request's `$shortlink_code`.
///
/// # Safety
/// `code` must point into memory that lives as long as the request (the handler passes a slice
/// of `r->unparsed_uri`, which sits in the request's header buffer until the request is freed,
/// or, lower-cased by `shortlink_code_case lower`, a copy in the request's pool).
pub unsafe fn set_code(r: &mut ngx_http_request_t, mcf: &MainConf, code: &[u8]) {
    // SAFETY: the caller guarantees the bytes outlive the request.
    unsafe { store(r, mcf.code_var_index, code) }
}

/// Stores `token` as this request's `$shortlink_click_token`, a copy in the request's pool.
pub fn set_click_token(r: &mut ngx_http_request_t, mcf: &MainConf, token: &ClickId) {
    let bytes = token.as_bytes();
    // SAFETY: the request's pool is live; the copy is freed with the request.
    let data = unsafe { ngx_pnalloc(r.pool, bytes.len()) }.cast::<u8>();
    if data.is_null() {
        // The fallback then counts the click with a token of its own, as after a failed lookup.
        return;
    }
    // SAFETY: `data` has room for the token's bytes and lives as long as the request.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        store(
            r,
            mcf.click_token_var_index,
            std::slice::from_raw_parts(data, bytes.len()),
        );
    }
}

/// Stores `value` in the request's slot of the variable `index`.
///
/// # Safety
/// `value` must live as long as the request.
unsafe fn store(r: &mut ngx_http_request_t, index: ngx_int_t, value: &[u8]) {
    let Ok(index) = usize::try_from(index) else {
        return;
    };
    // SAFETY: `r.variables` has one slot per indexed variable and `index` came from
    // ngx_http_get_variable_index for this configuration; the caller guarantees the bytes outlive
    // the request, so no copy is needed.
    unsafe {
        let v = &mut *r.variables.add(index);
        v._bitfield_1 = value_bits(value.len() as u32);
        v.data = value.as_ptr().cast_mut();
    }
}

/// The bit-field word of an `ngx_variable_value_t` holding `len` bytes: `valid`, cacheable, found,
/// not escaped. One store instead of bindgen's bit-by-bit setters (which loop over the 28 bits of
/// `len` on every request).
fn value_bits(len: u32) -> __BindgenBitfieldUnit<[u8; 4]> {
    // C bit-field layout on little-endian targets: len:28, valid:1, no_cacheable:1,
    // not_found:1, escape:1, from the least significant bit.
    const VALID: u32 = 1 << 28;
    __BindgenBitfieldUnit::new(((len & 0x0fff_ffff) | VALID).to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_bits_match_the_bindgen_setters() {
        for len in [0u32, 1, 7, 64, 0x0fff_ffff] {
            // SAFETY: plain C data; all-zero is a valid value.
            let mut slow: ngx_http_variable_value_t = unsafe { std::mem::zeroed() };
            slow.set_len(len);
            slow.set_valid(1);
            slow.set_no_cacheable(0);
            slow.set_not_found(0);
            slow.set_escape(0);
            // SAFETY: as above.
            let mut fast: ngx_http_variable_value_t = unsafe { std::mem::zeroed() };
            fast._bitfield_1 = value_bits(len);
            assert_eq!(fast.len(), len);
            assert_eq!(fast.valid(), 1);
            assert_eq!(fast.not_found(), 0);
            assert_eq!(fast.no_cacheable(), 0);
            assert_eq!(fast.escape(), 0);
            assert_eq!(
                slow._bitfield_1.get(0, 32),
                fast._bitfield_1.get(0, 32),
                "len {len}"
            );
        }
    }
}

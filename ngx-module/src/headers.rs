//! Adding a response header: shared by the redirect answers (`respond`) and the module's own
//! pages (`page`), so neither has to import the other for it.

use nginx_sys::{ngx_http_request_t, ngx_list_push, ngx_str_t, ngx_table_elt_t};

pub fn push_header(
    r: &mut ngx_http_request_t,
    key: ngx_str_t,
    value: ngx_str_t,
) -> Option<*mut ngx_table_elt_t> {
    // SAFETY: the output header list of a live request; the new element is zeroed before use so
    // fields that differ between nginx versions (such as `next`) start out empty.
    unsafe {
        let h = ngx_list_push(&mut r.headers_out.headers).cast::<ngx_table_elt_t>();
        if h.is_null() {
            return None;
        }
        std::ptr::write_bytes(h, 0, 1);
        let header = &mut *h;
        header.hash = 1;
        header.key = key;
        header.value = value;
        Some(h)
    }
}

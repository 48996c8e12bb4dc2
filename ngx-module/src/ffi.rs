//! The module's lowest layer over nginx itself: the one rule for every `extern "C"` entry point
//! (a panic must not unwind into nginx), and nginx's clock.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, turning a panic into `on_panic` (the entry point's error value).
///
/// Unwind safety is asserted because after a panic the caller only returns an error to nginx;
/// per-worker state a panic may have left half-updated (cache, connection pool) is rebuilt or
/// treated as failed by its own checks.
pub fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// nginx's cached clock in milliseconds: monotonic enough for cache ages and timeouts; only
/// differences of it are meaningful.
pub fn now_ms() -> u64 {
    // SAFETY: a plain integer nginx updates on its own thread, which is also ours.
    unsafe { nginx_sys::ngx_current_msec as u64 }
}

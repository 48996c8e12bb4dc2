//! Each worker's copy of the sweeps the visit consumer noticed (`shortlink_wire::sweeps`), kept
//! by the worker's sweeps task and asked by a capped click's verdict. A leaf: the verdict reads
//! it without reaching the worker or the lookup that keep it fresh.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;

use nginx_sys::ngx_timeofday;
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::sweeps::Flags;

thread_local! {
    static FLAGS: RefCell<Flags> = RefCell::new(Flags::default());
    /// Whether `FLAGS` holds any: const-initialised, so a capped click with no sweep noticed
    /// pays one thread-local load.
    static ANY: Cell<bool> = const { Cell::new(false) };
}

/// Whether a click now on a link of `workspace` (asked only when some flag is held) from `ip`
/// with agent `ua` belongs to a sweep noticed.
#[inline]
pub fn holds(workspace: impl FnOnce() -> WorkspaceName, ip: IpAddr, ua: &[u8]) -> bool {
    if !ANY.with(Cell::get) {
        return false;
    }
    // nginx's cached time of this event loop iteration.
    let now = ngx_timeofday();
    let now_ms = now.sec as i64 * 1000 + now.msec as i64;
    let workspace = workspace();
    FLAGS
        .try_with(|flags| {
            (flags.try_borrow().ok()).is_some_and(|f| f.holds(workspace, ip, ua, now_ms))
        })
        .unwrap_or(false)
}

/// Swaps in the copy a whole reply gave.
pub(crate) fn store(flags: Flags) {
    let any = !flags.is_empty();
    let _ = FLAGS.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = flags;
            ANY.with(|flag| flag.set(any));
        }
    });
}

//! Whether a code answers on the request's host: a code of workspace A answers only on the hosts
//! nginx maps to A (`shortlink_workspace`, usually `$shortlink_workspace` from a `map $host`);
//! anywhere else it answers exactly as an unknown code does.

use std::sync::atomic::{AtomicBool, Ordering};

use nginx_sys::{ngx_cycle, NGX_LOG_WARN};
use ngx::ngx_log_error;
use shortlink_wire::record::WorkspaceName;

/// The request host's workspace, established once per request (copied, not allocated: the
/// lookup task carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostWorkspace {
    /// No `shortlink_workspace`: every code answers on every host, as before workspaces.
    Unchecked,
    /// `default`, whose records name no workspace: the common case is one compare.
    Default,
    Named(WorkspaceName),
    /// An empty or malformed value (a host the map forgot, a typo): no code answers here.
    Nothing,
}

impl HostWorkspace {
    /// What a `shortlink_workspace` value (evaluated for this request) names.
    pub fn of_value(value: &[u8]) -> HostWorkspace {
        match WorkspaceName::parse(value) {
            Some(name) if name.is_default() => HostWorkspace::Default,
            Some(name) => HostWorkspace::Named(name),
            None => HostWorkspace::Nothing,
        }
    }

    /// The name an event records as the host's workspace (`shortlink_wire::event`'s `ws`):
    /// empty when nginx maps the host to none (no `shortlink_workspace`, or no valid name).
    pub fn recorded(&self) -> &[u8] {
        match self {
            HostWorkspace::Default => WorkspaceName::DEFAULT.as_bytes(),
            HostWorkspace::Named(name) => name.as_bytes(),
            HostWorkspace::Unchecked | HostWorkspace::Nothing => b"",
        }
    }

    pub fn of_name(name: WorkspaceName) -> HostWorkspace {
        if name.is_default() {
            HostWorkspace::Default
        } else {
            HostWorkspace::Named(name)
        }
    }

    /// Whether a link whose record names `record` (`None`: `default`) answers on this host.
    #[inline]
    pub fn admits(&self, record: Option<&[u8]>) -> bool {
        match self {
            HostWorkspace::Unchecked => true,
            HostWorkspace::Default => record.is_none(),
            HostWorkspace::Named(host) => record == Some(host.as_bytes()),
            HostWorkspace::Nothing => false,
        }
    }
}

/// Whether this worker has said so already (each worker is a process of its own).
static WARNED: AtomicBool = AtomicBool::new(false);

/// Says once per worker that `shortlink_workspace` gave no workspace name: every code then
/// answers 404 on that host, which looks like an outage of that domain, not like a bad config.
#[cold]
pub fn warn_once(value: &[u8], host: &[u8]) {
    if WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: `ngx_cycle` is set before any worker code runs; its log outlives requests.
    let log = unsafe { (*ngx_cycle).log };
    ngx_log_error!(
        NGX_LOG_WARN,
        log,
        "shortlink: \"shortlink_workspace\" is \"{}\" for host \"{}\", not a workspace name: \
         this host answers every code as unknown (404); map every host of the pool to its \
         workspace (said once per worker)",
        String::from_utf8_lossy(value).escape_debug(),
        String::from_utf8_lossy(host).escape_debug()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_answers_only_on_its_workspaces_hosts() {
        let a = HostWorkspace::of_value(b"brand-a");
        let default = HostWorkspace::of_value(b"default");
        assert_eq!(default, HostWorkspace::Default);
        assert_eq!(default.recorded(), b"default");
        assert_eq!(a.recorded(), b"brand-a");
        assert_eq!(HostWorkspace::Unchecked.recorded(), b"");
        assert_eq!(
            HostWorkspace::of_name(WorkspaceName::DEFAULT),
            HostWorkspace::Default
        );
        assert!(a.admits(Some(b"brand-a")));
        assert!(!a.admits(Some(b"brand-b")));
        assert!(!a.admits(Some(b"brand-")));
        assert!(!a.admits(None));
        assert!(default.admits(None));
        assert!(!default.admits(Some(b"brand-a")));
    }

    #[test]
    fn without_the_directive_every_code_answers() {
        for record in [None, Some(&b"brand-a"[..])] {
            assert!(HostWorkspace::Unchecked.admits(record));
        }
    }

    #[test]
    fn an_empty_or_malformed_value_admits_no_code() {
        for value in [&b""[..], b"Brand-A", b"-", b"brand a", &[b'x'; 33]] {
            let host = HostWorkspace::of_value(value);
            assert_eq!(host, HostWorkspace::Nothing);
            assert_eq!(host.recorded(), b"");
            assert!(!host.admits(None));
            assert!(!host.admits(Some(value)));
        }
    }
}

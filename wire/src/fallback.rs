//! What nginx's fallback location (`@resolve`) tells the sidecar besides the code: the workspace
//! nginx maps the request's host to, so that the sidecar answers a code only on its own
//! workspace's hosts, as the module does (`shortlink_workspace`); and the token of a capped click
//! the module tried to count ([`CLICK_TOKEN_HEADER`]).
//!
//! The value is `ws=` followed by `$shortlink_workspace`, never `$shortlink_workspace` alone:
//! nginx's `proxy_set_header` sends no header at all for an empty value, so a host mapped to
//! `""` would reach the sidecar exactly like a request that names no host, and the sidecar could
//! not tell "no code answers here" from "no check". With the prefix the header is always sent;
//! one missing is a configuration (or a caller) that did not say whose host it is, and nothing
//! answers under it.

use crate::record::WorkspaceName;

/// The request header, lower case as HTTP/2 and the sidecar's router spell it.
pub const WORKSPACE_HEADER: &str = "x-shortlink-workspace";

/// The request's host as nginx has it (`$host`: lower case, no port), for the host's not-found
/// redirects ([`crate::not_found`]).
pub const HOST_HEADER: &str = "x-shortlink-host";

/// The client's scheme as nginx has it (`$scheme`): browsers send fetch metadata over TLS
/// only, so the fallback's click-time verdict ([`crate::verdict`]) must know which it was.
pub const SCHEME_HEADER: &str = "x-shortlink-scheme";

/// The token of a capped click whose count the module sent and did not get back
/// ([`crate::click_count`]): the fallback counts the click with it, so a click Redis did count
/// is not counted twice. nginx sets it from `$shortlink_click_token` (empty, hence not sent, when
/// the module counted nothing), which also drops any such header the client sent: a token a
/// client could choose would let it replay one click's count without ever spending the cap.
/// The fallback reads it only on its own route, under nginx's key (role `resolve`).
pub const CLICK_TOKEN_HEADER: &str = "x-shortlink-click-token";

/// What the header's value starts with; nginx writes `"ws=$shortlink_workspace"`.
pub const WORKSPACE_PREFIX: &str = "ws=";

/// The workspace the header names, as the module reads `$shortlink_workspace`
/// (`request::workspace::HostWorkspace::of_value`). `None` (no code answers on that host): no
/// header, a value without the prefix, or one whose rest is empty or not a workspace name.
pub fn host_workspace(header: Option<&[u8]>) -> Option<WorkspaceName> {
    let name = header?.strip_prefix(WORKSPACE_PREFIX.as_bytes())?;
    WorkspaceName::parse(name)
}

/// The header's value for `name`, as nginx sends it (tests and tools that stand in for nginx).
pub fn header_value(name: &str) -> String {
    format!("{WORKSPACE_PREFIX}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefixed_name_is_the_hosts_workspace() {
        for name in ["default", "brand-a", "0"] {
            let value = header_value(name);
            assert_eq!(
                host_workspace(Some(value.as_bytes())).map(|w| w.to_string()),
                Some(name.to_owned())
            );
        }
    }

    #[test]
    fn a_missing_header_a_bare_name_or_an_empty_or_malformed_one_names_none() {
        assert_eq!(host_workspace(None), None);
        // What nginx sent before the prefix: a bare name is not the contract.
        assert_eq!(host_workspace(Some(b"brand-a")), None);
        assert_eq!(host_workspace(Some(b"")), None);
        for bad in ["", "Brand_A", "-", "brand a", &"x".repeat(33), "ws=brand-a"] {
            let value = header_value(bad);
            assert_eq!(host_workspace(Some(value.as_bytes())), None, "{value:?}");
        }
    }
}

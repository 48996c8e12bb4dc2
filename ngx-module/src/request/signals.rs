//! A click's verdict (`shortlink_wire::verdict`) from what nginx parsed: the raw signals every
//! tracked visit records, and the verdict computed only where a click spends something.

use nginx_sys::{ngx_http_request_t, NGX_HTTP_HEAD, NGX_HTTP_OPTIONS};
use shortlink_wire::agent::Audience;
use shortlink_wire::agent_cache::AgentCache;
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::verdict::{Reasons, Signals, Verdict};

use super::swept;
use crate::conf::{Dynamic, MainConf};
use crate::request::{click, value};

/// The request's signals: the method, whether `Accept-Language` came, whether the connection is
/// TLS, and over TLS only whether `Sec-Fetch-Mode` came (browsers send fetch metadata to secure
/// origins only, so over plain HTTP its absence says nothing and is never looked for: a plain
/// redirect pays for a method compare, two pointer tests and nothing else).
pub fn of(r: &mut ngx_http_request_t, mcf: &MainConf) -> Signals {
    let mut bits = 0;
    if r.method & NGX_HTTP_HEAD as usize != 0 {
        bits |= Signals::HEAD;
    } else if r.method & NGX_HTTP_OPTIONS as usize != 0 {
        bits |= Signals::OPTIONS;
    }
    if r.headers_in.accept_language.is_null() {
        bits |= Signals::NO_LANGUAGE;
    }
    // SAFETY: the connection of a live request is live.
    if unsafe { !(*r.connection).ssl.is_null() } {
        bits |= Signals::SECURE;
        if !has_fetch_mode(r, mcf) {
            bits |= Signals::NO_FETCH_MODE;
        }
    }
    Signals::new(bits)
}

thread_local! {
    /// The worker's judged agents (`shortlink_wire::agent_cache::AgentCache`): a phone's repeated
    /// agent costs a hash, not a pass of the agent table. Const-initialised and without a
    /// destructor, so `with` cannot fail (no panic on the request path).
    static AGENTS: AgentCache = const { AgentCache::new() };
}

/// The click-time verdict of `r` on a link of `workspace` (`None`: `default`) from the agent
/// table, method, hosting network, headers, and then the sweeps noticed in that workspace
/// ([`super::swept`]): computed for a click that would spend a link's `max_visits`, never for a
/// plain redirect, so only such a click looks its client's network up
/// (`shortlink_hosting_networks`: a bisection of the listed ranges).
pub fn verdict(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    workspace: Option<&WorkspaceName>,
) -> Verdict {
    let mut signals = of(r, mcf);
    let client = click::client_addr(r);
    if let Some(networks) = &mcf.networks {
        signals = signals.with_network(client.is_some_and(|ip| networks.holds(ip)));
    }
    let ua = click::user_agent(r);
    let verdict = AGENTS.with(|agents| agents.verdict(ua, signals));
    let workspace = || workspace.copied().unwrap_or(WorkspaceName::DEFAULT);
    match client {
        Some(ip) if verdict.is_human() && swept::holds(workspace, ip, ua) => Verdict {
            audience: Audience::Scanner,
            reasons: Reasons(Reasons::SWEEP),
            label: None,
        },
        _ => verdict,
    }
}

fn has_fetch_mode(r: &mut ngx_http_request_t, mcf: &MainConf) -> bool {
    let Ok(index) = usize::try_from(mcf.fetch_mode_var_index) else {
        return true;
    };
    value::of(r, Dynamic::Variable(index)).is_some_and(|v| !v.is_empty())
}

//! A domain's health state: what the health job finds and what the certificate and traffic checks
//! report, kept apart from the job so the checks do not import the job that runs them.

use serde::{Deserialize, Serialize};

/// A domain's state. Ordered by severity: a check's worst finding wins.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Known (named by a request or by `--short-domains`) but not checked yet.
    Unknown,
    Healthy,
    Degraded,
    SuspectedBlocked,
    Unreachable,
}

impl State {
    /// The states a check can find, one `shortlink_domain_health` series each: `unknown` is only
    /// ever shown before a domain's first check, and has no series.
    pub const CHECKED: [State; 4] = [
        State::Healthy,
        State::Degraded,
        State::SuspectedBlocked,
        State::Unreachable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::SuspectedBlocked => "suspected-blocked",
            State::Unreachable => "unreachable",
        }
    }
}

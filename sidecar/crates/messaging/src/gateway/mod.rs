//! Compose's hand-off to a real SMS gateway (issue 68, docs/DELIVERIES.md "Sending through
//! Kannel"): the workspace's gateway made ready ([`ready`]), one message through Kannel's
//! `sendsms` ([`kannel`]), a compose request's send job ([`job`]: its queue in SQL; [`runner`]:
//! the jobs a sidecar sends, resumed from a stopped one; [`sender`]: one job).

mod callback;
pub mod job;
pub mod kannel;
pub mod ready;
pub mod runner;
pub mod sender;
pub mod sends;

//! Not-found redirects (issue 70, `shortlink_wire::not_found`): where a pool host sends the bare
//! root, an unknown code and an expired or revoked link without an `expired_url`, instead of
//! today's 404 or 410.
//!
//! Each worker keeps its own copy of the hash `sl:nf` ([`Table`]) and answers from it: a 404
//! never waits for Redis, and never costs a round trip. A task per worker reads the whole hash
//! with one `HGETALL` every [`REFRESH_MS`] (and at once when the worker starts), and swaps the
//! copy in when the reply is whole; a failed read keeps the copy it had. So a change made through
//! the API is seen by every worker within [`REFRESH_MS`] plus a round trip, without a reload, and
//! a Redis outage keeps the last settings rather than reverting to 404s. With no setting at all
//! the table is empty and the not-found path pays one thread-local test.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::pin;
use std::time::Duration;

use ngx::async_::sleep;
use shortlink_wire::not_found::{self, Case, Field, Redirects, MAX_FIELDS};
use shortlink_wire::record::WorkspaceName;
use shortlink_wire::resp::Frame;

use crate::conf::MainConf;
use crate::request::workspace::HostWorkspace;
use crate::worker;

/// How often a worker reads the settings again: the longest a change waits to be seen.
pub const REFRESH_MS: u64 = 1000;

/// How soon a first read that failed is tried again.
const FIRST_RETRY_MS: u64 = 20;

/// How long a read may take before it counts as failed (the copy stays as it was).
const READ_TIMEOUT_MS: u64 = 1000;

thread_local! {
    /// Beside the worker state rather than in it: a cache hit answers while that is borrowed.
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
    /// Whether `TABLE` holds any setting: a const-initialised flag, so the path of a 404 while
    /// nothing is set is one thread-local load (the table's lazy initialisation is not paid).
    static ANY: Cell<bool> = const { Cell::new(false) };
}

/// Whether this worker's copy holds any setting.
#[inline]
pub fn any() -> bool {
    ANY.with(Cell::get)
}

/// Runs `f` on this worker's copy; `None` if it is being replaced further up the stack.
#[inline]
pub fn with_table<R>(f: impl FnOnce(&Table) -> R) -> Option<R> {
    TABLE
        .try_with(|table| table.try_borrow().ok().map(|table| f(&table)))
        .ok()
        .flatten()
}

fn store(table: Table) {
    let any = !table.is_empty();
    let _ = TABLE.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = table;
            ANY.with(|flag| flag.set(any));
        }
    });
}

/// A worker's copy of every setting, by host and by workspace. A host's settings are kept per
/// workspace that set them (normally one): only the one of the workspace nginx maps the host to
/// applies, so a host moved between workspaces never answers with its former owner's URL.
#[derive(Default)]
pub struct Table {
    domains: HashMap<Box<[u8]>, Vec<(WorkspaceName, Redirects)>>,
    workspaces: HashMap<WorkspaceName, Redirects>,
}

impl Table {
    /// Whether no host or workspace has a setting: today's answers everywhere.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty() && self.workspaces.is_empty()
    }

    /// Where `case` on `host` is sent, if anywhere: the host's setting of its workspace, else
    /// the workspace's. `workspace` (the host's, as nginx maps it) is asked only when the host
    /// or some workspace has settings (nginx's `map` is not free). Without `shortlink_workspace`
    /// every host is the default workspace's, as every code is.
    pub fn choose(
        &self,
        host: &[u8],
        workspace: impl FnOnce() -> HostWorkspace,
        case: Case,
    ) -> Option<&str> {
        let rows = self.domains.get(host);
        if rows.is_none() && self.workspaces.is_empty() {
            return None;
        }
        let name = match workspace() {
            HostWorkspace::Default | HostWorkspace::Unchecked => WorkspaceName::DEFAULT,
            HostWorkspace::Named(name) => name,
            HostWorkspace::Nothing => return None,
        };
        let domain = rows
            .and_then(|rows| rows.iter().find(|(owner, _)| *owner == name))
            .map(|(_, redirects)| redirects);
        not_found::choose(domain, self.workspaces.get(&name), case)
    }

    /// The table an `HGETALL sl:nf` reply holds; `None`: not a reply to it (the old copy stays).
    /// Fields or values this version cannot read are left out: their host or workspace keeps
    /// today's answers.
    pub fn from_reply(reply: Frame) -> Option<Table> {
        let Frame::Array(items) = reply else {
            return None;
        };
        let mut table = Table::default();
        for pair in items.chunks_exact(2).take(MAX_FIELDS) {
            let (Frame::Bulk(field), Frame::Bulk(value)) = (&pair[0], &pair[1]) else {
                return None;
            };
            let Some(redirects) = Redirects::decode(value).filter(|r| !r.is_empty()) else {
                continue;
            };
            match Field::parse(field) {
                Some(Field::Domain { workspace, host }) => {
                    if let Some(name) = WorkspaceName::parse(workspace) {
                        let rows = table.domains.entry(host.into()).or_default();
                        rows.push((name, redirects));
                    }
                }
                Some(Field::Workspace(name)) => {
                    if let Some(name) = WorkspaceName::parse(name) {
                        table.workspaces.insert(name, redirects);
                    }
                }
                None => {}
            }
        }
        Some(table)
    }
}

/// Reads the settings now, then every [`REFRESH_MS`], for the worker's life (the worker owns
/// the task: a new configuration's worker state drops it).
pub async fn refresh(mcf: &'static MainConf) {
    loop {
        let wait = match worker::with(mcf, |w| w.not_found_settings()) {
            // Spawned under the worker's borrow, the first poll finds it busy: until the first
            // read is sent the worker answers 404s it may be told to redirect, so soon again.
            None => FIRST_RETRY_MS,
            Some(Err(_)) => REFRESH_MS,
            Some(Ok(reply)) => {
                let frame = crate::lookup::deadline(pin!(reply), READ_TIMEOUT_MS).await;
                if let Some(table) = frame.ok().and_then(Result::ok).and_then(Table::from_reply) {
                    store(table);
                }
                REFRESH_MS
            }
        };
        sleep(Duration::from_millis(wait)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(s.as_bytes().to_vec())
    }

    fn reply(pairs: &[(&str, Redirects)]) -> Frame {
        let items = pairs
            .iter()
            .flat_map(|(field, r)| [bulk(field), bulk(&r.encode())])
            .collect();
        Frame::Array(items)
    }

    fn unknown(url: &str) -> Redirects {
        Redirects {
            unknown: Some(url.to_owned()),
            ..Default::default()
        }
    }

    #[test]
    fn a_hosts_setting_beats_its_workspaces_and_another_workspace_gets_neither() {
        let brand: WorkspaceName = "brand-a".parse().unwrap();
        let table = Table::from_reply(reply(&[
            ("w:brand-a", unknown("https://a/")),
            ("d:brand-a/go.a.example", unknown("https://go-a/")),
            ("w:default", unknown("https://default/")),
        ]))
        .unwrap();
        let on = |host: &str, ws| table.choose(host.as_bytes(), || ws, Case::Unknown);
        assert_eq!(
            on("go.a.example", HostWorkspace::Named(brand)),
            Some("https://go-a/")
        );
        assert_eq!(
            on("x.a.example", HostWorkspace::Named(brand)),
            Some("https://a/")
        );
        assert_eq!(
            on("b.example", HostWorkspace::Default),
            Some("https://default/")
        );
        let other = HostWorkspace::Named("brand-b".parse().unwrap());
        assert_eq!(on("b2.example", other), None);
        assert_eq!(on("b2.example", HostWorkspace::Nothing), None);
        assert_eq!(table.choose(b"go.a.example", || other, Case::Root), None);
        // Mapped to another workspace, the host has none of brand-a's settings.
        assert_eq!(on("go.a.example", other), None);
    }

    #[test]
    fn a_moved_host_answers_with_its_new_workspaces_setting_only() {
        let table = Table::from_reply(reply(&[
            ("d:brand-a/go.example", unknown("https://old-owner/")),
            ("d:brand-b/go.example", unknown("https://new-owner/")),
            // A sidecar from before issue 77 named no workspace: left out.
            ("d:go.example", unknown("https://unowned/")),
        ]))
        .unwrap();
        let on = |ws: &str| {
            let ws = HostWorkspace::Named(ws.parse().unwrap());
            table.choose(b"go.example", || ws, Case::Unknown)
        };
        assert_eq!(on("brand-b"), Some("https://new-owner/"));
        assert_eq!(on("brand-a"), Some("https://old-owner/"));
        assert_eq!(on("brand-c"), None);
        let unmapped = table.choose(b"go.example", || HostWorkspace::Unchecked, Case::Unknown);
        assert_eq!(unmapped, None, "the default workspace's, which set nothing");
    }

    #[test]
    fn unreadable_fields_are_left_out_and_non_replies_refused() {
        let table = Table::from_reply(Frame::Array(vec![
            bulk("w:brand-a"),
            bulk("9\nwhatever"),
            bulk("x:what"),
            bulk(&unknown("https://x/").encode()),
            bulk("w:Not A Name"),
            bulk(&unknown("https://x/").encode()),
        ]))
        .unwrap();
        assert!(table.is_empty());
        assert!(Table::from_reply(Frame::Null).is_none());
        assert!(Table::from_reply(Frame::Array(vec![Frame::Integer(1), bulk("x")])).is_none());
        assert!(Table::from_reply(Frame::Array(vec![])).unwrap().is_empty());
    }
}

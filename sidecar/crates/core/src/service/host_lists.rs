//! A workspace's own block and allow lists of target hosts (issue 79), set by its admins
//! ([`super::target_lists`] reads and writes them):
//! within what the operator allows (`--block-hosts`/`--allow-hosts` are checked first, by the
//! target's validation), and never over the threat feeds (a feed-listed target stays refused
//! whatever an allow list says: [`super::screen`] asks the feeds first).
//!
//! Kept as one row of the settings table per workspace (`target_lists:<id>`, JSON), as the
//! domains' drain states are: no table of their own for two short lists. Every create reads
//! them, so each sidecar keeps them for [`CACHE_FOR`]: an admin's change applies on every
//! sidecar within that time (at once on the one that took it).

use serde::{Deserialize, Serialize};
use shortlink_model::WorkspaceId;
use shortlink_threats::{normalize, Refusal};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a sidecar answers from its copy of a workspace's lists.
pub const CACHE_FOR: Duration = Duration::from_secs(5);

/// The feed name a refusal by the workspace's block list carries.
pub const BLOCK_LIST: &str = "workspace-block-list";
/// The feed name a refusal for being off the workspace's allow list carries.
pub const ALLOW_LIST: &str = "workspace-allow-list";

/// At most this many hosts per list.
pub const MAX_HOSTS: usize = 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetLists {
    /// Targets on these hosts or their subdomains are refused.
    pub block: Vec<String>,
    /// If not empty, only targets on these hosts or their subdomains are accepted.
    pub allow: Vec<String>,
    /// A listed target (by a feed or these lists) is stored quarantined, pending its admins'
    /// review (`POST /api/v1/links/{code}/release`), instead of refused.
    #[serde(default)]
    pub hold_for_review: bool,
}

impl TargetLists {
    /// The lists with each host normalised (lower case, punycode), sorted, without duplicates;
    /// `Err` names the first entry that is not a host, with its list.
    pub fn normalized(self) -> Result<Self, (&'static str, String)> {
        let hosts = |list: Vec<String>, name: &'static str| {
            if list.len() > MAX_HOSTS {
                return Err((name, format!("more than {MAX_HOSTS} hosts")));
            }
            let mut hosts = (list.into_iter())
                .map(|entry| normalize::host(&entry).ok_or((name, entry)))
                .collect::<Result<Vec<_>, _>>()?;
            hosts.sort();
            hosts.dedup();
            Ok(hosts)
        };
        Ok(Self {
            block: hosts(self.block, "block")?,
            allow: hosts(self.allow, "allow")?,
            hold_for_review: self.hold_for_review,
        })
    }

    /// Why `target` (a normalised target URL) is refused by these lists, if it is.
    pub fn refusal(&self, target: &str) -> Option<Refusal> {
        let (_, host) = normalize::serialized_parts(target)?;
        let listed = |list: &[String]| {
            normalize::self_and_parents(host).find(|name| {
                list.binary_search_by(|entry| entry.as_str().cmp(name))
                    .is_ok()
            })
        };
        if let Some(entry) = listed(&self.block) {
            return Some(Refusal {
                feed: BLOCK_LIST.to_owned(),
                entry: entry.to_owned(),
            });
        }
        (!self.allow.is_empty() && listed(&self.allow).is_none()).then(|| Refusal {
            feed: ALLOW_LIST.to_owned(),
            entry: host.to_owned(),
        })
    }
}

/// The lists each workspace had when last read, and when.
#[derive(Default)]
pub(super) struct Cache(Mutex<HashMap<WorkspaceId, (Instant, Arc<TargetLists>)>>);

impl Cache {
    /// `workspace`'s lists if read less than [`CACHE_FOR`] ago.
    pub(super) fn fresh(&self, workspace: WorkspaceId) -> Option<Arc<TargetLists>> {
        let cache = self.0.lock().ok()?;
        let (read_at, lists) = cache.get(&workspace)?;
        (read_at.elapsed() < CACHE_FOR).then(|| Arc::clone(lists))
    }

    pub(super) fn remember(&self, workspace: WorkspaceId, lists: &Arc<TargetLists>) {
        if let Ok(mut cache) = self.0.lock() {
            cache.insert(workspace, (Instant::now(), Arc::clone(lists)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_then_allow() {
        let lists = TargetLists {
            block: vec!["Bad.example".into(), "x.good.example".into()],
            allow: vec!["good.example".into()],
            hold_for_review: false,
        }
        .normalized()
        .unwrap();
        let feed = |url: &str| lists.refusal(url).map(|r| (r.feed, r.entry));
        assert_eq!(feed("https://good.example/"), None);
        assert_eq!(feed("https://www.good.example/a"), None);
        assert_eq!(
            feed("https://a.x.good.example/"),
            Some((BLOCK_LIST.into(), "x.good.example".into()))
        );
        assert_eq!(
            feed("https://other.example/"),
            Some((ALLOW_LIST.into(), "other.example".into()))
        );
        assert!(TargetLists {
            block: vec!["not a host".into()],
            allow: vec![],
            hold_for_review: false,
        }
        .normalized()
        .is_err());
    }
}

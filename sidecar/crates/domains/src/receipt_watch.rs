//! The receipts' counts in memory ([`crate::receipt_drain`] judges them): what the API hands
//! each stored receipt to, and the dead routes last found. A leaf: the health state holds one,
//! and the drain's job reads it.

use super::issuing::{IssuingBases, NoDrains, Spread};
use super::receipt_links::{CountedLinks, FirstOf};
use super::receipt_share::{self, CountedLink, Pending};
use super::receipts::{DeadRoute, ReceiptRule, ReceiptWindows, Series};
use chrono::Utc;
use shortlink_core::sync::LockOrRecover;
use shortlink_visits::deliveries::{NewReceipt, Recorded};
use std::sync::Mutex;

/// The receipts' counts and the dead routes last found, shared by the API and the job.
#[derive(Debug, Default)]
pub struct ReceiptWatch {
    pub(crate) windows: Mutex<ReceiptWindows>,
    /// What this sidecar counted since its last addition to the shared counts.
    pub(crate) pending: Mutex<Pending>,
    /// The links counted in the window: each counts once ([`crate::receipt_links`]).
    pub(crate) links: Mutex<CountedLinks>,
    pub(crate) dead_routes: Mutex<Vec<DeadRoute>>,
}

impl ReceiptWatch {
    pub(crate) fn configure(&self, rule: ReceiptRule) {
        *self.windows.lock_or_recover() = ReceiptWindows::new(rule);
    }

    /// What the receipts say of `domain` of `workspace` that is not the domain's fault: the
    /// dead routes it has receipts on.
    pub fn notes(&self, workspace: &str, domain: &str) -> Vec<String> {
        (self.dead_routes.lock_or_recover().iter())
            .filter(|dead| dead.workspace == workspace && dead.domains.iter().any(|d| d == domain))
            .map(DeadRoute::reason)
            .collect()
    }
}

impl ReceiptWatch {
    /// Counts the final receipts just stored in workspace `slug` (each with the receipt as
    /// checked, for the `short_url` it named); duplicates, non-final states and a link counted
    /// already in the window count nothing: the counts are of distinct links (recipients).
    pub fn stored<'a>(
        &self,
        list: &IssuingBases,
        slug: &str,
        stored: impl IntoIterator<Item = (&'a NewReceipt, &'a Recorded)>,
    ) {
        let now = unix_now();
        let mut windows = self.windows.lock_or_recover();
        let mut pending = self.pending.lock_or_recover();
        let mut links = self.links.lock_or_recover();
        for (new, recorded) in stored {
            let receipt = &recorded.receipt;
            if recorded.duplicate || !receipt.state.is_final() {
                continue;
            }
            let domain = match new.short_domain.as_deref() {
                Some(host) => (list.bases.iter())
                    .find(|base| base.host == host)
                    .map(|base| base.host.clone()),
                None if list.spread == Spread::Campaign => None,
                None => Some(
                    list.pick_live(&receipt.code, None, &NoDrains)
                        .host
                        .to_owned(),
                ),
            };
            let Some(domain) = domain else { continue };
            let series = Series {
                workspace: slug.to_owned(),
                carrier: receipt.carrier.clone().unwrap_or_default(),
                domain,
            };
            let first = links.first(&series, &receipt.code);
            if first == FirstOf::Repeat {
                continue;
            }
            let failed = receipt.state != shortlink_visits::deliveries::DeliveryState::Delivered;
            if first == FirstOf::Link {
                windows.record(&series, failed, receipt.error_code.as_deref(), now);
            }
            let link = CountedLink {
                series,
                code: receipt.code.clone(),
                at: now,
                failed,
                error_code: receipt.error_code.clone(),
            };
            receipt_share::count(&mut pending, link);
        }
    }
}

pub(crate) fn unix_now() -> u64 {
    u64::try_from(Utc::now().timestamp()).unwrap_or_default()
}

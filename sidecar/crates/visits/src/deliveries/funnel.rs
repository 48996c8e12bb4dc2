//! A campaign's funnel: its messages by current state (what the gateways last reported of each,
//! [`super::model::supersedes`]), then clicked and converted, per campaign and broken down per
//! short domain and per carrier.
//!
//! The unit is the message: a link with receipts counts once per message the gateways reported
//! (a re-send is a second message), a link with none once as "no receipt". `clicked` and
//! `converted` of a breakdown count those units whose link had a human click or a conversion;
//! the campaign's own `links`, `clicked` and `converted` count distinct links.

use super::model::DeliveryState;
use super::rate::DeliveredRate;

use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use std::collections::BTreeMap;

/// Counts of one part of a funnel (the campaign, one domain, one carrier).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunnelCounts {
    /// Messages with a receipt, plus links with none.
    pub units: i64,
    pub no_receipt: i64,
    /// Messages by current state (every state present, 0 included).
    pub states: BTreeMap<DeliveryState, i64>,
    /// Failed and rejected messages by their error code (`""`: none given).
    pub failed_errors: BTreeMap<String, i64>,
    pub rejected_errors: BTreeMap<String, i64>,
    pub clicked: i64,
    /// Of `clicked`, the delivered messages': the funnel's step after "delivered" (a click on a
    /// link whose message has no delivery report is counted in `clicked`, beside the step).
    pub clicked_delivered: i64,
    pub converted: i64,
    /// Of `converted`, the delivered and clicked messages'.
    pub converted_delivered: i64,
}

impl FunnelCounts {
    pub fn state(&self, state: DeliveryState) -> i64 {
        self.states.get(&state).copied().unwrap_or(0)
    }

    fn add(&mut self, row: &GroupRow) {
        self.units += row.n;
        match row.state {
            None => self.no_receipt += row.n,
            Some(state) => {
                *self.states.entry(state).or_default() += row.n;
                let errors = match state {
                    DeliveryState::Failed => Some(&mut self.failed_errors),
                    DeliveryState::Rejected => Some(&mut self.rejected_errors),
                    _ => None,
                };
                if let Some(errors) = errors {
                    let code = row.error_code.clone().unwrap_or_default();
                    *errors.entry(code).or_default() += row.n;
                }
            }
        }
        let delivered = row.state == Some(DeliveryState::Delivered);
        if row.clicked {
            self.clicked += row.n;
            if delivered {
                self.clicked_delivered += row.n;
            }
        }
        if row.converted {
            self.converted += row.n;
            if delivered && row.clicked {
                self.converted_delivered += row.n;
            }
        }
    }
}

/// A campaign's funnel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Funnel {
    /// Distinct links of the campaign, and those clicked (a human click) and converted.
    pub links: i64,
    pub clicked_links: i64,
    pub converted_links: i64,
    pub total: FunnelCounts,
    /// By the short domain a receipt's `short_url` named (`None`: none did).
    pub by_domain: BTreeMap<Option<String>, FunnelCounts>,
    /// By the carrier the receipts named (`None`: none did).
    pub by_carrier: BTreeMap<Option<String>, FunnelCounts>,
}

/// One group of the funnel's query: messages (or links without) alike in every key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    pub short_domain: Option<String>,
    pub carrier: Option<String>,
    pub state: Option<DeliveryState>,
    pub error_code: Option<String>,
    pub clicked: bool,
    pub converted: bool,
    pub n: i64,
}

/// The funnel from its groups (pure).
pub fn fold(links: (i64, i64, i64), rows: &[GroupRow]) -> Funnel {
    let mut funnel = Funnel {
        links: links.0,
        clicked_links: links.1,
        converted_links: links.2,
        ..Funnel::default()
    };
    for row in rows {
        funnel.total.add(row);
        (funnel
            .by_domain
            .entry(row.short_domain.clone())
            .or_default())
        .add(row);
        (funnel.by_carrier.entry(row.carrier.clone()).or_default()).add(row);
    }
    let all = (std::iter::once(&mut funnel.total))
        .chain(funnel.by_domain.values_mut())
        .chain(funnel.by_carrier.values_mut());
    for counts in all {
        for state in DeliveryState::ALL {
            counts.states.entry(state).or_default();
        }
    }
    funnel
}

#[async_trait]
pub trait FunnelStore: Send + Sync {
    /// The funnel of the workspace's campaign; `None` when no link of the workspace has it.
    async fn funnel(&self, workspace: WorkspaceId, campaign: &str)
        -> StorageResult<Option<Funnel>>;

    /// The delivered rate over time of the workspace's campaign ([`super::rate`]).
    async fn delivered_rate(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<DeliveredRate>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(domain: &str, state: Option<DeliveryState>, error: &str, clicked: bool) -> GroupRow {
        GroupRow {
            short_domain: Some(domain.into()),
            carrier: None,
            state,
            error_code: Some(error.into()).filter(|e: &String| !e.is_empty()),
            clicked,
            converted: false,
            n: 1,
        }
    }

    #[test]
    fn folds_groups_per_domain_and_state() {
        use DeliveryState::*;
        let rows = [
            row("a", Some(Delivered), "", true),
            row("a", Some(Failed), "005", false),
            row("b", Some(Failed), "005", false),
            row("b", None, "", false),
        ];
        let funnel = fold((4, 1, 0), &rows);
        assert_eq!(funnel.total.units, 4);
        assert_eq!(funnel.total.state(Failed), 2);
        assert_eq!(funnel.total.failed_errors.get("005"), Some(&2));
        assert_eq!(funnel.total.no_receipt, 1);
        assert_eq!(funnel.by_domain[&Some("a".into())].clicked, 1);
        assert_eq!(funnel.by_domain[&Some("b".into())].state(Rejected), 0);
        assert_eq!(funnel.by_carrier[&None].units, 4);
    }

    #[test]
    fn clicked_is_a_step_among_delivered_and_the_rest_is_beside_it() {
        use DeliveryState::*;
        let mut converted = row("a", Some(Delivered), "", true);
        converted.converted = true;
        let rows = [
            converted,
            row("a", Some(Delivered), "", false),
            row("a", None, "", true),
            row("a", Some(Submitted), "", true),
        ];
        let total = fold((4, 3, 1), &rows).total;
        assert_eq!((total.clicked, total.clicked_delivered), (3, 1));
        assert_eq!((total.converted, total.converted_delivered), (1, 1));
        assert!(total.clicked_delivered <= total.state(Delivered));
    }
}

//! What each A/B arm is, in the link's own terms: the URL it sends a click to and its rule's
//! condition in words, read from the rules as they are now (an arm whose rule or variant has
//! gone since reads as unknown). A campaign's arm has a URL when its links agree on one.

use crate::{AppState, Result};
use shortlink_model::link::rules::{arm_url, condition_text, parse_stored, RuleSpec};
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::LinkFilter;
use shortlink_visits::conversions::Scope;
use std::collections::HashMap;

/// A campaign's links read to name its arms: the newest this many. Campaign links are made
/// from one template, so a sample says what they share; a campaign of diverging links reads
/// as such within it.
pub const CAMPAIGN_LINKS_READ: u32 = 1000;

/// An arm by (rule index, variant index); `(None, None)` is the link's own target.
type ArmKey = (Option<u8>, Option<u8>);

/// One arm's URL and condition; `None` where unknown or, for a campaign, not shared by its links.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArmName {
    pub url: Option<String>,
    pub condition: Option<String>,
}

#[derive(Debug, Default)]
pub struct ArmNames(HashMap<ArmKey, ArmName>);

impl ArmNames {
    /// The arms of one link: its own target and every rule and variant of its rules.
    pub fn of_link(link: &Link) -> Self {
        let rules: Vec<RuleSpec> = (link.extras.rules.as_deref())
            .and_then(|text| parse_stored(text).ok())
            .unwrap_or_default();
        let mut names = HashMap::new();
        let own = ArmName {
            url: Some(link.target.clone()),
            condition: None,
        };
        names.insert((None, None), own);
        for (index, rule) in rules.iter().enumerate() {
            let Ok(index) = u8::try_from(index) else {
                break;
            };
            let condition = Some(condition_text(&rule.when));
            let variants = rule.split.as_ref().map_or(0, |split| split.variants.len());
            let arms = (rule.then.is_some().then_some(None))
                .into_iter()
                .chain((0..variants).filter_map(|v| u8::try_from(v).ok().map(Some)));
            for variant in arms {
                let name = ArmName {
                    url: arm_url(&rules, index, variant).map(str::to_owned),
                    condition: condition.clone(),
                };
                names.insert((Some(index), variant), name);
            }
        }
        Self(names)
    }

    /// The arms several links share: a URL or condition where every link has the same.
    fn shared(links: &[Link]) -> Self {
        let mut links = links.iter().map(Self::of_link);
        let Some(mut shared) = links.next() else {
            return Self::default();
        };
        for other in links {
            shared.0.retain(|key, _| other.0.contains_key(key));
            for (key, name) in &mut shared.0 {
                let theirs = &other.0[key];
                if name.url != theirs.url {
                    name.url = None;
                }
                if name.condition != theirs.condition {
                    name.condition = None;
                }
            }
        }
        shared
    }

    /// The arm at `rule_index` and `variant`; unknown if the rules have none there.
    pub fn get(&self, rule_index: Option<u8>, variant: Option<u8>) -> ArmName {
        (self.0.get(&(rule_index, variant)).cloned()).unwrap_or_default()
    }
}

/// The arms of the A/B scope: one link's, or what the campaign's links (the newest
/// [`CAMPAIGN_LINKS_READ`]) share.
pub async fn arm_names(
    state: &AppState,
    workspace: WorkspaceId,
    scope: &Scope,
) -> Result<ArmNames> {
    Ok(match scope {
        Scope::Link(code) => ArmNames::of_link(&state.links.get(workspace, code).await?),
        Scope::Campaign(campaign) => {
            let mut filter = LinkFilter::in_workspace(workspace);
            filter.campaign = Some(campaign.clone());
            let links = (state.links.storage())
                .list_links(&filter, None, CAMPAIGN_LINKS_READ)
                .await?;
            ArmNames::shared(&links)
        }
    })
}

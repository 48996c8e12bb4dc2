//! What a subscription change records in the audit log. The secret never, and the URL only by
//! its origin: receivers' URLs often carry a token in their path or query (a chat hook's), so a
//! change to the rest of it reads as a secret's ([`Changes::secret`]).

use super::subscription::SubscriptionSpec;
use serde_json::Value;
use shortlink_store::audit::Changes;

/// The fields recorded as they are, in [`plain`]'s order.
const PLAIN: [&str; 7] = [
    "name",
    "campaigns",
    "tags",
    "include_bots",
    "batch_size",
    "batch_ms",
    "link_events",
];

fn plain(spec: &SubscriptionSpec) -> [Value; 7] {
    [
        spec.name.clone().into(),
        spec.campaigns.clone().into(),
        spec.tags.clone().into(),
        spec.include_bots.into(),
        spec.batch_size.into(),
        spec.batch_ms.into(),
        spec.link_events.into(),
    ]
}

/// A subscription as it was (`None`: created) and as it is (`None`: deleted), with its secret.
pub(crate) fn changes(
    before: Option<(&SubscriptionSpec, &str)>,
    after: Option<(&SubscriptionSpec, &str)>,
) -> Changes {
    let origin = |side: Option<(&SubscriptionSpec, &str)>| {
        side.map(|(spec, _)| spec.url.origin().ascii_serialization())
    };
    let mut changes = Changes::new().diff("url_origin", origin(before), origin(after));
    let (old, new) = (before.map(|(s, _)| plain(s)), after.map(|(s, _)| plain(s)));
    for (i, name) in PLAIN.iter().enumerate() {
        let value = |side: &Option<[Value; 7]>| side.as_ref().map_or(Value::Null, |v| v[i].clone());
        changes = changes.diff(name, value(&old), value(&new));
    }
    let url_changed =
        before.map(|(spec, _)| spec.url.as_str()) != after.map(|(spec, _)| spec.url.as_str());
    let secret_changed = before.map(|(_, secret)| secret) != after.map(|(_, secret)| secret);
    let (had, has) = (before.is_some(), after.is_some());
    changes
        .secret("url", had, has, url_changed)
        .secret("secret", had, has, secret_changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shortlink_store::audit::{CHANGED, REDACTED};

    fn spec(url: &str) -> SubscriptionSpec {
        SubscriptionSpec {
            name: "crm".into(),
            url: url.parse().unwrap(),
            campaigns: vec!["spring".into()],
            tags: Vec::new(),
            include_bots: false,
            batch_size: 100,
            batch_ms: 1000,
            link_events: true,
        }
    }

    #[test]
    fn neither_the_secret_nor_the_url_path_is_recorded() {
        let old = spec("https://hooks.example/T000/B000/tokenold");
        let new = spec("https://hooks.example/T000/B000/tokennew");
        let replaced = changes(Some((&old, "secret-one")), Some((&new, "secret-two")));
        let text = replaced.to_json();
        for leak in ["tokenold", "tokennew", "secret-one", "secret-two"] {
            assert!(!text.contains(leak), "{text}");
        }
        assert_eq!(replaced.get("url"), Some(&json!([REDACTED, CHANGED])));
        assert_eq!(replaced.get("secret"), Some(&json!([REDACTED, CHANGED])));
        assert_eq!(replaced.get("name"), None);
        let created = changes(None, Some((&new, "s")));
        assert_eq!(
            created.get("url_origin"),
            Some(&json!([null, "https://hooks.example"]))
        );
        assert_eq!(created.get("campaigns"), Some(&json!([null, ["spring"]])));
        let deleted = changes(Some((&new, "s")), None);
        assert_eq!(deleted.get("secret"), Some(&json!([REDACTED, null])));
    }
}

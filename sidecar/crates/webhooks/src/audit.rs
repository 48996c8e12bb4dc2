//! What a subscription change records in the audit log. The secret never, and the URL only by
//! its origin: receivers' URLs often carry a token in their path or query (a chat hook's), so a
//! change to the rest of it reads as a secret's ([`Changes::secret`]).

use super::subscription::SubscriptionSpec;
use shortlink_store::audit::Changes;

/// A subscription as it was (`None`: created) and as it is (`None`: deleted), with its secret.
pub(crate) fn changes(
    before: Option<(&SubscriptionSpec, &str)>,
    after: Option<(&SubscriptionSpec, &str)>,
) -> Changes {
    let origin = |side: Option<(&SubscriptionSpec, &str)>| {
        side.map(|(spec, _)| spec.url.origin().ascii_serialization())
    };
    let field = |side: Option<(&SubscriptionSpec, &str)>,
                 read: fn(&SubscriptionSpec) -> serde_json::Value| {
        side.map_or(serde_json::Value::Null, |(spec, _)| read(spec))
    };
    let mut changes = Changes::new().diff("url_origin", origin(before), origin(after));
    let fields: [(&str, fn(&SubscriptionSpec) -> serde_json::Value); 6] = [
        ("name", |s| s.name.clone().into()),
        ("campaigns", |s| s.campaigns.clone().into()),
        ("tags", |s| s.tags.clone().into()),
        ("include_bots", |s| s.include_bots.into()),
        ("batch_size", |s| s.batch_size.into()),
        ("batch_ms", |s| s.batch_ms.into()),
    ];
    for (name, read) in fields {
        changes = changes.diff(name, field(before, read), field(after, read));
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

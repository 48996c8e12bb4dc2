//! The `changes` of an audit row: `{"field": [before, after]}`, with secrets never written.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use shortlink_model::Link;

/// What a secret that was there reads as (a password digest, a webhook secret).
pub const REDACTED: &str = "<redacted>";
/// What a secret set or replaced reads as.
pub const CHANGED: &str = "<changed>";

/// Changed fields, each `[before, after]` (`null`: none). Keys sort, so equal changes are equal
/// text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes(Map<String, Value>);

impl Changes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `field` if `before` and `after` differ.
    pub fn diff<T: PartialEq + Into<Value> + Clone>(
        mut self,
        field: &str,
        before: T,
        after: T,
    ) -> Self {
        if before != after {
            self.0
                .insert(field.to_owned(), json!([before.into(), after.into()]));
        }
        self
    }

    /// Records `field` as set to `value` (a creation, a count).
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0
            .insert(field.to_owned(), json!([Value::Null, value.into()]));
        self
    }

    /// Records a secret field without its values: `[before, after]` as [`REDACTED`] for one that
    /// was there, [`CHANGED`] for one now there, `null` for none; nothing if it did not change.
    pub fn secret(mut self, field: &str, had: bool, has: bool, changed: bool) -> Self {
        if changed {
            let before = if had { json!(REDACTED) } else { Value::Null };
            let after = if has { json!(CHANGED) } else { Value::Null };
            self.0.insert(field.to_owned(), json!([before, after]));
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }

    /// The stored JSON text.
    pub fn to_json(&self) -> String {
        Value::Object(self.0.clone()).to_string()
    }
}

fn time(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The `changes` of a link update (`link.update`, `link.revoke`), from the link as locked and as
/// written: every field a caller can change, the password and the recipient's `ref` as
/// [`Changes::secret`] (neither the digest nor the ref is ever written). Derived fields (`url_hash`, `updated_at`, counters) are left out.
pub fn link_changes(before: &Link, after: &Link) -> Changes {
    let (b, a) = (&before.extras, &after.extras);
    Changes::new()
        .diff("target", before.target.clone(), after.target.clone())
        .diff("redirect", before.redirect, after.redirect)
        .diff("flags", before.flags.0, after.flags.0)
        .diff(
            "expires_at",
            time(before.expires_at),
            time(after.expires_at),
        )
        .diff(
            "revoked_at",
            time(before.revoked_at),
            time(after.revoked_at),
        )
        .diff(
            "quarantined_at",
            time(before.quarantined_at),
            time(after.quarantined_at),
        )
        .diff("campaign", before.campaign.clone(), after.campaign.clone())
        // Personal data (a customer id, a phone-derived key): an erase cannot reach an audit
        // row, whose hash the chain covers, so the row says only that it was set or changed.
        .secret(
            "ref",
            before.recipient_ref.is_some(),
            after.recipient_ref.is_some(),
            before.recipient_ref != after.recipient_ref,
        )
        .diff("tags", before.tags.clone(), after.tags.clone())
        .diff("valid_since", time(b.valid_since), time(a.valid_since))
        .diff("not_yet_url", b.not_yet_url.clone(), a.not_yet_url.clone())
        .diff("expired_url", b.expired_url.clone(), a.expired_url.clone())
        .diff("rules", b.rules.clone(), a.rules.clone())
        .diff("max_visits", b.max_visits, a.max_visits)
        .diff("preview", b.preview.clone(), a.preview.clone())
        .diff(
            "click_id_param",
            b.click_id_param.clone(),
            a.click_id_param.clone(),
        )
        .secret(
            "password",
            b.password_digest.is_some(),
            a.password_digest.is_some(),
            b.password_digest != a.password_digest,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_model::WorkspaceId;

    fn link() -> Link {
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        Link::new(
            "abc".into(),
            WorkspaceId::DEFAULT,
            "https://a.example/".into(),
            "0".repeat(64),
            at,
        )
    }

    #[test]
    fn a_link_update_lists_what_changed_and_never_the_password_digest() {
        let before = link();
        let mut after = link();
        after.target = "https://b.example/".into();
        after.tags = vec!["x".into()];
        after.visit_count = 9;
        after.extras.password_digest = Some("deadbeef".repeat(8));
        after.recipient_ref = Some("customer-4711".into());
        let changes = link_changes(&before, &after);
        assert_eq!(
            changes.get("target"),
            Some(&json!(["https://a.example/", "https://b.example/"]))
        );
        assert_eq!(changes.get("tags"), Some(&json!([[], ["x"]])));
        assert_eq!(changes.get("password"), Some(&json!([null, CHANGED])));
        assert_eq!(changes.get("ref"), Some(&json!([null, CHANGED])));
        assert_eq!(changes.get("visit_count"), None);
        assert!(
            !changes.to_json().contains("deadbeef") && !changes.to_json().contains("4711"),
            "{}",
            changes.to_json()
        );
        let mut again = after.clone();
        again.extras.password_digest = Some("cafe".repeat(16));
        assert_eq!(
            link_changes(&after, &again).get("password"),
            Some(&json!([REDACTED, CHANGED]))
        );
        assert!(link_changes(&after, &after).is_empty());
    }
}

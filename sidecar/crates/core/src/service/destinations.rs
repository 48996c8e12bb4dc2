//! Every URL a link can send a visitor to besides nothing: its target, its not-yet and expired
//! targets, and its click-time rules' targets and split variants (docs/RULES.md). The threat
//! check at create and at a change looks at each, and so does the quarantine after the fact.

use super::ServiceError;
use shortlink_model::link::rules;
use shortlink_model::{Link, LinkExtras};
use shortlink_store::LinkTx;

/// The link's destinations, its target first, each once.
pub fn of(target: &str, extras: &LinkExtras) -> Vec<String> {
    let mut urls = vec![target.to_owned()];
    urls.extend(besides_target(extras));
    let mut seen = std::collections::HashSet::new();
    urls.retain(|url| seen.insert(url.clone()));
    urls
}

/// The destinations other than the target: lifecycle URLs and rules' targets. Stored rules
/// were checked at their write; text that no longer parses sends nowhere and gives none.
pub fn besides_target(extras: &LinkExtras) -> Vec<String> {
    let mut urls: Vec<String> = [&extras.not_yet_url, &extras.expired_url]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let stored = extras.rules.as_deref().map(rules::parse_stored);
    for rule in stored.into_iter().flat_map(Result::unwrap_or_default) {
        urls.extend(rule.then.map(|then| then.url));
        let variants = rule.split.map(|split| split.variants).unwrap_or_default();
        urls.extend(variants.into_iter().map(|variant| variant.url));
    }
    urls
}

/// Writes `link`'s destinations besides its target where the quarantine after the fact finds
/// them by host, unless they are `before`'s (a change that left them alone). A link with none
/// (most) writes nothing at its creation.
pub(super) async fn index(
    tx: &mut dyn LinkTx,
    link: &Link,
    before: Option<&Link>,
) -> Result<(), ServiceError> {
    let besides = besides_target(&link.extras);
    let unchanged = match before {
        Some(before) => besides_target(&before.extras) == besides,
        None => besides.is_empty(),
    };
    if !unchanged {
        tx.set_destination_hosts(&link.code, &besides).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_a_link_can_answer_with_once() {
        let extras = LinkExtras {
            not_yet_url: Some("https://soon.example/".into()),
            expired_url: Some("https://over.example/".into()),
            rules: Some(
                r#"[{"if":{},"then":{"url":"https://rule.example/"}},
                    {"if":{},"split":{"variants":[{"weight":1,"url":"https://a.example/"},
                                                  {"weight":1,"url":"https://own.example/"}]}}]"#
                    .into(),
            ),
            ..LinkExtras::default()
        };
        assert_eq!(
            of("https://own.example/", &extras),
            [
                "https://own.example/",
                "https://soon.example/",
                "https://over.example/",
                "https://rule.example/",
                "https://a.example/",
            ]
        );
        assert_eq!(of("https://own.example/", &LinkExtras::default()).len(), 1);
    }
}

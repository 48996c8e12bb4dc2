//! Rules in words, for the pages and answers that name an A/B arm by where it sends a click and
//! when ("https://b.example/ when country PT or BR") rather than by its indexes.

use super::spec::{Conditions, RuleSpec};

/// Where rule `rule` sends a click: its `then` URL, or variant `variant`'s of its split; `None`
/// when the rules have no such rule or variant (changed since the click).
pub fn arm_url(rules: &[RuleSpec], rule: u8, variant: Option<u8>) -> Option<&str> {
    let rule = rules.get(usize::from(rule))?;
    match (variant, &rule.then, &rule.split) {
        (None, Some(then), _) => Some(&then.url),
        (Some(variant), _, Some(split)) => {
            (split.variants.get(usize::from(variant))).map(|v| v.url.as_str())
        }
        _ => None,
    }
}

/// A rule's condition in words, its parts joined by "and": `device ios and country PT or BR`;
/// `always` for an empty `if`.
pub fn condition_text(when: &Conditions) -> String {
    let mut parts = Vec::new();
    let mut list = |name: &str, values: &Option<Vec<String>>| {
        if let Some(values) = values.as_ref().filter(|v| !v.is_empty()) {
            parts.push(format!("{name} {}", values.join(" or ")));
        }
    };
    list("device", &when.device);
    list("language", &when.language);
    list("country", &when.country);
    list("address in", &when.ip);
    for query in when.query.iter().flatten() {
        parts.push(match &query.value {
            Some(value) => format!("query {}={value}", query.name),
            None => format!("query has {}", query.name),
        });
    }
    let time = |at: &chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%d %H:%M UTC").to_string();
    if let Some(after) = &when.after {
        parts.push(format!("from {}", time(after)));
    }
    if let Some(before) = &when.before {
        parts.push(format!("before {}", time(before)));
    }
    if let Some(weekly) = &when.weekly {
        parts.push(format!(
            "on {} at {} ({})",
            weekly.days.join(" "),
            hour_ranges(&weekly.hours),
            weekly.zone
        ));
    }
    if parts.is_empty() {
        "always".to_owned()
    } else {
        parts.join(" and ")
    }
}

/// Whole hours as ranges of the clock: `[9, 10, 11, 14]` as `9:00–11:59, 14:00–14:59`.
fn hour_ranges(hours: &[u8]) -> String {
    let mut sorted = hours.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut ranges: Vec<(u8, u8)> = Vec::new();
    for hour in sorted {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == hour => *end = hour,
            _ => ranges.push((hour, hour)),
        }
    }
    (ranges.iter())
        .map(|(start, end)| format!("{start}:00–{end}:59"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<RuleSpec> {
        serde_json::from_value(serde_json::json!([
            {"if": {"device": ["ios"], "country": ["PT", "BR"]}, "then": {"url": "https://ios.example/"}},
            {"if": {"query": [{"name": "utm_source", "value": "sms"}, {"name": "ab"}],
                    "weekly": {"days": ["mon", "tue"], "hours": [14, 9, 10, 11], "zone": "Europe/Lisbon"}},
             "split": {"variants": [{"weight": 1, "url": "https://a.example/"},
                                    {"weight": 1, "url": "https://b.example/"}]}},
            {"if": {}, "then": {"url": "https://c.example/"}}
        ]))
        .unwrap()
    }

    #[test]
    fn an_arm_is_its_rule_or_variant_url() {
        let rules = rules();
        assert_eq!(arm_url(&rules, 0, None), Some("https://ios.example/"));
        assert_eq!(arm_url(&rules, 1, Some(1)), Some("https://b.example/"));
        assert_eq!(arm_url(&rules, 1, Some(2)), None, "no such variant");
        assert_eq!(arm_url(&rules, 1, None), None, "a split has no own URL");
        assert_eq!(arm_url(&rules, 3, None), None, "no such rule");
    }

    #[test]
    fn conditions_read_as_words() {
        let rules = rules();
        assert_eq!(
            condition_text(&rules[0].when),
            "device ios and country PT or BR"
        );
        assert_eq!(
            condition_text(&rules[1].when),
            "query utm_source=sms and query has ab and on mon tue at 9:00–11:59, 14:00–14:59 \
             (Europe/Lisbon)"
        );
        assert_eq!(condition_text(&rules[2].when), "always");
    }
}

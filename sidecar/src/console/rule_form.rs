//! The rules as forms (issue 80): one fieldset per rule with its conditions, its answer (a
//! target or a split of weighted variants) and its schedule, plus an empty rule and two empty
//! variants to add. Read back into the API's own rule types ([`RuleSpec`]) and saved as the JSON
//! editor saves, so the forms can write nothing the API would not take, and the JSON stays one
//! click away. Fields are named `r<rule>.<field>` and `r<rule>.v<variant>.<field>`; no script.

use chrono::{DateTime, Utc};
use maud::{html, Markup};
use shortlink_api::Error;
use shortlink_model::link::rules::{
    Conditions, QuerySpec, RuleSpec, SplitSpec, StickyMode, StickySpec, TargetSpec, VariantSpec,
    WeeklySpec,
};
use std::collections::BTreeMap;

const DEVICES: [&str; 4] = ["ios", "android", "desktop", "other"];
const REDIRECTS: [&str; 5] = ["", "301", "302", "307", "308"];
/// Empty variant rows under each split (a split needs at least two).
const BLANK_VARIANTS: usize = 2;

fn list(values: Option<&Vec<String>>) -> String {
    values.map(|v| v.join(", ")).unwrap_or_default()
}

fn sticky_value(sticky: StickySpec) -> &'static str {
    match sticky {
        StickySpec::Flag(false) => "false",
        StickySpec::Flag(true) => "true",
        StickySpec::Mode(StickyMode::Ref) => "ref",
        StickySpec::Mode(StickyMode::Cookie) => "cookie",
        StickySpec::Mode(StickyMode::Visitor) => "visitor",
    }
}

fn select(name: &str, label: &str, options: &[(&str, &str)], chosen: &str) -> Markup {
    html! {
        label { (label)
            select name=(name) {
                @for (value, text) in options { option value=(value) selected[*value == chosen] { (text) } }
            }
        }
    }
}

fn text(name: &str, label: &str, value: &str, hint: &str) -> Markup {
    html! { label { (label) input type="text" name=(name) value=(value) placeholder=(hint); } }
}

fn redirect_options() -> Vec<(&'static str, &'static str)> {
    REDIRECTS
        .iter()
        .map(|r| (*r, if r.is_empty() { "the link's" } else { r }))
        .collect()
}

fn forward_value(forward: Option<bool>) -> &'static str {
    match forward {
        None => "",
        Some(true) => "true",
        Some(false) => "false",
    }
}

const FORWARD: [(&str, &str); 3] = [("", "the link's"), ("true", "yes"), ("false", "no")];

/// One rule's fieldset; `None`: the empty rule that adds one.
fn rule_fields(i: usize, rule: Option<&RuleSpec>) -> Markup {
    let empty = RuleSpec {
        when: Conditions::default(),
        then: None,
        split: None,
    };
    let rule = rule.unwrap_or(&empty);
    let when = &rule.when;
    let n = |field: &str| format!("r{i}.{field}");
    let time = |at: Option<DateTime<Utc>>| at.map(|at| at.to_rfc3339()).unwrap_or_default();
    let weekly = when.weekly.as_ref();
    let query = (when.query.iter().flatten())
        .map(|q| match &q.value {
            Some(value) => format!("{}={value}", q.name),
            None => q.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let answer = if rule.split.is_some() {
        "split"
    } else {
        "then"
    };
    let then = rule.then.as_ref();
    let split = rule.split.as_ref();
    let variants = split.map_or(&[][..], |s| s.variants.as_slice());
    html! {
        fieldset.rule {
            legend { @if rule.then.is_some() || rule.split.is_some() { "Rule " (i + 1) } @else { "Add a rule" } }
            div.conditions {
                span.group-label { "When (every one given must hold; none: always)" }
                div.checks { "Device"
                    @for device in DEVICES {
                        label { input type="checkbox" name=(n("device")) value=(device)
                            checked[when.device.iter().flatten().any(|d| d == device)]; " " (device) }
                    }
                }
                (text(&n("language"), "Languages", &list(when.language.as_ref()), "pt, en-gb"))
                (text(&n("country"), "Countries", &list(when.country.as_ref()), "PT, BR"))
                (text(&n("query"), "Query parameters", &query, "src=sms, promo"))
                (text(&n("ip"), "Address ranges", &list(when.ip.as_ref()), "192.0.2.0/24"))
                (text(&n("after"), "From (RFC 3339)", &time(when.after), "2026-12-01T09:00:00Z"))
                (text(&n("before"), "Until (RFC 3339)", &time(when.before), ""))
                (text(&n("days"), "Weekdays", &weekly.map(|w| w.days.join(", ")).unwrap_or_default(), "mon, fri"))
                (text(&n("hours"), "Hours", &weekly.map(|w| w.hours.iter().map(u8::to_string).collect::<Vec<_>>().join(", ")).unwrap_or_default(), "9, 10, 11"))
                (text(&n("zone"), "Time zone", weekly.map_or("", |w| w.zone.as_str()), "Europe/Lisbon"))
            }
            (select(&n("answer"), "Answer with", &[("then", "one target"), ("split", "a split (A/B)")], answer))
            div.target {
                (text(&n("url"), "Target URL", then.map_or("", |t| t.url.as_str()), "https://shop.example/pt"))
                (select(&n("redirect"), "Redirect", &redirect_options(), &then.and_then(|t| t.redirect).map(|r| r.to_string()).unwrap_or_default()))
                (select(&n("forward_query"), "Forward the query", &FORWARD, forward_value(then.and_then(|t| t.forward_query))))
            }
            div.split {
                (select(&n("sticky"), "Sticky", &[("false", "no: per click"), ("true", "yes: ref, else cookie"), ("ref", "by ref"), ("cookie", "by cookie"), ("visitor", "by address and agent")],
                    split.map_or("false", |s| sticky_value(s.sticky))))
                @for j in 0..variants.len() + BLANK_VARIANTS {
                    @let v = variants.get(j);
                    @let vn = |field: &str| format!("r{i}.v{j}.{field}");
                    div.variant {
                        (text(&vn("weight"), "Weight", &v.map(|v| v.weight.to_string()).unwrap_or_default(), "50"))
                        (text(&vn("url"), "Variant URL", v.map_or("", |v| v.url.as_str()), "https://shop.example/a"))
                        (select(&vn("redirect"), "Redirect", &redirect_options(), &v.and_then(|v| v.redirect).map(|r| r.to_string()).unwrap_or_default()))
                        (select(&vn("forward_query"), "Forward the query", &FORWARD, forward_value(v.and_then(|v| v.forward_query))))
                    }
                }
            }
            @if rule.then.is_some() || rule.split.is_some() {
                label { input type="checkbox" name=(n("remove")) value="1"; " Remove this rule" }
            }
        }
    }
}

/// The rules' forms, posted to `action` (each fieldset a rule, in order).
pub fn render(rules: &[RuleSpec], action: &str, csrf: &Markup, may_save: bool) -> Markup {
    html! {
        form.stack.rule-form method="post" action=(action) {
            (csrf)
            @for (i, rule) in rules.iter().enumerate() { (rule_fields(i, Some(rule))) }
            (rule_fields(rules.len(), None))
            @if may_save { button type="submit" { "Save rules" } }
        }
    }
}

/// The posted fields, by name (a device's checkboxes gathered into one list).
type Fields = BTreeMap<String, Vec<String>>;

fn field<'a>(fields: &'a Fields, name: &str) -> &'a str {
    fields
        .get(name)
        .and_then(|values| values.first())
        .map_or("", |v| v.trim())
}

fn items(text: &str) -> Option<Vec<String>> {
    let items: Vec<String> = (text.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect();
    (!items.is_empty()).then_some(items)
}

fn invalid(rule: usize, what: &str) -> Error {
    Error::invalid("invalid_rules", format!("rule {}: {what}", rule + 1))
}

fn redirect(rule: usize, text: &str) -> Result<Option<u16>, Error> {
    match text {
        "" => Ok(None),
        text => (text.parse().map(Some)).map_err(|_| invalid(rule, "redirect is not a status")),
    }
}

fn forward(text: &str) -> Option<bool> {
    match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn conditions(i: usize, fields: &Fields) -> Result<Conditions, Error> {
    let f = |name: &str| field(fields, &format!("r{i}.{name}"));
    let time = |name: &str| -> Result<Option<DateTime<Utc>>, Error> {
        match f(name) {
            "" => Ok(None),
            text => (DateTime::parse_from_rfc3339(text).map(|at| Some(at.with_timezone(&Utc))))
                .map_err(|_| invalid(i, &format!("{name} is not an RFC 3339 time"))),
        }
    };
    let query = items(f("query")).map(|entries| {
        (entries.into_iter())
            .map(|entry| match entry.split_once('=') {
                Some((name, value)) => QuerySpec {
                    name: name.trim().to_owned(),
                    value: Some(value.trim().to_owned()),
                },
                None => QuerySpec {
                    name: entry,
                    value: None,
                },
            })
            .collect()
    });
    let weekly = match (items(f("days")), items(f("hours")), f("zone")) {
        (None, None, "") => None,
        (days, hours, zone) => Some(WeeklySpec {
            days: days.unwrap_or_default(),
            hours: (hours.unwrap_or_default().iter())
                .map(|h| h.parse().map_err(|_| invalid(i, "an hour is not 0 to 23")))
                .collect::<Result<_, _>>()?,
            zone: zone.to_owned(),
        }),
    };
    Ok(Conditions {
        device: fields
            .get(&format!("r{i}.device"))
            .filter(|d| !d.is_empty())
            .cloned(),
        language: items(f("language")),
        country: items(f("country")),
        query,
        ip: items(f("ip")),
        after: time("after")?,
        before: time("before")?,
        weekly,
    })
}

fn variants(i: usize, fields: &Fields) -> Result<Vec<VariantSpec>, Error> {
    let mut variants = Vec::new();
    for j in 0.. {
        let f = |name: &str| field(fields, &format!("r{i}.v{j}.{name}"));
        if !fields.contains_key(&format!("r{i}.v{j}.url")) {
            break;
        }
        if f("url").is_empty() {
            continue;
        }
        variants.push(VariantSpec {
            weight: (f("weight").parse())
                .map_err(|_| invalid(i, "a variant's weight is not a number"))?,
            url: f("url").to_owned(),
            redirect: redirect(i, f("redirect"))?,
            forward_query: forward(f("forward_query")),
        });
    }
    Ok(variants)
}

fn sticky(text: &str) -> StickySpec {
    match text {
        "true" => StickySpec::Flag(true),
        "ref" => StickySpec::Mode(StickyMode::Ref),
        "cookie" => StickySpec::Mode(StickyMode::Cookie),
        "visitor" => StickySpec::Mode(StickyMode::Visitor),
        _ => StickySpec::Flag(false),
    }
}

/// The rules the forms say, in order: a rule without a target URL or a variant is left out
/// (the empty one), as is one marked to remove.
pub fn parse(pairs: &[(String, String)]) -> Result<Vec<RuleSpec>, Error> {
    let mut fields = Fields::new();
    for (name, value) in pairs {
        fields.entry(name.clone()).or_default().push(value.clone());
    }
    let mut rules = Vec::new();
    for i in 0.. {
        if !fields.contains_key(&format!("r{i}.answer")) {
            break;
        }
        let f = |name: &str| field(&fields, &format!("r{i}.{name}"));
        if f("remove") == "1" {
            continue;
        }
        let (then, split) = if f("answer") == "split" {
            let variants = variants(i, &fields)?;
            if variants.is_empty() {
                continue;
            }
            let split = SplitSpec {
                sticky: sticky(f("sticky")),
                variants,
            };
            (None, Some(split))
        } else {
            if f("url").is_empty() {
                continue;
            }
            let then = TargetSpec {
                url: f("url").to_owned(),
                redirect: redirect(i, f("redirect"))?,
                forward_query: forward(f("forward_query")),
            };
            (Some(then), None)
        };
        let when = conditions(i, &fields)?;
        rules.push(RuleSpec { when, then, split });
    }
    Ok(rules)
}

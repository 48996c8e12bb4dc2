//! From the API form to `wire`'s rules: one function, [`convert`], used when a request is
//! checked (URLs validated and normalised, errors naming the field) and when a stored link is
//! projected to Redis (URLs already normalised).

use super::spec::{
    Conditions, RuleSpec, SplitSpec, StickyMode, StickySpec, VariantSpec, WeeklySpec,
};
use crate::link::{redirect_status, Invalid};
use crate::validate::UrlError;
use chrono::{DateTime, SubsecRound, Utc};
use shortlink_wire::record::is_valid_target;
use shortlink_wire::rules::{
    Action, Cidr, Condition, Device, Rule, Sticky, Target, Variant, Weekly, MAX_CONDITIONS,
    MAX_RULES, MAX_VALUES, MAX_VARIANTS,
};

/// The error code of every rule problem but a target URL's (which keeps the URL's own code).
const CODE: &str = "invalid_rules";

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Rules that passed [`check`]: the normalised API form (what SQL keeps and a read returns) and
/// the wire form (what the record carries).
#[derive(Debug, Clone, Default)]
pub struct RulesCheck {
    pub specs: Vec<RuleSpec>,
    pub wire: Vec<Rule>,
}

/// Checks rules as a request sent them (`value`: the JSON of the `rules` field). `check_url`
/// validates and normalises a target the way the link's own is.
pub fn check(
    value: serde_json::Value,
    check_url: &dyn Fn(&str) -> Result<String, UrlError>,
) -> Result<RulesCheck, Invalid> {
    let specs: Vec<RuleSpec> = serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." {
            "rules".to_owned()
        } else if path.starts_with('[') {
            format!("rules{path}")
        } else {
            format!("rules.{path}")
        };
        Invalid::new(CODE, format!("{path}: {}", error.into_inner()))
    })?;
    let (specs, wire) = convert(specs, check_url)?;
    Ok(RulesCheck { specs, wire })
}

/// The API form of a stored link's `rules` column.
pub fn parse_stored(text: &str) -> Result<Vec<RuleSpec>, serde_json::Error> {
    serde_json::from_str(text)
}

/// The wire form of rules already checked (stored): their URLs are taken as they are, since
/// they were normalised when written.
pub fn to_wire(specs: &[RuleSpec]) -> Result<Vec<Rule>, Invalid> {
    convert(specs.to_vec(), &|url: &str| Ok(url.to_owned())).map(|(_, wire)| wire)
}

/// Checks `specs`, normalises them and converts them to the wire form, in one walk, so what is
/// stored and what Redis holds cannot disagree.
fn convert(
    mut specs: Vec<RuleSpec>,
    check_url: &dyn Fn(&str) -> Result<String, UrlError>,
) -> Result<(Vec<RuleSpec>, Vec<Rule>), Invalid> {
    if specs.len() > MAX_RULES {
        return Err(Invalid::new(
            CODE,
            format!("rules: at most {MAX_RULES} rules, not {}", specs.len()),
        ));
    }
    let mut wire = Vec::with_capacity(specs.len());
    for (index, spec) in specs.iter_mut().enumerate() {
        let at = format!("rules[{index}]");
        let conditions = conditions(&mut spec.when, &format!("{at}.if"))?;
        let action = match (&mut spec.then, &mut spec.split) {
            (Some(target), None) => Action::Target(self::target(
                &mut target.url,
                &mut target.redirect,
                &mut target.forward_query,
                &format!("{at}.then"),
                check_url,
            )?),
            (None, Some(split)) => self::split(split, &format!("{at}.split"), check_url)?,
            _ => {
                return Err(Invalid::new(
                    CODE,
                    format!("{at}: give exactly one of then and split"),
                ))
            }
        };
        wire.push(Rule {
            conditions: conditions.into(),
            action,
        });
    }
    Ok((specs, wire))
}

fn invalid(at: &str, why: impl std::fmt::Display) -> Invalid {
    Invalid::new(CODE, format!("{at}: {why}"))
}

/// A list condition's values: present means 1 to [`MAX_VALUES`] of them.
fn values<'a, T>(list: &'a mut [T], at: &str) -> Result<&'a mut [T], Invalid> {
    if list.is_empty() {
        return Err(invalid(at, "must not be empty"));
    }
    if list.len() > MAX_VALUES {
        return Err(invalid(
            at,
            format!("at most {MAX_VALUES} values, not {}", list.len()),
        ));
    }
    Ok(list)
}

fn conditions(when: &mut Conditions, at: &str) -> Result<Vec<Condition>, Invalid> {
    let mut out = Vec::new();
    if let Some(devices) = &mut when.device {
        let at = format!("{at}.device");
        let mut mask = 0;
        for (i, name) in values(devices, &at)?.iter_mut().enumerate() {
            *name = name.to_ascii_lowercase();
            let device = Device::from_name(name).ok_or_else(|| {
                invalid(
                    &format!("{at}[{i}]"),
                    "unknown device (ios, android, desktop or other)",
                )
            })?;
            mask |= device.bit();
        }
        out.push(Condition::Device(mask));
    }
    if let Some(languages) = &mut when.language {
        let at = format!("{at}.language");
        out.push(language(values(languages, &at)?, &at)?);
    }
    if let Some(countries) = &mut when.country {
        let at = format!("{at}.country");
        let mut codes = Vec::new();
        for (i, code) in values(countries, &at)?.iter_mut().enumerate() {
            *code = code.to_ascii_uppercase();
            match code.as_bytes() {
                &[a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => codes.push([a, b]),
                _ => {
                    return Err(invalid(
                        &format!("{at}[{i}]"),
                        "not an ISO 3166-1 alpha-2 country (PT)",
                    ))
                }
            }
        }
        out.push(Condition::Country(codes.into()));
    }
    if let Some(query) = &mut when.query {
        let at = format!("{at}.query");
        for (i, param) in values(query, &at)?.iter().enumerate() {
            if param.name.is_empty() || param.name.len() > usize::from(u8::MAX) {
                return Err(invalid(
                    &format!("{at}[{i}].name"),
                    "must be 1 to 255 bytes",
                ));
            }
            if param.value.as_ref().is_some_and(|v| v.len() > 1024) {
                return Err(invalid(&format!("{at}[{i}].value"), "at most 1024 bytes"));
            }
            out.push(Condition::Query {
                name: param.name.as_bytes().into(),
                value: param.value.as_ref().map(|v| v.as_bytes().into()),
            });
        }
    }
    if let Some(ranges) = &mut when.ip {
        let at = format!("{at}.ip");
        let mut cidrs = Vec::new();
        for (i, text) in values(ranges, &at)?.iter_mut().enumerate() {
            let cidr =
                Cidr::parse(text).ok_or_else(|| invalid(&format!("{at}[{i}]"), "invalid CIDR"))?;
            *text = cidr.to_string();
            cidrs.push(cidr);
        }
        out.push(Condition::Ip(cidrs.into()));
    }
    if let Some(after) = &mut when.after {
        out.push(Condition::After(seconds(after, &format!("{at}.after"))?));
    }
    if let Some(before) = &mut when.before {
        out.push(Condition::Before(seconds(before, &format!("{at}.before"))?));
    }
    if let Some(weekly) = &mut when.weekly {
        out.push(Condition::Weekly(self::weekly(
            weekly,
            &format!("{at}.weekly"),
        )?));
    }
    if out.len() > MAX_CONDITIONS {
        return Err(invalid(
            at,
            format!("at most {MAX_CONDITIONS} conditions, not {}", out.len()),
        ));
    }
    Ok(out)
}

/// A language condition from its tags, each lowercased in place.
fn language(languages: &mut [String], at: &str) -> Result<Condition, Invalid> {
    let mut tags = Vec::new();
    for (i, tag) in languages.iter_mut().enumerate() {
        *tag = tag.to_ascii_lowercase();
        let ok = (1..=35).contains(&tag.len())
            && tag
                .split('-')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()));
        if !ok {
            return Err(invalid(
                &format!("{at}[{i}]"),
                "not a language tag (pt, en-gb)",
            ));
        }
        tags.push(tag.as_bytes().into());
    }
    Ok(Condition::Language(tags.into()))
}

/// Whole Unix seconds, as the record carries them.
fn seconds(at_time: &mut DateTime<Utc>, at: &str) -> Result<u64, Invalid> {
    *at_time = at_time.trunc_subsecs(0);
    u64::try_from(at_time.timestamp()).map_err(|_| invalid(at, "must be after 1970"))
}

fn weekly(spec: &mut WeeklySpec, at: &str) -> Result<Weekly, Invalid> {
    let mut days = 0u8;
    for (i, day) in spec.days.iter().enumerate() {
        let index = DAYS
            .iter()
            .position(|name| day.eq_ignore_ascii_case(name))
            .ok_or_else(|| invalid(&format!("{at}.days[{i}]"), "not a day (mon … sun)"))?;
        days |= 1 << index;
    }
    if days == 0 {
        return Err(invalid(&format!("{at}.days"), "must not be empty"));
    }
    let mut hours = 0u32;
    for (i, &hour) in spec.hours.iter().enumerate() {
        if hour > 23 {
            return Err(invalid(&format!("{at}.hours[{i}]"), "an hour is 0 to 23"));
        }
        hours |= 1 << hour;
    }
    if hours == 0 {
        return Err(invalid(&format!("{at}.hours"), "must not be empty"));
    }
    let zone = Weekly::zone_named(&spec.zone)
        .ok_or_else(|| invalid(&format!("{at}.zone"), "unknown time zone"))?;
    // Normalised: days in week order, hours ascending, each once.
    spec.days = (0..7)
        .filter(|d| days & (1 << d) != 0)
        .map(|d| DAYS[d].to_owned())
        .collect();
    spec.hours = (0..24).filter(|h| hours & (1 << h) != 0).collect();
    spec.zone = zone.name().to_owned();
    Ok(Weekly { days, hours, zone })
}

fn split(
    split: &mut SplitSpec,
    at: &str,
    check_url: &dyn Fn(&str) -> Result<String, UrlError>,
) -> Result<Action, Invalid> {
    let count = split.variants.len();
    if count == 0 {
        return Err(invalid(&format!("{at}.variants"), "must not be empty"));
    }
    if count > MAX_VARIANTS {
        return Err(invalid(
            &format!("{at}.variants"),
            format!("at most {MAX_VARIANTS} variants, not {count}"),
        ));
    }
    if split.variants.iter().all(|v| v.weight == 0) {
        return Err(invalid(
            &format!("{at}.variants"),
            "the weights must not sum to 0",
        ));
    }
    let mut variants = Vec::with_capacity(count);
    for (
        i,
        VariantSpec {
            weight,
            url,
            redirect,
            forward_query,
        },
    ) in split.variants.iter_mut().enumerate()
    {
        let target = target(
            url,
            redirect,
            forward_query,
            &format!("{at}.variants[{i}]"),
            check_url,
        )?;
        variants.push(Variant {
            weight: *weight,
            target,
        });
    }
    Ok(Action::Split {
        variants: variants.into(),
        sticky: match split.sticky {
            StickySpec::Flag(flag) => Sticky::from(flag),
            StickySpec::Mode(StickyMode::Ref) => Sticky::Ref,
            StickySpec::Mode(StickyMode::Cookie) => Sticky::Cookie,
            StickySpec::Mode(StickyMode::Visitor) => Sticky::Visitor,
        },
    })
}

/// A rule's target, checked like the link's own; its defaults are written out.
fn target(
    url: &mut String,
    redirect: &mut Option<u16>,
    forward_query: &mut Option<bool>,
    at: &str,
    check_url: &dyn Fn(&str) -> Result<String, UrlError>,
) -> Result<Target, Invalid> {
    let normalized =
        check_url(url).map_err(|error| Invalid::new(error.code(), format!("{at}.url: {error}")))?;
    if !is_valid_target(normalized.as_bytes()) {
        return Err(invalid(&format!("{at}.url"), "not a valid target"));
    }
    *url = normalized;
    let status =
        redirect_status(*redirect).map_err(|error| invalid(&format!("{at}.redirect"), error))?;
    *redirect = Some(status);
    let forward = forward_query.unwrap_or(false);
    *forward_query = Some(forward);
    Ok(Target {
        url: url.as_bytes().into(),
        status,
        forward_query: forward,
    })
}

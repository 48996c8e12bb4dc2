//! One visit as the feed and the webhooks give it away: the same fields in both.

use super::cursor::Cursor;
use super::row::FeedRow;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_wire::verdict::Reasons;
use utoipa::ToSchema;

/// Whether events carry the visitor's address (`--webhook-include-ip`): only what the visit
/// store kept (truncated under `--anonymize-ip`), and never unless the deployment says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Privacy {
    pub include_ip: bool,
}

/// A stored visit (one click), enriched; or a conversion reported against one (`type`
/// `conversion`), with the click's link, rule, domain, device and country.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FeedEvent {
    /// The visit's stable id (a conversion's: `cv_…`): the same in every delivery and in the
    /// feed; de-duplicate on it.
    pub id: String,
    /// `click`, `conversion`, or `reclassified`: a click's verdict changed after its event
    /// (docs/BOTS.md).
    #[serde(rename = "type")]
    #[schema(rename = "type", value_type = String, pattern = "^(click|conversion|reclassified)$")]
    pub kind: &'static str,
    /// Conversions only: what was reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversion: Option<ConversionDetail>,
    /// Reclassifications only: which click, from what verdict to what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclassification: Option<Reclassification>,
    /// Resume the feed after this event: `GET /api/v1/visits?after=<cursor>`.
    pub cursor: String,
    pub code: String,
    pub campaign: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: Option<String>,
    pub tags: Vec<String>,
    /// When nginx answered the click.
    pub time: DateTime<Utc>,
    /// The host the click came to.
    pub short_domain: Option<String>,
    /// The HTTP status nginx answered (a redirect, or 410).
    pub status: Option<i64>,
    /// Where the answer sent the visitor: the rule's or variant's target when a click-time rule
    /// answered, else the link's own (or its not-yet / expired target by the click's time); as
    /// the link holds them now. Null for a 410.
    pub target: Option<String>,
    /// The click-time rule that answered, `<rule>` or `<rule>.<variant>` (indexes from 0).
    pub rule: Option<String>,
    /// The visit's verdict: `human`, `preview` (a messaging app's link preview fetcher),
    /// `scanner` (a security service opening the message's links) or `bot` (docs/BOTS.md).
    pub audience: String,
    /// Why the verdict: `agent`, `no_agent`, `method`, `headers`, …; empty for a person
    /// (docs/BOTS.md).
    pub reasons: Vec<&'static str>,
    /// Which bot or preview fetcher.
    pub agent: Option<String>,
    pub device: String,
    pub os: Option<String>,
    pub os_version: Option<String>,
    pub browser: Option<String>,
    pub browser_version: Option<String>,
    /// ISO 3166-1 alpha-2.
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    pub referrer_host: Option<String>,
    pub language: Option<String>,
    /// Only with `--webhook-include-ip`: the address as the visit store kept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
}

/// What a `reclassified` event (`super::reclassified`) adds to the visit's fields, which it carries as they are now
/// (`audience` and `reasons`: the new verdict).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Reclassification {
    /// The visit: its click event's `id`.
    pub visit_id: String,
    /// The verdict the click's event carried: `human`, `preview`, `scanner` or `bot`.
    pub from: String,
    /// The verdict now (the event's `audience`).
    pub to: String,
}

/// A quarantine or a release of one of the workspace's links (issue 79): `type`
/// `link.quarantined` (it answers the warning page) or `link.released` (it answers again). Never
/// its target.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LinkEventView {
    /// `le_` and 16 hex digits: the same in every delivery; de-duplicate on it.
    pub id: String,
    #[serde(rename = "type")]
    #[schema(rename = "type", value_type = String, pattern = "^link\\.(quarantined|released)$")]
    pub kind: &'static str,
    pub cursor: String,
    pub code: String,
    /// The link's workspace (its slug).
    pub workspace: String,
    /// The threat feed (`--threat-feeds`), or `workspace` for the workspace's own block list.
    pub feed: String,
    /// The feed's entry the target matched: a host or a URL.
    pub entry: String,
    /// Why: `listed` (a feed came to list the target), `held` (held for review at its
    /// creation), `released` (by an admin or the operator), `unlisted` (the entry left its
    /// feed), `target_changed` (its target was changed to one no feed lists).
    #[schema(value_type = String)]
    pub reason: &'static str,
    pub time: DateTime<Utc>,
}

impl LinkEventView {
    pub fn new(event: StoredLinkEvent, cursor: Cursor) -> Self {
        LinkEventView {
            id: event.event.id,
            kind: event.event.kind.as_str(),
            cursor: cursor.to_string(),
            code: event.event.code,
            workspace: event.workspace_slug,
            feed: event.event.feed,
            entry: event.event.entry,
            reason: event.event.reason.as_str(),
            time: event.event.at,
        }
    }
}

/// A link event as the store reads it back: with its workspace's slug.
#[derive(Debug, Clone)]
pub struct StoredLinkEvent {
    pub event: shortlink_store::LinkEvent,
    pub workspace_slug: String,
}

/// One event of the feed as a receiver gets it: a click or conversion, or a link's.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Event {
    Visit(Box<FeedEvent>),
    Link(LinkEventView),
}

impl Event {
    /// The event's id (de-duplicate on it).
    pub fn id(&self) -> &str {
        match self {
            Event::Visit(visit) => &visit.id,
            Event::Link(link) => &link.id,
        }
    }

    /// When it happened (a click's time, a quarantine's).
    pub fn time(&self) -> DateTime<Utc> {
        match self {
            Event::Visit(visit) => visit.time,
            Event::Link(link) => link.time,
        }
    }

    /// Where the feed resumes after it.
    pub fn cursor(&self) -> &str {
        match self {
            Event::Visit(visit) => &visit.cursor,
            Event::Link(link) => &link.cursor,
        }
    }
}

/// What a conversion event adds to the click's fields (docs/CONVERSIONS.md).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ConversionDetail {
    /// The click (visit) it is attributed to.
    pub click_id: String,
    pub clicked_at: DateTime<Utc>,
    /// The sender's idempotency key.
    pub event_id: String,
    pub name: String,
    /// Exact decimal text, with `currency` (ISO 4217).
    pub value: Option<String>,
    pub currency: Option<String>,
}

impl FeedEvent {
    /// A conversion as the feed gives it away: `time` is when it happened; the click's
    /// attributes as copied at its insert; tags those of its link now (`tags`).
    pub fn conversion(
        conversion: shortlink_visits::conversions::Conversion,
        tags: Vec<String>,
        cursor: Cursor,
    ) -> Self {
        let (value, currency) = match conversion.value_text() {
            Some((value, currency)) => (Some(value), Some(currency.to_owned())),
            None => (None, None),
        };
        FeedEvent {
            id: conversion.id,
            kind: "conversion",
            reclassification: None,
            conversion: Some(ConversionDetail {
                click_id: conversion.click_id,
                clicked_at: conversion.clicked_at,
                event_id: conversion.event_id,
                name: conversion.name,
                value,
                currency,
            }),
            cursor: cursor.to_string(),
            code: conversion.code,
            campaign: conversion.campaign,
            recipient_ref: conversion.recipient_ref,
            tags,
            time: conversion.converted_at,
            short_domain: conversion.short_domain,
            status: None,
            target: None,
            rule: conversion.rule,
            // A report from the sender about a person's visit.
            audience: "human".to_owned(),
            reasons: Vec::new(),
            agent: None,
            device: conversion.device.unwrap_or_else(|| "unknown".to_owned()),
            os: None,
            os_version: None,
            browser: None,
            browser_version: None,
            country: conversion.country,
            region: None,
            city: None,
            referrer_host: None,
            language: None,
            ip: None,
        }
    }

    pub fn new(row: FeedRow, cursor: Cursor, privacy: Privacy) -> Self {
        let target = target(&row);
        let tags = row
            .tags
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        FeedEvent {
            id: row.event_id,
            kind: "click",
            conversion: None,
            reclassification: None,
            cursor: cursor.to_string(),
            code: row.code,
            campaign: row.campaign,
            recipient_ref: row.recipient_ref,
            tags,
            time: row.visited_at,
            short_domain: row.short_domain,
            status: row.status,
            target,
            rule: row.rule,
            audience: row.audience,
            reasons: Reasons(u16::try_from(row.reasons).unwrap_or(0))
                .names()
                .collect(),
            agent: row.agent,
            device: row.device,
            os: row.os,
            os_version: row.os_version,
            browser: row.browser,
            browser_version: row.browser_version,
            country: row.country,
            region: row.region,
            city: row.city,
            referrer_host: row.referrer_host,
            language: row.language,
            ip: row.ip.filter(|_| privacy.include_ip),
        }
    }
}

/// The target the click was sent to, from what the visit recorded (status, rule, time) and the
/// link's targets.
fn target(row: &FeedRow) -> Option<String> {
    if row.status == Some(410) {
        return None;
    }
    if let Some(chosen) =
        (row.rule.as_deref()).and_then(|text| shortlink_wire::event::parse_chosen(text.as_bytes()))
    {
        let rules = shortlink_model::link::rules::parse_stored(row.rules.as_deref()?).ok()?;
        let rule = rules.get(usize::from(chosen.rule))?;
        return match (chosen.variant, &rule.then, &rule.split) {
            (None, Some(then), _) => Some(then.url.clone()),
            (Some(variant), _, Some(split)) => {
                Some(split.variants.get(usize::from(variant))?.url.clone())
            }
            _ => None,
        };
    }
    if row.valid_since.is_some_and(|since| row.visited_at < since) {
        return row.not_yet_url.clone();
    }
    if row.expires_at.is_some_and(|end| row.visited_at >= end) {
        return row.expired_url.clone();
    }
    row.target.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_follows_the_answer() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let row = FeedRow {
            visited_at: at("2026-01-02T00:00:00Z"),
            target: Some("https://own.example/".into()),
            rules: Some(
                r#"[{"if":{},"then":{"url":"https://rule.example/"}},
                    {"if":{},"split":{"variants":[{"weight":1,"url":"https://a.example/"},
                                                  {"weight":1,"url":"https://b.example/"}]}}]"#
                    .into(),
            ),
            expired_url: Some("https://over.example/".into()),
            ..FeedRow::default()
        };
        let with = |rule: Option<&str>, status| {
            target(&FeedRow {
                rule: rule.map(str::to_owned),
                status,
                ..row.clone()
            })
        };
        assert_eq!(
            with(None, Some(302)).as_deref(),
            Some("https://own.example/")
        );
        assert_eq!(
            with(Some("0"), None).as_deref(),
            Some("https://rule.example/")
        );
        assert_eq!(
            with(Some("1.1"), None).as_deref(),
            Some("https://b.example/")
        );
        assert_eq!(with(Some("7"), None), None);
        assert_eq!(with(None, Some(410)), None);
        let expired = FeedRow {
            expires_at: Some(at("2026-01-01T00:00:00Z")),
            ..row.clone()
        };
        assert_eq!(target(&expired).as_deref(), Some("https://over.example/"));
    }
}

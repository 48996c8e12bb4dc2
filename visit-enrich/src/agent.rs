//! User agent → browser / OS / device (woothee: small, regex-light and fast, which matters at
//! 50,000 events/s), and who clicked: a human, a bot, or a link preview / URL scanner.
//!
//! SMS and chat links are fetched by messaging apps building previews and by carrier and security
//! scanners before (or instead of) a person tapping them; counting those as clicks is what makes
//! campaign numbers untrustworthy. [`RULES`] (in `wire`, shared with the module, which answers
//! preview fetchers with a link's card) names them; it is one ordered table so that adding a
//! fetcher is one line with its source.

use serde::Serialize;

/// Device class. Woothee does not tell tablets apart; [`Agent::parse`] adds that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Desktop,
    Mobile,
    Tablet,
    Bot,
    Unknown,
}

impl Device {
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Desktop => "desktop",
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Bot => "bot",
            Device::Unknown => "unknown",
        }
    }
}

/// What the parser makes of a user agent. `None` where the parser does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agent {
    pub browser: Option<String>,
    pub browser_version: Option<String>,
    pub os: Option<String>,
    pub os_version: Option<String>,
    pub device: Device,
}

impl Agent {
    pub fn parse(ua: &str) -> Agent {
        let Some(r) = woothee::parser::Parser::new().parse(ua) else {
            return Agent {
                browser: None,
                browser_version: None,
                os: None,
                os_version: None,
                device: Device::Unknown,
            };
        };
        let device = match r.category {
            "pc" => Device::Desktop,
            "smartphone" | "mobilephone" if is_tablet(r.os, ua) => Device::Tablet,
            "smartphone" | "mobilephone" => Device::Mobile,
            "crawler" => Device::Bot,
            _ => Device::Unknown, // "appliance" (consoles, TVs), "misc", "UNKNOWN"
        };
        let (browser, browser_version) = match in_app_browser(ua) {
            Some((name, version)) => (Some(name.to_owned()), version),
            None => (known(r.name), known(r.version)),
        };
        Agent {
            browser,
            browser_version,
            os: known(r.os),
            os_version: known(&r.os_version),
            device,
        }
    }
}

/// Woothee files iPads and Android tablets under "smartphone". Android tablets' browsers leave
/// `Mobile` out of the UA (Google's guidance for Android UAs); iPads before iPadOS 13 say `iPad`
/// (later ones claim to be a Mac and are counted as desktops: nothing in the UA tells them apart).
fn is_tablet(os: &str, ua: &str) -> bool {
    os == "iPad" || (os == "Android" && !ua.contains("Mobile")) || ua.contains("Tablet")
}

/// Messaging apps' in-app browsers, which woothee reports as "Webview" or as the engine. For SMS and
/// chat campaigns "opened in WeChat" is the useful answer. Tokens are lowercase, version follows.
const IN_APP_BROWSERS: &[(&str, &str)] = &[
    ("micromessenger/", "WeChat"),
    (" qq/", "QQ"),
    (" line/", "LINE"),
    ("fbav/", "Facebook"),
    ("instagram ", "Instagram"),
    ("kakaotalk ", "KakaoTalk"),
];

fn in_app_browser(ua: &str) -> Option<(&'static str, Option<String>)> {
    let lower = ua.to_ascii_lowercase();
    IN_APP_BROWSERS.iter().find_map(|(token, name)| {
        let at = lower.find(token)? + token.len();
        let version: String = lower[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        Some((*name, Some(version).filter(|v| !v.is_empty())))
    })
}

fn known(value: &str) -> Option<String> {
    (!value.is_empty() && value != woothee::woothee::VALUE_UNKNOWN).then(|| value.to_owned())
}

pub use shortlink_wire::agent::{Audience, Pattern, Rule, RULES};

/// The classifier's answer: an audience and, for machines, who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    pub audience: Audience,
    pub label: Option<&'static str>,
}

/// Classifies a user agent. `agent` is the parse of the same UA, used as a fallback for crawlers
/// woothee knows and the table does not.
pub fn classify(ua: Option<&str>, agent: &Agent) -> Classification {
    let ua = ua.map(str::trim).unwrap_or("");
    if ua.is_empty() {
        // Every browser sends one; a request without is a script.
        return Classification {
            audience: Audience::Bot,
            label: Some("no user agent"),
        };
    }
    let lower = ua.to_ascii_lowercase();
    if let Some(r) = shortlink_wire::agent::table_match(&lower) {
        return Classification {
            audience: r.audience,
            label: Some(r.label),
        };
    }
    if agent.device == Device::Bot {
        return Classification {
            audience: Audience::Bot,
            label: Some("bot"),
        };
    }
    Classification {
        audience: Audience::Human,
        label: None,
    }
}

/// The id a user agent is stored under (`user_agents.id`; raw visits hold the id, the string is
/// stored once): the first 8 bytes of SHA-256 of the string, big-endian, as a signed integer. A
/// function of the string alone, so every consumer and restart gives an agent the same id without
/// asking the database. Two agents would share an id (and a raw visit show the other's string)
/// with odds of about n² / 2⁶⁵ among n distinct agents; nothing counted depends on it.
pub fn user_agent_id(ua: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(ua.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests;

//! User agent → browser / OS / device (woothee: small, regex-light and fast, which matters at
//! 50,000 events/s), and who clicked: a human, a bot, or a link preview / URL scanner.
//!
//! SMS and chat links are fetched by messaging apps building previews and by carrier and security
//! scanners before (or instead of) a person tapping them; counting those as clicks is what makes
//! campaign numbers untrustworthy. [`RULES`] names them; it is one ordered table so that adding a
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

/// Who made the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Audience {
    Human,
    /// Crawlers, scripts, headless browsers, monitoring.
    Bot,
    /// A link preview or URL scanner: a machine fetch caused by a message being sent, not a click.
    Preview,
}

impl Audience {
    pub fn as_str(self) -> &'static str {
        match self {
            Audience::Human => "human",
            Audience::Bot => "bot",
            Audience::Preview => "preview",
        }
    }
}

/// How a rule matches the user agent, ASCII case-insensitively. Patterns are written lowercase.
#[derive(Debug, Clone, Copy)]
pub enum Pattern {
    Contains(&'static str),
    /// For fetchers whose product token is also found, later in the string, in human in-app
    /// browsers (WhatsApp's fetcher says `WhatsApp/2.23.20.0 A`; some app web views append `WhatsApp/…`).
    Prefix(&'static str),
    Exact(&'static str),
}

impl Pattern {
    fn matches(self, lower_ua: &str) -> bool {
        match self {
            Pattern::Contains(p) => lower_ua.contains(p),
            Pattern::Prefix(p) => lower_ua.starts_with(p),
            Pattern::Exact(p) => lower_ua == p,
        }
    }
}

/// One classifier rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub pattern: Pattern,
    pub audience: Audience,
    pub label: &'static str,
}

const fn rule(pattern: Pattern, audience: Audience, label: &'static str) -> Rule {
    Rule {
        pattern,
        audience,
        label,
    }
}

use Audience::{Bot, Preview};
use Pattern::{Contains, Exact, Prefix};

/// The classifier table: the first matching rule wins, so specific rules come before general ones
/// (Apple's fetcher before Facebook's, previews before the generic `bot` rules). A user agent that
/// matches nothing is human unless woothee calls it a crawler.
///
/// Human in-app browsers are deliberately absent: WeChat (`MicroMessenger/8.0 … Mobile`), QQ
/// (`MQQBrowser … QQ/`), LINE (`Line/13.x`), Telegram (`Telegram-Android/`), KakaoTalk
/// (`KAKAOTALK 10.x`) and Slack's desktop app (`Slack/4.x Electron`) are people reading.
pub const RULES: &[Rule] = &[
    // --- Link previews and URL scanners ---
    // Apple Messages (iMessage) previews: a Mac Safari UA ending in "facebookexternalhit/1.1 Facebot
    // Twitterbot/1.0" (peter.upfold.org.uk 2019-02; wireapp/wire-ios-link-preview#59). Before Facebook.
    rule(Contains("facebot twitterbot"), Preview, "iMessage"),
    // LINE's fetcher: "facebookexternalhit/1.1;line-poker/1.0" (LINE in-app browser is "Line/x": human).
    rule(Contains("line-poker"), Preview, "LINE"),
    rule(Contains("linespider"), Preview, "LINE"),
    // KakaoTalk: "facebookexternalhit/1.1; kakaotalk-scrap/1.0; +https://devtalk.kakao.com/…" (ua-parser-js fetchers list).
    rule(Contains("kakaotalk-scrap"), Preview, "KakaoTalk"),
    // WhatsApp's fetcher: "WhatsApp/2.23.20.0 A", "WhatsApp/2.21.4.22 i" (matomo device-detector#5463, opengraphplus.com).
    rule(Prefix("whatsapp/"), Preview, "WhatsApp"),
    // Telegram: "TelegramBot (like TwitterBot)" (wire-ios-link-preview#59).
    rule(Contains("telegrambot"), Preview, "Telegram"),
    // Slack: "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "Slack-ImgProxy (+https://api.slack.com/robots)",
    // "Slackbot 1.0 (+https://api.slack.com/robots)" (api.slack.com/robots).
    rule(Contains("slackbot-linkexpanding"), Preview, "Slack"),
    rule(Contains("slack-imgproxy"), Preview, "Slack"),
    rule(Contains("slackbot"), Preview, "Slack"),
    // Facebook / Messenger / Instagram: "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    // "Facebot", "meta-externalfetcher/1.1" (developers.facebook.com/docs/sharing/webmasters/web-crawlers).
    rule(Contains("facebookexternalhit"), Preview, "Facebook"),
    rule(Contains("facebot"), Preview, "Facebook"),
    rule(Contains("meta-externalfetcher"), Preview, "Facebook"),
    // X / Twitter cards: "Twitterbot/1.0" (developer.x.com cards troubleshooting).
    rule(Contains("twitterbot"), Preview, "Twitter"),
    // "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)": before the
    // Apache-HttpClient script rule.
    rule(Contains("linkedinbot"), Preview, "LinkedIn"),
    // "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)".
    rule(Contains("discordbot"), Preview, "Discord"),
    // "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5" (Yandex antirobot preview_uid.cpp).
    rule(Contains("skypeuripreview"), Preview, "Skype"),
    // Google's snippet renderer "… Google (+https://developers.google.com/+/web/snippet/) Google-PageRenderer",
    // the on-demand "Google-Read-Aloud" fetcher, and the abuse/malware URL scanner "Google-Safety"
    // (developers.google.com/search/docs/crawling-indexing/google-special-case-crawlers).
    rule(Contains("google-pagerenderer"), Preview, "Google"),
    rule(Contains("google-read-aloud"), Preview, "Google"),
    rule(Contains("google-safety"), Preview, "Google Safety"),
    // Viber's fetcher sends exactly "Viber" or "Viber/<version>" (Yandex antirobot preview_uid.cpp).
    rule(Exact("viber"), Preview, "Viber"),
    rule(Prefix("viber/"), Preview, "Viber"),
    // WeChat's iOS share extension fetching the card: "WeChatShareExtensionNew/<version>" (uap/woothee-style
    // app lists). WeChat's server-side fetcher sends an ordinary MicroMessenger UA and cannot be told
    // apart by UA alone (needs Tencent address ranges).
    rule(Contains("wechatshareextension"), Preview, "WeChat"),
    // Tencent's URL checker for links sent in QQ/WeChat: "… MQQBrowser/5.0 QQ-URL-Manager Mobile Safari/537.36".
    rule(Contains("qq-url-manager"), Preview, "QQ"),
    // Samsung Messages' SMS rich preview: a fixed, ancient desktop Firefox UA, sent from several IPs
    // within a second (matomo device-detector#5962, stackoverflow q/48068227).
    rule(
        Exact("mozilla/5.0 (x11; ubuntu; linux i686; rv:24.0) gecko/20100101 firefox/24.0"),
        Preview,
        "Samsung Messages",
    ),
    // Microsoft Teams / Outlook / Bing previews: "MicrosoftPreview/2.0", "BingPreview/1.0b" (ua-parser-js fetchers).
    rule(Contains("microsoftpreview"), Preview, "Microsoft"),
    rule(Contains("bingpreview"), Preview, "Microsoft"),
    // Other unfurlers (ua-parser-js fetchers list): Snapchat, Reddit, Pinterest, Mastodon, embed services.
    rule(Contains("snap url preview"), Preview, "Snapchat"),
    rule(Contains("redditbot"), Preview, "Reddit"),
    rule(Contains("pinterestbot"), Preview, "Pinterest"),
    rule(Contains("mastodon/"), Preview, "Mastodon"),
    rule(Contains("iframely"), Preview, "Iframely"),
    rule(Contains("embedly"), Preview, "Embedly"),
    rule(Contains("vkshare"), Preview, "VK"),
    // --- Headless browsers and monitoring ---
    rule(Contains("headlesschrome"), Bot, "HeadlessChrome"),
    rule(Contains("phantomjs"), Bot, "PhantomJS"),
    rule(Contains("chrome-lighthouse"), Bot, "Lighthouse"),
    rule(Contains("uptimerobot"), Bot, "UptimeRobot"),
    rule(Contains("pingdom"), Bot, "Pingdom"),
    rule(Contains("statuscake"), Bot, "StatusCake"),
    rule(Contains("site24x7"), Bot, "Site24x7"),
    rule(Contains("datadogsynthetics"), Bot, "Datadog"),
    rule(Contains("blackbox-exporter"), Bot, "Prometheus"),
    rule(Contains("kube-probe"), Bot, "Kubernetes"),
    // --- Scripts and HTTP libraries (their default UAs) ---
    rule(Prefix("curl/"), Bot, "curl"),
    rule(Prefix("wget/"), Bot, "Wget"),
    rule(Contains("python-requests"), Bot, "python-requests"),
    rule(Contains("python-urllib"), Bot, "Python"),
    rule(Contains("python-httpx"), Bot, "Python"),
    rule(Contains("aiohttp"), Bot, "Python"),
    rule(Contains("go-http-client"), Bot, "Go-http-client"),
    rule(Prefix("okhttp/"), Bot, "okhttp"),
    rule(Prefix("java/"), Bot, "Java"),
    rule(Contains("apache-httpclient"), Bot, "Java"),
    rule(Contains("libwww-perl"), Bot, "Perl"),
    rule(Contains("node-fetch"), Bot, "Node.js"),
    rule(Prefix("axios/"), Bot, "Node.js"),
    rule(Prefix("undici"), Bot, "Node.js"),
    rule(Contains("postmanruntime"), Bot, "Postman"),
    rule(Prefix("httpie/"), Bot, "HTTPie"),
    rule(Contains("scrapy"), Bot, "Scrapy"),
    rule(Contains("guzzlehttp"), Bot, "PHP"),
    rule(Contains("windowspowershell"), Bot, "PowerShell"),
    // --- Crawlers (named for nicer labels; the generic rules below would catch most of them) ---
    rule(Contains("googlebot"), Bot, "Googlebot"),
    rule(Contains("adsbot-google"), Bot, "Googlebot"),
    rule(Contains("bingbot"), Bot, "bingbot"),
    rule(Contains("applebot"), Bot, "Applebot"),
    rule(Contains("yandex"), Bot, "Yandex"),
    rule(Contains("baiduspider"), Bot, "Baidu"),
    rule(Contains("duckduckbot"), Bot, "DuckDuckGo"),
    rule(Contains("yahoo! slurp"), Bot, "Yahoo"),
    rule(Contains("sogou"), Bot, "Sogou"),
    rule(Contains("petalbot"), Bot, "PetalBot"),
    rule(Contains("bytespider"), Bot, "Bytespider"),
    rule(Contains("gptbot"), Bot, "GPTBot"),
    rule(Contains("claudebot"), Bot, "ClaudeBot"),
    rule(Contains("ccbot"), Bot, "CCBot"),
    rule(Contains("ahrefsbot"), Bot, "AhrefsBot"),
    rule(Contains("semrushbot"), Bot, "SemrushBot"),
    // --- Generic markers, last. "bot/" and "bot;" rather than "bot", which would catch Cubot phones.
    // A "+http" URL in a UA is the crawler convention for "who to contact".
    rule(Contains("bot/"), Bot, "bot"),
    rule(Contains("bot;"), Bot, "bot"),
    rule(Contains("crawler"), Bot, "bot"),
    rule(Contains("spider"), Bot, "bot"),
    rule(Contains("+http"), Bot, "bot"),
];

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
    if let Some(r) = RULES.iter().find(|r| r.pattern.matches(&lower)) {
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

#[cfg(test)]
mod tests;

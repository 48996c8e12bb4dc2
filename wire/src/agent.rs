//! Who sent a request, from its `User-Agent` alone: a link preview or URL scanner (a machine
//! fetch caused by a message being sent, not a click), another machine, or nobody this table
//! knows. One ordered table ([`RULES`]), so that adding a fetcher is one line with its source;
//! the visit pipeline (`visit-enrich`) labels every visit with it, and the module answers preview
//! fetchers of a link with a card with it, so the two never disagree about who is a preview.

/// The start of `verify-import`'s `User-Agent` (then its version): its requests check an edge
/// before DNS moves, nobody's visits, so the visit consumer stores none of them. A client sending
/// this agent is left out of the stats the same way (as it could be by sending no request at all).
pub const VERIFY_IMPORT_AGENT: &str = "shortlink-verify-import/";

/// Who made the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum Audience {
    Human,
    /// Crawlers, scripts, headless browsers, monitoring.
    Bot,
    /// A link preview: a messaging app fetching the page to draw a card, caused by a message
    /// being sent or read, not a click.
    Preview,
    /// A URL scanner: a carrier's SMS firewall or a mail/SMS security service opening every link
    /// of a message to judge the target (`crate::verdict` says how it is told apart).
    Scanner,
}

impl Audience {
    pub fn as_str(self) -> &'static str {
        match self {
            Audience::Human => "human",
            Audience::Bot => "bot",
            Audience::Preview => "preview",
            Audience::Scanner => "scanner",
        }
    }

    /// Every audience, people first: the order stats list them in.
    pub const ALL: [Audience; 4] = [
        Audience::Human,
        Audience::Preview,
        Audience::Scanner,
        Audience::Bot,
    ];

    /// The audience an `as_str` text names.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == text)
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
    pub fn matches(self, lower_ua: &str) -> bool {
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

use Audience::{Bot, Preview, Scanner};
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
    // Signal's apps fetch previews as "WhatsApp/2" on purpose (sites serve that agent their tags),
    // so Signal is counted under WhatsApp.
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
    // --- URL scanners (security services opening every link of a message) ---
    // Google's abuse/malware URL scanner (same Google page as above).
    rule(Contains("google-safety"), Scanner, "Google Safety"),
    // Mail/SMS security gateways that name themselves (field guide "Bot clicks from security
    // scanners", check.live-direct-marketing.online/blog/bot-clicks-security-scanners-detect):
    // Barracuda Link Protection ("Barracuda" in the agent), Proofpoint URL Defense ("proofpoint"),
    // Cisco Secure Email ("CiscoSecureEmail"). Most scanners send a browser's agent instead: the
    // method, header and network signals of `crate::verdict` catch those.
    rule(Contains("barracuda"), Scanner, "Barracuda"),
    rule(Contains("proofpoint"), Scanner, "Proofpoint"),
    rule(Contains("ciscosecureemail"), Scanner, "Cisco Secure Email"),
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
    // Google Messages (RCS chats and SMS on Android): Google lists its preview fetcher among its
    // user-triggered fetchers by the token "GoogleMessages" (developers.google.com/crawling, Google
    // user-triggered fetchers, 2026-01), in the "(compatible; <token>; +<doc URL>)" form its other
    // fetchers use. Before any rule a phone's own words would match.
    rule(Contains("googlemessages"), Preview, "Google Messages"),
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

/// The first rule of [`RULES`] matching `lower_ua` (the user agent, trimmed and lower-cased).
/// Every pattern is found in one pass ([`automaton`]), then the lowest-numbered rule whose
/// kind of match holds wins, as if the rules were tried in order.
pub fn table_match(lower_ua: &str) -> Option<&'static Rule> {
    let mut first: Option<usize> = None;
    for found in automaton().find_overlapping_iter(lower_ua) {
        // Pattern i is rule i's.
        let index = found.pattern().as_usize();
        let holds = match RULES[index].pattern {
            Pattern::Contains(_) => true,
            Pattern::Prefix(_) => found.start() == 0,
            Pattern::Exact(_) => found.start() == 0 && found.end() == lower_ua.len(),
        };
        if holds && first.is_none_or(|f| index < f) {
            first = Some(index);
        }
    }
    first.map(|index| &RULES[index])
}

/// Every pattern of [`RULES`] in one Aho-Corasick automaton, in the table's order. Built
/// once per process: searched rule by rule, the table cost a click ~15,000 instructions
/// (callgrind, bench/results/redirect-scanners-2026-11-28.md), which a capped link's click now
/// pays for its verdict.
fn automaton() -> &'static aho_corasick::AhoCorasick {
    static AUTOMATON: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    AUTOMATON.get_or_init(|| {
        let patterns = RULES.iter().map(|rule| {
            let (Pattern::Contains(p) | Pattern::Prefix(p) | Pattern::Exact(p)) = rule.pattern;
            p
        });
        // Standard semantics: every match is reported, overlapping ones included.
        aho_corasick::AhoCorasick::new(patterns)
            .expect("the agent table's patterns are few and short")
    })
}

/// Whether `user_agent` is a link preview fetcher (the one a card is for). Lower-cases it on
/// the stack ([`lowered`]).
pub fn is_preview(user_agent: &[u8]) -> bool {
    let mut lower = [0u8; MAX_AGENT];
    let text = lowered(user_agent, &mut lower);
    table_match(text).is_some_and(|rule| rule.audience == Audience::Preview)
}

/// `user_agent` trimmed and lower-cased into `lower` (its first [`MAX_AGENT`] bytes: every
/// fetcher names itself well before that), as the table's patterns are written.
pub fn lowered<'b>(user_agent: &[u8], lower: &'b mut [u8; MAX_AGENT]) -> &'b str {
    let agent = user_agent.trim_ascii();
    let len = agent.len().min(MAX_AGENT);
    for (to, from) in lower.iter_mut().zip(&agent[..len]) {
        *to = from.to_ascii_lowercase();
    }
    // A cut inside a multi-byte character leaves the valid prefix, which is all a rule needs.
    match std::str::from_utf8(&lower[..len]) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&lower[..error.valid_up_to()]).unwrap_or_default(),
    }
}

/// How much of a user agent [`is_preview`] reads.
pub const MAX_AGENT: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;

    /// Google Messages' fetcher: an Android phone's agent naming the fetcher, as Google's
    /// user-triggered fetchers do.
    const GOOGLE_MESSAGES: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Mobile Safari/537.36 (compatible; GoogleMessages; +https://developers.google.com/crawling/docs/crawlers-fetchers/google-messages)";

    /// The automaton finds what trying the rules in order finds.
    #[test]
    fn the_automaton_matches_the_rules_in_order() {
        let agents = [
            "facebookexternalhit/1.1;line-poker/1.0",
            "mozilla/5.0 (macintosh) safari/601.2.4 facebookexternalhit/1.1 facebot twitterbot/1.0",
            "whatsapp/2.23.20.0 a",
            "mozilla/5.0 (iphone) safari/604.1 whatsapp/2.23",
            "viber",
            "viber/20.6",
            "xviber",
            "linkedinbot/1.0 (compatible; mozilla/5.0; apache-httpclient +http://www.linkedin.com)",
            "curl/8.5.0",
            "python-requests/2.31 curl/8",
            "mozilla/5.0 (linux; android 10; cubot_x30) chrome/120.0.0.0 mobile safari/537.36",
            "some crawler/1.0 +http://example.com",
            "",
        ];
        for agent in agents {
            let in_order = RULES.iter().find(|rule| rule.pattern.matches(agent));
            assert_eq!(
                table_match(agent).map(|r| r.label),
                in_order.map(|r| r.label),
                "{agent}"
            );
        }
    }

    #[test]
    fn rules_are_lowercase_and_labelled() {
        // Matching lowercases the UA once; an uppercase pattern would never match.
        for r in RULES {
            let (Pattern::Contains(p) | Pattern::Prefix(p) | Pattern::Exact(p)) = r.pattern;
            assert_eq!(p, p.to_ascii_lowercase(), "pattern {p:?}");
            assert!(!p.is_empty() && !r.label.is_empty(), "rule {r:?}");
        }
    }

    #[test]
    fn previews_are_told_apart_from_people_and_other_machines() {
        for preview in [
            "WhatsApp/2.23.20.0 A",
            "WhatsApp/2",
            "TelegramBot (like TwitterBot)",
            "  facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            GOOGLE_MESSAGES,
        ] {
            assert!(is_preview(preview.as_bytes()), "{preview}");
        }
        for other in [
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1 WhatsApp/2.23",
            "curl/8.5.0",
            "",
            "\u{00e9}\u{00e9}",
        ] {
            assert!(!is_preview(other.as_bytes()), "{other}");
        }
        // Invalid UTF-8 after a fetcher's name still classifies by the name.
        assert!(is_preview(b"WhatsApp/2.23 \xff\xfe"));
    }
}

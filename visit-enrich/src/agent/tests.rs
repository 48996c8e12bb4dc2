use super::*;

const CHROME_WIN: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
const IPHONE_SAFARI: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID_CHROME: &str =
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
const ANDROID_WECHAT: &str = "Mozilla/5.0 (Linux; Android 12; M2012K11AC Build/SKQ1.211006.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/86.0.4240.99 XWEB/4343 MMWEBSDK/20220903 Mobile Safari/537.36 MMWEBID/6233 MicroMessenger/8.0.28.2240(0x28001C57) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN ABI/arm64";
const IMESSAGE: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0";

/// (case, user agent, audience, label). Strings are as the services send them (sources in RULES).
const CASES: &[(&str, &str, Audience, Option<&str>)] = &[
    ("desktop Chrome", CHROME_WIN, Audience::Human, None),
    ("iPhone Safari", IPHONE_SAFARI, Audience::Human, None),
    ("Android Chrome", ANDROID_CHROME, Audience::Human, None),
    ("Android WeChat in-app browser", ANDROID_WECHAT, Audience::Human, None),
    ("QQ in-app browser", "Mozilla/5.0 (Linux; Android 10; V1938T Build/QP1A.190711.020; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/77.0.3865.120 MQQBrowser/6.2 TBS/045913 Mobile Safari/537.36 V1_AND_SQ_8.3.0_1362_YYB_D QQ/8.3.0.4480 NetType/WIFI WebP/0.3.0 Pixel/1080", Audience::Human, None),
    ("LINE in-app browser", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Safari Line/13.16.0", Audience::Human, None),
    ("Cubot phone (\"bot\" in model)", "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36", Audience::Human, None),
    ("Slack desktop app", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.36.140 Chrome/120.0.6099.56 Electron/28.0.0 Safari/537.36 Sonic", Audience::Human, None),
    ("WhatsApp", "WhatsApp/2.23.20.0 A", Audience::Preview, Some("WhatsApp")),
    ("WhatsApp iOS", "WhatsApp/2.21.4.22 i", Audience::Preview, Some("WhatsApp")),
    ("TelegramBot", "TelegramBot (like TwitterBot)", Audience::Preview, Some("Telegram")),
    ("Slackbot-LinkExpanding", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", Audience::Preview, Some("Slack")),
    ("Slack-ImgProxy", "Slack-ImgProxy (+https://api.slack.com/robots)", Audience::Preview, Some("Slack")),
    ("facebookexternalhit", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", Audience::Preview, Some("Facebook")),
    ("Twitterbot", "Twitterbot/1.0", Audience::Preview, Some("Twitter")),
    ("iMessage preview", IMESSAGE, Audience::Preview, Some("iMessage")),
    ("Discordbot", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", Audience::Preview, Some("Discord")),
    ("LinkedInBot", "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", Audience::Preview, Some("LinkedIn")),
    ("SkypeUriPreview", "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5", Audience::Preview, Some("Skype")),
    ("LINE preview", "facebookexternalhit/1.1;line-poker/1.0", Audience::Preview, Some("LINE")),
    ("KakaoTalk preview", "facebookexternalhit/1.1; kakaotalk-scrap/1.0; +https://devtalk.kakao.com/", Audience::Preview, Some("KakaoTalk")),
    ("Viber", "Viber/20.6.0", Audience::Preview, Some("Viber")),
    ("QQ URL checker", "Mozilla/5.0 (Linux; U; Android 4.4.2; zh-cn; GT-I9500 Build/KOT49H) AppleWebKit/537.36 (KHTML, like Gecko)Version/4.0 MQQBrowser/5.0 QQ-URL-Manager Mobile Safari/537.36", Audience::Preview, Some("QQ")),
    ("WeChat share extension", "WeChatShareExtensionNew/8.0.40.33 CFNetwork/1410.0.3 Darwin/22.6.0", Audience::Preview, Some("WeChat")),
    ("Samsung Messages", "Mozilla/5.0 (X11; Ubuntu; Linux i686; rv:24.0) Gecko/20100101 Firefox/24.0", Audience::Preview, Some("Samsung Messages")),
    ("Google Messages (RCS)", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Mobile Safari/537.36 (compatible; GoogleMessages; +https://developers.google.com/crawling/docs/crawlers-fetchers/google-messages)", Audience::Preview, Some("Google Messages")),
    ("Google-PageRenderer", "Mozilla/5.0 (Windows NT 6.1; rv:6.0) Gecko/20110814 Firefox/6.0 Google (+https://developers.google.com/+/web/snippet/) Google-PageRenderer", Audience::Preview, Some("Google")),
    ("curl", "curl/8.5.0", Audience::Bot, Some("curl")),
    ("python-requests", "python-requests/2.31.0", Audience::Bot, Some("python-requests")),
    ("Go-http-client", "Go-http-client/1.1", Audience::Bot, Some("Go-http-client")),
    ("Wget", "Wget/1.21.4", Audience::Bot, Some("Wget")),
    ("Googlebot", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", Audience::Bot, Some("Googlebot")),
    ("Googlebot smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", Audience::Bot, Some("Googlebot")),
    ("bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", Audience::Bot, Some("bingbot")),
    ("HeadlessChrome", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36", Audience::Bot, Some("HeadlessChrome")),
    ("UptimeRobot", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", Audience::Bot, Some("UptimeRobot")),
    ("unknown crawler", "Mozilla/5.0 (compatible; ExampleCrawler/1.0; +https://example.com/crawler)", Audience::Bot, Some("bot")),
    ("empty", "", Audience::Bot, Some("no user agent")),
    ("blank", "   ", Audience::Bot, Some("no user agent")),
];

#[test]
fn classifier_table() {
    let mut failures = Vec::new();
    for &(case, ua, audience, label) in CASES {
        let got = classify(Some(ua), &Agent::parse(ua));
        if got != (Classification { audience, label }) {
            failures.push(format!("{case}: got {got:?}, want {audience:?} {label:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn missing_user_agent_is_a_bot() {
    let agent = Agent::parse("");
    assert_eq!(classify(None, &agent).audience, Audience::Bot);
}

#[test]
fn parses_browser_os_device() {
    type Want = (Option<&'static str>, Option<&'static str>, Device);
    let cases: &[(&str, Want)] = &[
        (CHROME_WIN, (Some("Chrome"), Some("Windows 10"), Device::Desktop)),
        (IPHONE_SAFARI, (Some("Safari"), Some("iPhone"), Device::Mobile)),
        (ANDROID_CHROME, (Some("Chrome"), Some("Android"), Device::Mobile)),
        (ANDROID_WECHAT, (Some("WeChat"), Some("Android"), Device::Mobile)),
        (
            "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            (Some("Chrome"), Some("Android"), Device::Tablet),
        ),
        (
            "Mozilla/5.0 (iPad; CPU OS 12_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1",
            (Some("Safari"), Some("iPad"), Device::Tablet),
        ),
        ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", (Some("Googlebot"), None, Device::Bot)),
        ("", (None, None, Device::Unknown)),
    ];
    for (ua, (browser, os, device)) in cases {
        let a = Agent::parse(ua);
        assert_eq!(
            (a.browser.as_deref(), a.os.as_deref(), a.device),
            (*browser, *os, *device),
            "{ua}"
        );
    }
    let a = Agent::parse(CHROME_WIN);
    assert_eq!(a.browser_version.as_deref(), Some("124.0.0.0"));
    let a = Agent::parse(ANDROID_WECHAT);
    assert_eq!(a.browser_version.as_deref(), Some("8.0.28.2240"));
    let a = Agent::parse(IPHONE_SAFARI);
    assert_eq!(a.os_version.as_deref(), Some("17.5.1"));
}

#[test]
fn user_agent_ids_are_stable_and_distinct() {
    // The first 8 bytes of SHA-256("curl/8.5.0"): ids stored in SQL must never change.
    assert_eq!(user_agent_id("curl/8.5.0"), user_agent_id("curl/8.5.0"));
    assert_ne!(user_agent_id("curl/8.5.0"), user_agent_id("curl/8.5.1"));
    assert_eq!(
        user_agent_id(""),
        i64::from_be_bytes(*b"\xe3\xb0\xc4\x42\x98\xfc\x1c\x14")
    );
}

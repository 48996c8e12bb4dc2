use super::*;
use crate::agent::{lowered, MAX_AGENT};

const CHROME_DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const IPHONE_SAFARI_17: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const IPHONE_SAFARI_15: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 15_8 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Mobile/15E148 Safari/604.1";
/// An iOS app's web view: no browser token, so no header expectations.
const IOS_WEB_VIEW: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";

fn verdict(ua: &str, signals: u16) -> Verdict {
    let mut buf = [0; MAX_AGENT];
    at_click(lowered(ua.as_bytes(), &mut buf), Signals::new(signals))
}

/// What a phone's browser sends over TLS: a language and fetch metadata.
const PHONE_TLS: u16 = Signals::SECURE;

#[test]
fn a_person_keeps_the_human_verdict() {
    for ua in [
        CHROME_DESKTOP,
        IPHONE_SAFARI_17,
        IPHONE_SAFARI_15,
        IOS_WEB_VIEW,
    ] {
        assert!(verdict(ua, PHONE_TLS).is_human(), "{ua}");
        // Plain HTTP: no fetch metadata is sent, so none is expected.
        assert!(verdict(ua, Signals::NO_FETCH_MODE).is_human(), "{ua}");
    }
    // Safari before 16.4 sends no fetch metadata even over TLS.
    assert!(verdict(IPHONE_SAFARI_15, Signals::SECURE | Signals::NO_FETCH_MODE).is_human());
    // A web view claims no browser: the header signal does not judge it.
    assert!(verdict(IOS_WEB_VIEW, Signals::NO_LANGUAGE).is_human());
}

#[test]
fn machines_are_told_apart_by_each_signal() {
    let cases = [
        ("WhatsApp/2.23.20.0 A", 0, Audience::Preview, Reasons::AGENT),
        ("Google-Safety", 0, Audience::Scanner, Reasons::AGENT),
        (
            "Mozilla/5.0 Barracuda Sentinel",
            0,
            Audience::Scanner,
            Reasons::AGENT,
        ),
        ("curl/8.5.0", 0, Audience::Bot, Reasons::AGENT),
        ("", 0, Audience::Bot, Reasons::NO_AGENT),
        (
            CHROME_DESKTOP,
            Signals::HEAD,
            Audience::Scanner,
            Reasons::METHOD,
        ),
        (
            CHROME_DESKTOP,
            Signals::OPTIONS,
            Audience::Scanner,
            Reasons::METHOD,
        ),
        (
            CHROME_DESKTOP,
            Signals::HOSTING | Signals::NETWORK_KNOWN,
            Audience::Scanner,
            Reasons::NETWORK,
        ),
        (
            CHROME_DESKTOP,
            Signals::NO_LANGUAGE,
            Audience::Scanner,
            Reasons::HEADERS,
        ),
        (
            CHROME_DESKTOP,
            Signals::SECURE | Signals::NO_FETCH_MODE,
            Audience::Scanner,
            Reasons::HEADERS,
        ),
        (
            IPHONE_SAFARI_17,
            Signals::SECURE | Signals::NO_FETCH_MODE,
            Audience::Scanner,
            Reasons::HEADERS,
        ),
    ];
    for (ua, signals, audience, reason) in cases {
        let v = verdict(ua, signals);
        assert_eq!(
            (v.audience, v.reasons),
            (audience, Reasons(reason)),
            "{ua:?} {signals}"
        );
    }
}

#[test]
fn the_agent_table_decides_before_the_method() {
    // A preview fetcher's HEAD is still a preview (its own label, for the stats).
    let v = verdict("TelegramBot (like TwitterBot)", Signals::HEAD);
    assert_eq!((v.audience, v.label), (Audience::Preview, Some("Telegram")));
}

#[test]
fn signals_round_trip_through_the_event_field() {
    for bits in [0, Signals::HEAD, 0xff] {
        for verdict in [
            None,
            Some(Audience::Human),
            Some(Audience::Scanner),
            Some(Audience::Bot),
        ] {
            let mut signals = Signals::new(bits);
            if let Some(v) = verdict {
                signals = signals.with_verdict(v);
            }
            let (text, len) = signals.text();
            let back = Signals::parse(&text[..len]).unwrap();
            assert_eq!(back, signals);
            assert_eq!(back.click_verdict(), verdict);
        }
    }
    assert_eq!(Signals::parse(b""), None);
    assert_eq!(Signals::parse(b"x"), None);
}

#[test]
fn reasons_have_stable_names() {
    let both = Reasons(Reasons::HEADERS | Reasons::SWEEP);
    assert_eq!(both.names().collect::<Vec<_>>(), ["headers", "sweep"]);
}

//! What a link answers to one click, decided by `wire`'s [`LinkView::answer`], the function the
//! module runs: the fallback (`resolve`) and the preview answer through here, so neither can
//! drift from what nginx answers.
//!
//! A link with a click id parameter gets an id here as from the module (`wire::click_id`, this
//! process's own prefix). The fallback records no visit (it never did: it answers while Redis,
//! where visits are queued, is failing), so such an id names no visit, and a conversion sent
//! with it is refused as an unknown click.

use super::model::Resolution;
use crate::projection::{encode_record, RecordWorkspace};
use crate::sync::LockOrRecover;
use shortlink_model::link::card;
use shortlink_model::Link;
use shortlink_wire::agent;
use shortlink_wire::click_id::{location_parts, ClickId, ClickIds};
use shortlink_wire::preview::card_page;
use shortlink_wire::record::{self, Answer, Checked, LinkView, WorkspaceName};
use shortlink_wire::rules::{self, Click};
use shortlink_wire::verdict::{self, Signals};
use std::net::IpAddr;
use std::sync::Mutex;

/// The parts of a request a link's rules read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClickInput<'a> {
    pub user_agent: &'a [u8],
    pub accept_language: &'a [u8],
    /// The raw query string, without `?`.
    pub query: Option<&'a str>,
    /// The client address as text, as nginx's realip gives it (`X-Real-IP`): the module hashes
    /// this text for sticky splits, so the fallback must hash the same.
    pub client: Option<&'a str>,
    /// The `Cookie` header holding the visitor cookie (`wire::rules::COOKIE`), or empty: a split
    /// sticky by cookie reads it as the module does. The fallback sets no cookie: a click it
    /// answers without one is answered by address and agent, as the module's would be, and gets
    /// its cookie on the next click the module answers.
    pub cookies: &'a [u8],
    /// A fresh random number, for splits per click.
    pub random: u64,
    /// The request's method and header signals (`wire::verdict::Signals`), for the verdict a
    /// click with a cap to spend gets.
    pub signals: Signals,
    /// What the fallback knows of the client beyond its headers; `None`: nothing.
    pub judge: Option<&'a dyn ClientJudge>,
    /// The token the module counted (or tried to count) this click with, if it did: the click
    /// is counted with it, so Redis counts it once (`wire::click_count`).
    pub token: Option<ClickId>,
}

/// What the fallback knows of a click's client beyond its request, for the verdict of a click
/// with a cap to spend, as the module judges it: `shortlink_visits::click_judge`.
pub trait ClientJudge: Sync + std::fmt::Debug {
    /// Whether `ip` is on a hosting or cloud network (`wire::network`).
    fn hosting(&self, ip: IpAddr) -> bool;
    /// Whether a sweep was noticed in `workspace` from `ip`'s network with agent `ua`
    /// (`wire::sweeps`).
    fn swept(&self, workspace: WorkspaceName, ip: IpAddr, ua: &[u8]) -> bool;
}

impl ClickInput<'_> {
    /// Whether this click on a link of `workspace` spends its `max_visits`: a person's does; a
    /// preview's, a scanner's or a bot's, by the module's click-time verdict, does not. The
    /// client's network and the sweeps noticed are asked of [`ClickInput::judge`], and only
    /// when the request itself names no machine.
    pub fn spends(&self, workspace: WorkspaceName) -> bool {
        let mut lower = [0; agent::MAX_AGENT];
        let lower = agent::lowered(self.user_agent, &mut lower);
        let client = self.client.and_then(|text| text.parse::<IpAddr>().ok());
        let (Some(judge), Some(ip)) = (self.judge, client) else {
            return verdict::at_click(lower, self.signals).is_human();
        };
        let signals = self.signals.with_network(judge.hosting(ip));
        verdict::at_click(lower, signals).is_human() && !judge.swept(workspace, ip, self.user_agent)
    }

    /// The token this click's count is taken with: the module's, else one drawn here (a click
    /// id of this process's), so that the client's retry of a dropped command counts it once too.
    pub fn count_token(&self) -> ClickId {
        self.token.unwrap_or_else(next_click_id)
    }
}

/// The client's country (ISO alpha-2, upper case), if known.
pub type CountryOf<'a> = &'a (dyn Fn(IpAddr) -> Option<[u8; 2]> + Sync);

/// A link with `max_visits` that would redirect: count the click (`INCR` of its counter, as the
/// module does) and ask again with the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountFirst;

/// What `link` answers to `click` at `now_unix`, `visits` being the click's number once counted.
/// The link goes through its own record, encoded and decoded as the module gets it, so what nginx
/// reads and what this answers are one thing. A preview fetcher ([`agent::is_preview`]) asking
/// for a link with a card gets the card page, uncounted, as from the module. The host was matched
/// to the link's workspace before (or, for a preview, is not asked), so the record is encoded
/// as `default`'s: the name would play no part in the answer.
pub fn answer(
    link: &Link,
    click: &ClickInput<'_>,
    now_unix: u64,
    country: CountryOf<'_>,
    visits: Option<u64>,
) -> Result<Resolution, CountFirst> {
    let value = encode_record(link, RecordWorkspace::DEFAULT);
    let decoded = match record::decode(&value) {
        Ok(decoded) => decoded,
        Err(error) => {
            // The sidecar wrote it: this is a bug, never a client's fault. The module would
            // take it as "not mine" and ask the fallback; answer as the link's own target.
            tracing::error!(code = %link.code, %error, "a record the sidecar encodes does not decode");
            return Ok(own_target(link, click));
        }
    };
    let view: LinkView<'_> = decoded.view();
    let client_text = click.client.unwrap_or("");
    let make_click = || Click {
        now_unix,
        user_agent: click.user_agent,
        accept_language: click.accept_language,
        query: click.query.unwrap_or("").as_bytes(),
        client: click.client.and_then(|text| text.parse::<IpAddr>().ok()),
        visitor: rules::visitor(client_text.as_bytes(), click.user_agent),
        // Set from the record by the answer.
        recipient: None,
        cookies: click.cookies,
        random: click.random,
    };
    let card = (link.extras.preview.as_deref())
        .filter(|_| agent::is_preview(click.user_agent))
        .and_then(|text| card::parse_stored(text).ok());
    // The fallback answers GETs: a password is only ever checked by the module (its form posts
    // to nginx), so here a protected link asks for it.
    let checked = match card {
        Some(_) => Checked::PREVIEW,
        None => Checked {
            visits,
            ..Checked::default()
        },
    };
    let answer = view.answer_checked(now_unix, checked, make_click, country);
    if let (Some(card), Answer::Redirect { target, chosen, .. }) = (&card, &answer) {
        return Ok(Resolution::Card {
            page: card_page(&card.card(), target),
            target: String::from_utf8_lossy(target).into_owned(),
            chosen: *chosen,
        });
    }
    let param = view
        .extras
        .and_then(|extras| extras.click_id_param.as_ref());
    Ok(match answer {
        Answer::Redirect {
            status,
            target,
            forward_query,
            chosen,
        } => Resolution::Redirect {
            status,
            location: location(
                target,
                forward_query,
                click.query,
                param.map(|param| (param.as_bytes(), next_click_id())),
            ),
            chosen,
        },
        Answer::Gone => Resolution::Gone,
        Answer::Quarantined => Resolution::Quarantined,
        Answer::NotYet { opens_at } => Resolution::NotYet { opens_at },
        Answer::Password => Resolution::Password,
        Answer::Count => return Err(CountFirst),
    })
}

fn own_target(link: &Link, click: &ClickInput<'_>) -> Resolution {
    Resolution::Redirect {
        status: link.redirect,
        location: location(
            link.target.as_bytes(),
            link.flags.forward_query(),
            click.query,
            None,
        ),
        chosen: None,
    }
}

/// A target (validated visible ASCII), plus the query when it forwards one, plus the click id
/// (`wire`'s rule, the module's).
fn location(
    target: &[u8],
    forward_query: bool,
    query: Option<&str>,
    click_id: Option<(&[u8], ClickId)>,
) -> String {
    let query = query.filter(|_| forward_query).map(str::as_bytes);
    let click = click_id.as_ref().map(|(name, id)| (*name, id.as_bytes()));
    String::from_utf8_lossy(&location_parts(target, query, click).concat()).into_owned()
}

/// This process's click ids: a prefix drawn at the first, as a module worker does.
static CLICK_IDS: Mutex<Option<ClickIds>> = Mutex::new(None);

fn next_click_id() -> ClickId {
    let prefix = || getrandom::u64().unwrap_or_else(|_| rand_fallback());
    let mut ids = CLICK_IDS.lock_or_recover();
    ids.get_or_insert_with(|| ClickIds::new(prefix()))
        .next(prefix)
}

/// Without an entropy source: the clock and the process id, spread.
fn rand_fallback() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rules::mix(nanos ^ u64::from(std::process::id()).rotate_left(32))
}

/// Appends a request's query string to a target, before its fragment.
pub fn append_query(target: &str, query: &str) -> String {
    if query.is_empty() {
        return target.to_owned();
    }
    let (base, fragment) = match target.find('#') {
        Some(at) => target.split_at(at),
        None => (target, ""),
    };
    let separator = if base.ends_with('?') || base.ends_with('&') {
        ""
    } else if base.contains('?') {
        "&"
    } else {
        "?"
    };
    format!("{base}{separator}{query}{fragment}")
}

#[cfg(test)]
mod tests {
    use super::append_query;

    #[test]
    fn query_forwarding() {
        assert_eq!(append_query("https://a.example/", ""), "https://a.example/");
        assert_eq!(
            append_query("https://a.example/", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/?a=b", "x=1"),
            "https://a.example/?a=b&x=1"
        );
        assert_eq!(
            append_query("https://a.example/?", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/p#f", "x=1"),
            "https://a.example/p?x=1#f"
        );
        assert_eq!(
            append_query("https://a.example/?a#f?g", "x"),
            "https://a.example/?a&x#f?g"
        );
    }
}

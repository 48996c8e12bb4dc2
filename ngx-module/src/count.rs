//! The click count of a link with `max_visits`: one command before the answer, whether the
//! record came from the cache or from Redis, idempotent per click (`shortlink_wire::click_count`).

use std::pin::pin;

use nginx_sys::ngx_http_request_t;

use crate::conf::{LocConf, MainConf};
use crate::lookup::{deadline, Resolution};
use crate::redis::resp::Frame;
use crate::redis::{RedisError, Reply};
use crate::request::click_id;
use crate::{variables, worker};
use shortlink_wire::agent::Audience;
use shortlink_wire::click_id::ClickId;
use shortlink_wire::record::{Checked, Link};
use shortlink_wire::{click_count, keys};

/// Counts the click (`Worker::count`): the click's number decides its answer. A person's click
/// carries a token, drawn here, with which Redis counts it once however many times it is asked
/// (`shortlink_wire::click_count`). A failure is a Redis failure (the fallback counts on the
/// primary, or the click gets a 503): an uncounted click is never redirected, so the cap holds
/// whatever fails. The fallback gets the token (`$shortlink_click_token`), so a click whose count
/// Redis took and whose reply never came (Redis restarting mid-command, a connection cut or
/// timed out) is not counted a second time by the fallback: with `max_visits: 1` that second
/// count answered the one recipient 410 (issue 82).
/// A click `verdict` calls a machine's reads the count instead (`GET`) and is answered as the
/// next person's click would be (the same target or the same 410: no cloaking), spending
/// nothing.
pub async fn count(
    r: &mut ngx_http_request_t,
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
    link: Link,
    unlocked: bool,
    verdict: Option<Audience>,
) -> Resolution {
    let spend = verdict.is_none_or(|v| v == Audience::Human);
    let token = spend.then(click_id::next);
    let resolution = counted(mcf, lcf, code, link, unlocked, verdict, token.as_ref()).await;
    if let (Resolution::Failed(_), Some(token)) = (&resolution, &token) {
        variables::set_click_token(r, mcf, token);
    }
    resolution
}

/// The click's count, with `token` (a person's click) or read (a machine's), and its answer. A
/// count once sent is awaited past `shortlink_timeout`, until its connection gives up on it
/// ([`MainConf::reply_bound_ms`]): Redis counts it whenever it gets to it, and a late reply
/// answers the click sooner than the fallback would. A machine's `GET` keeps the lookup's
/// deadline.
async fn counted(
    mcf: &MainConf,
    lcf: &LocConf,
    code: &[u8],
    link: Link,
    unlocked: bool,
    verdict: Option<Audience>,
    token: Option<&ClickId>,
) -> Resolution {
    let reply = match send(mcf, code, token) {
        Ok(reply) => reply,
        Err(why) => return Resolution::Failed(why),
    };
    let mut reply = pin!(reply);
    let mut answered = deadline(reply.as_mut(), lcf.timeout_ms()).await;
    if answered.is_err() && token.is_some() {
        // Bounded twice: the connection fails the reply at its own timeout, this only backs it.
        answered = deadline(reply.as_mut(), mcf.reply_bound_ms()).await;
    }
    match answered {
        Err(()) => Resolution::Failed(RedisError::Timeout),
        Ok(Err(why)) => Resolution::Failed(why),
        Ok(Ok(Frame::Integer(visits))) if visits > 0 => {
            let checked = Checked {
                visits: Some(visits as u64),
                unlocked,
                verdict,
            };
            Resolution::Checked(link, checked)
        }
        Ok(Ok(frame @ (Frame::Bulk(_) | Frame::Null))) if token.is_none() => {
            match spent_so_far(&frame) {
                Some(so_far) => {
                    let checked = Checked {
                        visits: Some(so_far + 1),
                        unlocked,
                        verdict,
                    };
                    Resolution::Checked(link, checked)
                }
                None => Resolution::Failed(RedisError::BadValue),
            }
        }
        Ok(Ok(Frame::Error(_))) => Resolution::Failed(RedisError::ErrorReply),
        Ok(Ok(_)) => Resolution::Failed(RedisError::BadValue),
    }
}

/// The clicks a `GET sl:n:<code>` reply says were spent (none yet: no key).
fn spent_so_far(frame: &Frame) -> Option<u64> {
    match frame {
        Frame::Null => Some(0),
        Frame::Bulk(digits) => std::str::from_utf8(digits).ok()?.parse().ok(),
        _ => None,
    }
}

/// Sends the click's count on `sl:n:<code>` to the primary (on a cluster, the owner of the
/// counter's slot, which holds the token's too): with a token, `EVAL click_count::COUNT_SCRIPT`,
/// which spends a place only for a token it has not seen; without one, `GET`.
fn send(mcf: &MainConf, code: &[u8], token: Option<&ClickId>) -> Result<Reply, RedisError> {
    const SCRIPT: &[&[u8]] = &[click_count::COUNT_SCRIPT.as_bytes()];
    const TTL: &[&[u8]] = &[click_count::TOKEN_TTL_ARG.as_bytes()];
    let counter: &[&[u8]] = &[keys::VISIT_COUNT_PREFIX.as_bytes(), code];
    let token_key;
    let spend: [&[&[u8]]; 6];
    let args: &[&[&[u8]]] = match token {
        Some(token) => {
            token_key = keys::click_token_key_parts(code, token.as_bytes());
            spend = [&[b"EVAL"], SCRIPT, &[b"2"], counter, &token_key, TTL];
            &spend
        }
        None => &[&[b"GET"], counter],
    };
    worker::with(mcf, |w| w.count(code, args)).unwrap_or(Err(RedisError::Unavailable))
}

//! The click count of a link with `max_visits`: one command before the answer, whether the
//! record came from the cache or from Redis, idempotent per click (`shortlink_wire::click_count`).

use std::pin::pin;

use nginx_sys::ngx_http_request_t;

use crate::conf::{LocConf, MainConf};
use crate::lookup::{deadline, Resolution};
use crate::redis::resp::Frame;
use crate::redis::RedisError;
use crate::request::click_id;
use crate::{variables, worker};
use shortlink_wire::agent::Audience;
use shortlink_wire::record::{Checked, Link};

/// Counts the click (`Worker::count`): the click's number decides its answer. A person's click
/// carries a token, drawn here, with which Redis counts it once however many times it is asked
/// (`shortlink_wire::click_count`). A failure is a Redis failure (the fallback counts on the
/// primary, or the click gets a 503): an uncounted click is never redirected, so the cap holds
/// whatever fails. The fallback gets the token (`$shortlink_click_token`), so a click whose count
/// Redis took and whose reply never came (Redis restarting mid-command, a connection cut or
/// timed out) is not counted a second time by the fallback: with `max_visits: 1` that second
/// count answered the one recipient 410 (issue 82).
/// A click `verdict` calls a machine's reads the count instead (`GET`, within the lookup's
/// deadline) and is answered as the next person's click would be (the same target or the same
/// 410: no cloaking), spending nothing.
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
    let answered = match worker::with(mcf, |w| w.count(code, token.as_ref())) {
        Some(Ok(reply)) => {
            let mut reply = pin!(reply);
            let mut answered = deadline(reply.as_mut(), lcf.timeout_ms()).await;
            if answered.is_err() && spend {
                // Awaited until its connection gives up on it ([`MainConf::reply_bound_ms`]):
                // Redis counts it whenever it gets to it, and its reply answers sooner than the
                // fallback would. Bounded twice: the connection fails the reply at its own
                // timeout, this only backs it.
                answered = deadline(reply.as_mut(), mcf.reply_bound_ms()).await;
            }
            answered.unwrap_or(Err(RedisError::Timeout))
        }
        Some(Err(why)) => Err(why),
        None => Err(RedisError::Unavailable),
    };
    let checked = |visits| Checked {
        visits: Some(visits),
        unlocked,
        verdict,
    };
    let visits = match answered {
        Ok(Frame::Integer(visits)) if visits > 0 => Ok(visits as u64),
        Ok(frame @ (Frame::Bulk(_) | Frame::Null)) if !spend => spent_so_far(&frame)
            .map(|so_far| so_far + 1)
            .ok_or(RedisError::BadValue),
        Ok(Frame::Error(_)) => Err(RedisError::ErrorReply),
        Ok(_) => Err(RedisError::BadValue),
        Err(why) => Err(why),
    };
    match (visits, token) {
        (Ok(visits), _) => Resolution::Checked(link, checked(visits)),
        (Err(why), Some(token)) => {
            variables::set_click_token(r, mcf, &token);
            Resolution::Failed(why)
        }
        (Err(why), None) => Resolution::Failed(why),
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

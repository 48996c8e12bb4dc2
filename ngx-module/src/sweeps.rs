//! The sweeps the visit consumer noticed (issue 78, `shortlink_wire::sweeps`): a capped click of
//! a workspace from a network and with an agent that were found sweeping its links is a
//! scanner's, answered as a person's without spending the cap.
//!
//! Each worker keeps its own copy of the hash `sl:sw` and judges from it: a capped click never
//! waits for it, and a plain redirect never looks at it. A task per worker reads the hash with
//! one `HGETALL` every [`REFRESH_MS`] (usually absent: an empty reply) and swaps the copy in
//! when the reply is whole; a failed read keeps the copy it had (its flags end by themselves).
//! With no sweep noticed, a capped click pays one thread-local test.

use std::pin::pin;
use std::time::Duration;

use ngx::async_::sleep;
use shortlink_wire::resp::Frame;
use shortlink_wire::sweeps::Flags;

use crate::conf::MainConf;
use crate::request::swept;
use crate::worker;

/// How often a worker reads the flags again: the longest a noticed sweep waits to protect caps
/// here, beside the time the consumer takes to notice it (the module's flush, a read of the
/// stream, a batch judged and stored).
pub const REFRESH_MS: u64 = 250;

/// How soon a first read that found the worker busy is tried again.
const FIRST_RETRY_MS: u64 = 20;

/// How long a read may take before it counts as failed (the copy stays as it was).
const READ_TIMEOUT_MS: u64 = 1000;

/// The flags an `HGETALL sl:sw` reply holds; `None`: not a reply to it.
fn from_reply(reply: &Frame) -> Option<Flags> {
    let Frame::Array(items) = reply else {
        return None;
    };
    let mut pairs = Vec::with_capacity(items.len() / 2);
    for pair in items.chunks_exact(2) {
        let (Frame::Bulk(field), Frame::Bulk(value)) = (&pair[0], &pair[1]) else {
            return None;
        };
        pairs.push((field.as_slice(), value.as_slice()));
    }
    Some(Flags::from_pairs(pairs.into_iter()))
}

/// Reads the flags now, then every [`REFRESH_MS`], for the worker's life (the worker owns the
/// task: a new configuration's worker state drops it).
pub async fn refresh(mcf: &'static MainConf) {
    loop {
        let key = shortlink_wire::keys::SWEEPS.as_bytes();
        let wait = match worker::with(mcf, |w| w.read_hash(key)) {
            None => FIRST_RETRY_MS,
            Some(Err(_)) => REFRESH_MS,
            Some(Ok(reply)) => {
                let frame = crate::lookup::deadline(pin!(reply), READ_TIMEOUT_MS).await;
                if let Some(flags) = (frame.ok().and_then(Result::ok)).and_then(|f| from_reply(&f))
                {
                    swept::store(flags);
                }
                REFRESH_MS
            }
        };
        sleep(Duration::from_millis(wait)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_wire::record::WorkspaceName;
    use shortlink_wire::sweeps::{agent_key, Flag, Network};
    use std::net::IpAddr;

    #[test]
    fn a_reply_becomes_the_flags_and_anything_else_is_refused() {
        let brand: WorkspaceName = "brand-a".parse().unwrap();
        let ip: IpAddr = "203.0.113.5".parse().unwrap();
        let flag = Flag {
            workspace: brand,
            network: Network::of(ip),
            agent: agent_key(b"Chrome"),
        };
        let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
        let reply = Frame::Array(vec![bulk(&flag.field()), bulk("5000")]);
        let flags = from_reply(&reply).unwrap();
        assert!(flags.holds(brand, ip, b"Chrome", 5000));
        assert!(from_reply(&Frame::Array(vec![])).unwrap().is_empty());
        assert!(from_reply(&Frame::Null).is_none());
        assert!(from_reply(&Frame::Array(vec![Frame::Integer(1), bulk("x")])).is_none());
    }
}

//! A capped click's count, taken once whatever its connection does (issue 82).
//!
//! A person's click on a link with `max_visits` spends one place of the cap in `sl:n:<code>`.
//! Its command can reach Redis and its reply never come back: Redis restarting mid-command, a
//! reply stalled past the connection's timeouts, a connection cut. The sender cannot tell a
//! counted click from an uncounted one, and whoever counts it next (the fallback the module hands
//! the click to, the sidecar's client retrying a dropped command) would spend a second place on
//! the same person: with `max_visits: 1`, a 410 for the one recipient the link was sent to.
//!
//! So each such click carries a token, a [`crate::click_id::ClickId`] drawn where the click is
//! first counted (the module's worker, or the fallback when Redis failed before the module
//! counted), and is counted by [`COUNT_SCRIPT`], which remembers the token beside the counter
//! ([`crate::keys::click_token_key`]) and spends a place only for a token it has not seen. Every
//! later try with the same token (the module's late command, the fallback's count, its client's
//! retry) gets the number the click was given, so it gets the same answer. The module hands its
//! token to the fallback in [`crate::fallback::CLICK_TOKEN_HEADER`].

/// `EVAL COUNT_SCRIPT 2 <counter key> <token key> <TOKEN_TTL_ARG>`: the click's number in its
/// link's counter. A token seen before gives the number it got then, spending nothing; a new one
/// increments the counter and is kept with its number for the TTL. Both keys share a hash slot
/// ([`crate::keys::click_token_key`]), so one script takes both on a cluster too.
pub const COUNT_SCRIPT: &str = "local n = redis.call('GET', KEYS[2]) \
     if n then return tonumber(n) end \
     n = redis.call('INCR', KEYS[1]) \
     redis.call('SET', KEYS[2], n, 'EX', ARGV[1]) \
     return n";

/// How long a token is remembered, in seconds: far longer than a click can take to be counted
/// again (the module awaits its command for its connection's connect and read timeouts, seconds;
/// the fallback answers within its proxy timeout, 3 s, its client's retry included), and short
/// enough that a busy campaign's tokens stay small: at 1,000 capped clicks a second, 120,000 keys
/// of about 80 bytes. Text: it goes to Redis as the script's argument.
pub const TOKEN_TTL_ARG: &str = "120";

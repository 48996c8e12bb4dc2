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

/// The count's command, `EVAL COUNT_SCRIPT 2 sl:n:<code> sl:nt:{sl:n:<code>}:<token> <ttl>`,
/// encoded once but for the code and the token: a capped click then writes one copy of the
/// script and its arguments instead of [`crate::resp::encode_command`]'s header and copy per
/// part (the module's capped path, callgrind).
#[derive(Debug, Clone)]
pub struct CountCommand {
    /// The array's header, `EVAL`, the script and the key count.
    head: Vec<u8>,
    /// The TTL.
    tail: Vec<u8>,
}

impl Default for CountCommand {
    fn default() -> Self {
        let mut head = Vec::new();
        crate::resp::push_header(&mut head, b'*', 6);
        for arg in [&b"EVAL"[..], COUNT_SCRIPT.as_bytes(), b"2"] {
            crate::resp::push_header(&mut head, b'$', arg.len());
            head.extend_from_slice(arg);
            head.extend_from_slice(b"\r\n");
        }
        let mut tail = Vec::new();
        crate::resp::push_header(&mut tail, b'$', TOKEN_TTL_ARG.len());
        tail.extend_from_slice(TOKEN_TTL_ARG.as_bytes());
        tail.extend_from_slice(b"\r\n");
        CountCommand { head, tail }
    }
}

impl CountCommand {
    /// Appends the count of click `token` on `code`: what [`crate::resp::encode_command`] writes
    /// for the same arguments.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>, code: &[u8], token: &[u8]) {
        use crate::keys::{click_token_key_parts, VISIT_COUNT_PREFIX};
        use crate::resp::push_header;
        let counter = [VISIT_COUNT_PREFIX.as_bytes(), code];
        let token_key = click_token_key_parts(code, token);
        out.extend_from_slice(&self.head);
        for key in [&counter[..], &token_key[..]] {
            push_header(out, b'$', key.iter().map(|part| part.len()).sum());
            for part in key {
                out.extend_from_slice(part);
            }
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(&self.tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{click_token_key, visit_count_key};

    #[test]
    fn the_count_command_is_the_command_of_its_arguments() {
        let command = CountCommand::default();
        for (code, token) in [
            ("aB3xY9", "AAAAAAAAAAAAAAAA"),
            ("x", ""),
            ("a-b_c.d~e", "x_-9"),
        ] {
            let mut out = b"before".to_vec();
            command.write(&mut out, code.as_bytes(), token.as_bytes());
            let (counter, token_key) = (visit_count_key(code), click_token_key(code, token));
            let mut expected = b"before".to_vec();
            crate::resp::encode_command(
                &mut expected,
                &[
                    &[b"EVAL"],
                    &[COUNT_SCRIPT.as_bytes()],
                    &[b"2"],
                    &[counter.as_bytes()],
                    &[token_key.as_bytes()],
                    &[TOKEN_TTL_ARG.as_bytes()],
                ],
            );
            assert_eq!(out, expected, "{code}");
        }
    }
}

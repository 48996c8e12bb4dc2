//! Every Redis key name shortlink uses: the one place they are spelled. The module reads links
//! and the projection marker and appends to the visit stream; the sidecar writes all of them.
//! A Redis Cluster adds per-slot variants of the marker, the resync token and the visit stream
//! ([`crate::cluster`] builds them from the prefixes here).

/// Prefix of every link record: `sl:c:<code>` holds the [`crate::record`] of `<code>`.
pub const LINK_PREFIX: &str = "sl:c:";

/// The projection marker: present while Redis holds every link of SQL (a missing record is then
/// a 404); its value names the code scheme. On a cluster, one per slot ([`MARKER_PREFIX`]).
pub const PROJECTION_MARKER: &str = "sl:meta:projection";

/// Prefix of a cluster's per-slot projection markers: `sl:meta:projection:{<tag>}`.
pub const MARKER_PREFIX: &str = "sl:meta:projection:";

/// The token a resync holds while it refills Redis; the marker is set only by the holder. On a
/// cluster, one per slot: `sl:meta:resync:{<tag>}`.
pub const RESYNC_TOKEN: &str = "sl:meta:resync";

/// The high-water mark of sequence numbers leased to sidecars (only ever raised).
pub const ISSUED_MARK: &str = "sl:meta:issued";

/// Numbers a sidecar's batch lease takes at least. The mark counts numbers leased, not used: a
/// reader of the newest codes below it (the module's cache refill) may meet this many unused
/// ones in a row for each sidecar.
pub const BATCH_RESERVE: u64 = 65_536;

/// The visit stream of one Redis (or a primary with replicas), read by the sidecar's consumer
/// group. On a cluster, [`crate::cluster::EVENT_STREAMS`] streams `sl:events:{<tag>}`.
pub const EVENT_STREAM: &str = "sl:events";

/// Prefix of a cluster's visit streams: `sl:events:{<tag>}`.
pub const EVENT_STREAM_PREFIX: &str = "sl:events:";

/// Prefix of the click counters of links with `max_visits`: `sl:n:<code>` counts the clicks that
/// asked to be redirected (an `INCR` each, from any edge). Deleted with the link.
pub const VISIT_COUNT_PREFIX: &str = "sl:n:";

/// The click counter of `code` ([`VISIT_COUNT_PREFIX`]).
pub fn visit_count_key(code: &str) -> String {
    format!("{VISIT_COUNT_PREFIX}{code}")
}

/// Prefix of the tokens of counted clicks ([`crate::click_count`]): `sl:nt:{sl:n:<code>}:<token>`
/// holds the number the click `<token>` got from `sl:n:<code>`, for two minutes. Its hash tag is
/// the counter's whole key, which has no braces (no code holds any: shortcode's charsets), so on
/// a cluster a click's token lives in its counter's slot and one script takes both.
pub const CLICK_TOKEN_PREFIX: &str = "sl:nt:";

/// The token key of click `token` on `code` ([`CLICK_TOKEN_PREFIX`]), in pieces to write one
/// after another: the module encodes them straight into its command.
pub fn click_token_key_parts<'a>(code: &'a [u8], token: &'a [u8]) -> [&'a [u8]; 6] {
    [
        CLICK_TOKEN_PREFIX.as_bytes(),
        b"{",
        VISIT_COUNT_PREFIX.as_bytes(),
        code,
        b"}:",
        token,
    ]
}

/// The token key of click `token` on `code` ([`CLICK_TOKEN_PREFIX`]).
pub fn click_token_key(code: &str, token: &str) -> String {
    format!("{CLICK_TOKEN_PREFIX}{{{VISIT_COUNT_PREFIX}{code}}}:{token}")
}

/// Prefix of the password attempt budgets ([`crate::record::password::ATTEMPT_SCRIPT`]):
/// `sl:pw:{<code>}` is a link's budget across all clients, `sl:pw:{<code>}:<client>` one
/// client's on that link. The braces are a hash tag: on a cluster both live in one slot, so one
/// script reads and writes both.
pub const PASSWORD_ATTEMPTS_PREFIX: &str = "sl:pw:";

/// The budget of `code` across all clients ([`PASSWORD_ATTEMPTS_PREFIX`]).
pub fn password_link_key(code: &[u8]) -> Vec<u8> {
    [PASSWORD_ATTEMPTS_PREFIX.as_bytes(), b"{", code, b"}"].concat()
}

/// The budget of `client` (a [`crate::record::password::client_key`]) on `code`.
pub fn password_client_key(code: &[u8], client: &[u8]) -> Vec<u8> {
    [&password_link_key(code), &b":"[..], client].concat()
}

/// Prefix of the API keys' request budgets: `sl:rl:{k<id>}` holds one key's GCRA "theoretical
/// arrival time" (microseconds of Redis's clock) with a TTL that ends when its burst is full again.
/// Shared by every sidecar on the same Redis, so a key's limit is one budget, not one per process;
/// the hash tag keeps the one key the limiter's script touches in a slot of its own on a cluster.
pub const RATE_LIMIT_PREFIX: &str = "sl:rl:";

/// The request budget of API key `id` ([`RATE_LIMIT_PREFIX`]).
pub fn api_key_rate_key(id: i64) -> String {
    format!("{RATE_LIMIT_PREFIX}{{k{id}}}")
}

/// Prefix of the workspaces' daily quotas: `sl:q:links:{w<workspace>:<yyyymmdd>}` counts the links
/// a workspace reserved on that UTC day (an integer, expiring a day after the day ends). One hash
/// tag per workspace and day: a reservation is one script on one key, wherever the slot lives.
pub const QUOTA_PREFIX: &str = "sl:q:";

/// The link count of `workspace` on the UTC day `day` (`yyyymmdd`) ([`QUOTA_PREFIX`]).
pub fn links_quota_key(workspace: i64, day: &str) -> String {
    format!("{QUOTA_PREFIX}links:{{w{workspace}:{day}}}")
}

/// Prefix of the delivery receipts' counts: `sl:rc:{receipts}:<unix second>` is a hash of the
/// final receipts every sidecar stored in that second, by series (workspace, carrier, short
/// domain) and count ([`receipt_count_field`]), expiring once out of every judgement's window.
/// Each sidecar adds its own (`HINCRBY`) and reads the window's seconds back, so a domain's
/// receipts are judged whole behind any number of sidecars. One hash slot for all of them: a
/// sidecar's pipeline a second reads a whole window, on a cluster too.
pub const RECEIPT_COUNTS_PREFIX: &str = "sl:rc:";

/// The receipts' counts of Unix second `second` ([`RECEIPT_COUNTS_PREFIX`]).
pub fn receipt_counts_key(second: u64) -> String {
    format!("{RECEIPT_COUNTS_PREFIX}{{receipts}}:{second}")
}

/// A field of [`receipt_counts_key`]'s hash: `workspace`, `carrier`, `domain` and `count`
/// joined by newlines, `count` being `finals`, `failures`, or `error:<code>` (the failures with
/// that error code; `error:` for none). Receipts' carriers and error codes hold no control
/// characters (they are refused), slugs and hosts neither: the newline never occurs inside.
pub fn receipt_count_field(workspace: &str, carrier: &str, domain: &str, count: &str) -> String {
    [workspace, carrier, domain, count].join("\n")
}

/// The parts of a [`receipt_count_field`]: (workspace, carrier, domain, count).
pub fn parse_receipt_count_field(field: &str) -> Option<(&str, &str, &str, &str)> {
    let mut parts = field.splitn(4, '\n');
    Some((parts.next()?, parts.next()?, parts.next()?, parts.next()?))
}

/// Prefix of the links the drain on receipts counted: `sl:rl:{receipts}:<series>\n<code>` (the
/// series as in [`receipt_count_field`]: workspace, carrier, domain), set (`SET NX`, expiring with
/// the window) by the first sidecar to count a final receipt of the link in that series. Only
/// that sidecar adds it to [`receipt_counts_key`]: a link is one recipient, counted once per
/// window and series whatever the message ids reported for it and whichever sidecar took them.
pub const RECEIPT_LINK_PREFIX: &str = "sl:rl:";

/// The counted-link key of `code` in a series ([`RECEIPT_LINK_PREFIX`]). Codes hold no newline,
/// nor do the series' parts ([`receipt_count_field`]).
pub fn receipt_link_key(workspace: &str, carrier: &str, domain: &str, code: &str) -> String {
    let series = [workspace, carrier, domain, code].join("\n");
    format!("{RECEIPT_LINK_PREFIX}{{receipts}}:{series}")
}

/// Prefix of preview cards: `sl:p:<code>` holds the card of a link whose record has
/// [`crate::record::Extras::has_card`] ([`crate::preview`]).
pub const PREVIEW_PREFIX: &str = "sl:p:";

/// The card key of `code` ([`PREVIEW_PREFIX`]).
pub fn preview_key(code: &str) -> String {
    format!("{PREVIEW_PREFIX}{code}")
}

/// The sweeps the visit consumer noticed ([`crate::sweeps`]): a hash of [`crate::sweeps::Flag`]
/// fields, each valued the Unix ms it lasts until, expiring with its last flag. One key: every
/// worker reads it whole every few hundred milliseconds (usually absent, an empty reply).
pub const SWEEPS: &str = "sl:sw";

/// The hash of every workspace's and domain's not-found redirects ([`crate::not_found`]).
pub use crate::not_found::KEY as NOT_FOUND_REDIRECTS;

/// The record key of `code`.
pub fn link_key(code: &str) -> String {
    format!("{LINK_PREFIX}{code}")
}

/// The code a record key names, if `key` is one.
pub fn code_of(key: &str) -> Option<&str> {
    key.strip_prefix(LINK_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_counts_share_one_slot_and_their_fields_round_trip() {
        use crate::cluster::key_slot;
        let slot = key_slot(receipt_counts_key(1_764_300_000).as_bytes());
        assert_eq!(key_slot(receipt_counts_key(1).as_bytes()), slot);
        assert_eq!(receipt_counts_key(7), "sl:rc:{receipts}:7");
        let field = receipt_count_field("brand-a", "T-Mobile: US", "s1.example", "error:0x0b");
        assert_eq!(
            parse_receipt_count_field(&field),
            Some(("brand-a", "T-Mobile: US", "s1.example", "error:0x0b"))
        );
        assert_eq!(parse_receipt_count_field("w\nc\nd"), None);
        let link = receipt_link_key("brand-a", "23410", "s1.example", "aB3xY9");
        assert_eq!(key_slot(link.as_bytes()), slot);
        assert_eq!(link, "sl:rl:{receipts}:brand-a\n23410\ns1.example\naB3xY9");
    }

    #[test]
    fn link_keys_round_trip() {
        assert_eq!(link_key("aB3xY9"), "sl:c:aB3xY9");
        assert_eq!(code_of(&link_key("aB3xY9")), Some("aB3xY9"));
        assert_eq!(code_of("sl:meta:projection"), None);
    }

    #[test]
    fn a_clicks_token_shares_its_counters_hash_slot() {
        use crate::cluster::key_slot;
        // A generated code, an alias, an imported code with every byte its charset allows.
        for code in ["aB3xY9", "spring-sale_2026", "Promo.~x-1_"] {
            let token = click_token_key(code, "AAAAAAAAAAAAAAAA");
            assert_eq!(
                key_slot(token.as_bytes()),
                key_slot(visit_count_key(code).as_bytes()),
                "{code}"
            );
        }
        assert_eq!(
            click_token_key("aB3xY9", "x-_0123456789abc"),
            "sl:nt:{sl:n:aB3xY9}:x-_0123456789abc"
        );
        assert_eq!(
            click_token_key_parts(b"aB3xY9", b"x-_0123456789abc").concat(),
            click_token_key("aB3xY9", "x-_0123456789abc").as_bytes()
        );
    }

    #[test]
    fn a_links_password_budgets_share_its_hash_slot() {
        use crate::cluster::key_slot;
        for code in [&b"aB3xY9"[..], b"promo-2025", b"a}b", b"{x}"] {
            let link = password_link_key(code);
            let client = password_client_key(code, b"2001:db8:1:2::/64");
            assert_eq!(key_slot(&link), key_slot(&client), "{code:?}");
        }
        assert_eq!(password_link_key(b"aB3xY9"), b"sl:pw:{aB3xY9}");
        assert_eq!(
            password_client_key(b"aB3xY9", b"192.0.2.1"),
            b"sl:pw:{aB3xY9}:192.0.2.1"
        );
    }

    #[test]
    fn limit_keys_are_one_hash_tag_each() {
        use crate::cluster::key_slot;
        assert_eq!(api_key_rate_key(42), "sl:rl:{k42}");
        assert_eq!(links_quota_key(1, "20261126"), "sl:q:links:{w1:20261126}");
        // The tag is the key's own: key 1 and key 12 (or workspace 1's two days) are not bound to
        // one slot, so a cluster spreads them like any other keys.
        assert_eq!(key_slot(api_key_rate_key(7).as_bytes()), key_slot(b"k7"));
        assert_eq!(
            key_slot(links_quota_key(3, "20261126").as_bytes()),
            key_slot(b"w3:20261126")
        );
    }

    #[test]
    fn cluster_prefixes_extend_the_plain_names() {
        // A cluster's keys are the plain ones plus `:{tag}`: operators grep for either.
        assert_eq!(MARKER_PREFIX, format!("{PROJECTION_MARKER}:"));
        assert_eq!(EVENT_STREAM_PREFIX, format!("{EVENT_STREAM}:"));
    }
}

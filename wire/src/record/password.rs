//! A password-protected link: the record keeps a salted SHA-256 digest of the password, and the
//! module checks a submitted password against it in microseconds, so the check never holds a
//! worker. A slow hash would protect nothing here: whoever can read the record can read its
//! target, which is all the password guards. What keeps guessing slow is the attempt budget in
//! Redis ([`ATTEMPT_SCRIPT`]): one per client, one per link across all clients.

use std::net::IpAddr;

use sha2::{Digest, Sha256};

pub const SALT_LEN: usize = 16;
/// Longer submissions are refused unread.
pub const MAX_PASSWORD_BYTES: usize = 128;

/// Wrong passwords one client ([`client_key`]) may give one link at once; after them, one more
/// per [`CLIENT_INTERVAL_SECS`]. Someone behind the same address as a guesser (a shared NAT) waits
/// at most that interval, not a long window.
pub const CLIENT_BURST: u64 = 5;
pub const CLIENT_INTERVAL_SECS: u64 = 120;
/// Wrong passwords one link takes from all clients together at once; after them, one more per
/// [`LINK_INTERVAL_SECS`], however many addresses guess.
pub const LINK_BURST: u64 = 20;
pub const LINK_INTERVAL_SECS: u64 = 60;
/// The most wrong passwords a link takes in any hour: its burst, then one per interval.
pub const MAX_WRONG_PER_HOUR: u64 = LINK_BURST + 3600 / LINK_INTERVAL_SECS;

// One client alone never empties a link's budget (its burst is smaller and it refills slower),
// so one guesser never locks the others out: only many clients together can.
const _: () = assert!(CLIENT_BURST < LINK_BURST && CLIENT_INTERVAL_SECS > LINK_INTERVAL_SECS);

/// Checks, and when wrong counts, one attempt against both budgets, kept as GCRA "theoretical
/// arrival times" (one integer of milliseconds per key, expiring when its budget is full again):
/// `EVAL ATTEMPT_SCRIPT 2 <client key> <link key> <right> <client burst> <client interval ms>
/// <link burst> <link interval ms>` ([`attempt_args`]), keys from
/// [`crate::keys::password_client_key`] and [`crate::keys::password_link_key`] (one hash slot).
/// `<right>` is `1` when the password matched: such an attempt is checked but not counted, so a
/// link whose password is shared with many people is not throttled by them; it is still refused
/// while a budget is empty, or a guesser would learn a right guess from the answer.
/// The reply: 0, go ahead (then the password decides); n > 0, refused, retry in n seconds.
/// Redis's clock, not the edges', so every edge counts alike; one script, so no key is ever left
/// without its expiry.
pub const ATTEMPT_SCRIPT: &str = "redis.replicate_commands() \
     local t = redis.call('TIME') \
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
     local wait, tats = 0, {} \
     for i = 1, 2 do \
       local burst, interval = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1]) \
       local tat = math.max(tonumber(redis.call('GET', KEYS[i]) or 0) or 0, now) \
       wait = math.max(wait, tat - now - (burst - 1) * interval) \
       tats[i] = tat + interval \
     end \
     if wait > 0 then return math.ceil(wait / 1000) end \
     if ARGV[1] == '0' then \
       for i = 1, 2 do \
         redis.call('SET', KEYS[i], string.format('%d', tats[i]), 'PX', \
           string.format('%d', tats[i] - now)) \
       end \
     end \
     return 0";

/// The arguments after the keys of [`ATTEMPT_SCRIPT`], for a `right` or wrong password.
pub fn attempt_args(right: bool) -> [String; 5] {
    [
        if right { "1" } else { "0" }.to_owned(),
        CLIENT_BURST.to_string(),
        (CLIENT_INTERVAL_SECS * 1000).to_string(),
        LINK_BURST.to_string(),
        (LINK_INTERVAL_SECS * 1000).to_string(),
    ]
}

/// Who a client is to its budget: an IPv4 address as it is, an IPv6 address by its /64 (a
/// subscriber gets at least that much and may rotate through it freely), an IPv4-mapped IPv6
/// address as its IPv4. Text that is no address (a unix socket's) stays as it is.
pub fn client_key(address: &[u8]) -> Vec<u8> {
    let parsed = std::str::from_utf8(address)
        .ok()
        .and_then(|text| text.parse::<IpAddr>().ok());
    match parsed.map(|ip| ip.to_canonical()) {
        Some(IpAddr::V4(v4)) => v4.to_string().into_bytes(),
        Some(IpAddr::V6(v6)) => {
            let [a, b, c, d, ..] = v6.segments();
            format!("{a:x}:{b:x}:{c:x}:{d:x}::/64").into_bytes()
        }
        None => address.to_vec(),
    }
}

/// The form field the password page submits.
pub const FIELD: &str = "password";
/// The password page's status: the link exists and opens with its password.
pub const PASSWORD_STATUS: u16 = 401;
/// Too many attempts.
pub const RATE_LIMITED_STATUS: u16 = 429;
/// A correct password's redirect: a POST must not be repeated at the target (307/308 would).
pub const UNLOCKED_STATUS: u16 = 303;

/// The digest in a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Password {
    pub salt: [u8; SALT_LEN],
    pub digest: [u8; 32],
}

impl Password {
    /// The digest of `password` under `salt` (the sidecar draws a fresh salt per link).
    pub fn new(password: &[u8], salt: [u8; SALT_LEN]) -> Password {
        Password {
            salt,
            digest: digest(&salt, password),
        }
    }

    /// Whether `given` is the password, comparing in constant time.
    pub fn matches(&self, given: &[u8]) -> bool {
        if given.len() > MAX_PASSWORD_BYTES {
            return false;
        }
        let other = digest(&self.salt, given);
        self.digest
            .iter()
            .zip(other)
            .fold(0, |diff, (a, b)| diff | (a ^ b))
            == 0
    }

    /// Salt and digest as lower-case hex: the text form the sidecar stores in SQL.
    pub fn to_hex(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The inverse of [`Password::to_hex`].
    pub fn from_hex(hex: &str) -> Option<Password> {
        if hex.len() != 2 * (SALT_LEN + 32) || !hex.is_ascii() {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Password::from_bytes(&bytes)
    }

    /// A digest no password has (finding one would break SHA-256): what a link whose stored
    /// digest is unreadable gets, so that it stays closed rather than opening to everyone.
    pub fn unmatchable() -> Password {
        Password {
            salt: [0; SALT_LEN],
            digest: [0; 32],
        }
    }

    pub(super) fn to_bytes(&self) -> [u8; SALT_LEN + 32] {
        let mut bytes = [0; SALT_LEN + 32];
        bytes[..SALT_LEN].copy_from_slice(&self.salt);
        bytes[SALT_LEN..].copy_from_slice(&self.digest);
        bytes
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Option<Password> {
        let (salt, digest) = bytes.split_at_checked(SALT_LEN)?;
        Some(Password {
            salt: salt.try_into().ok()?,
            digest: digest.try_into().ok()?,
        })
    }
}

fn digest(salt: &[u8], password: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"shortlink password v1\0")
        .chain_update(salt)
        .chain_update(password)
        .finalize()
        .into()
}

/// The value of form field `name` in an `application/x-www-form-urlencoded` body, decoded
/// (`+` is a space, `%XX` a byte); `None` when absent, malformed or longer than
/// [`MAX_PASSWORD_BYTES`].
pub fn form_value(body: &[u8], name: &str) -> Option<Vec<u8>> {
    let value = body.split(|&b| b == b'&').find_map(|pair| {
        let (key, value) = split_once(pair, b'=')?;
        (key == name.as_bytes()).then_some(value)
    })?;
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        out.push(match b {
            b'+' => b' ',
            b'%' => {
                let hi = hex(*bytes.next()?)?;
                let lo = hex(*bytes.next()?)?;
                hi << 4 | lo
            }
            b => b,
        });
        if out.len() > MAX_PASSWORD_BYTES {
            return None;
        }
    }
    Some(out)
}

fn split_once(bytes: &[u8], separator: u8) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == separator)?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

/// The password page (`wrong`: after a wrong password), posting back to the same URL: the module
/// and the fallback send these very bytes.
pub fn password_page(wrong: bool) -> Vec<u8> {
    let notice = if wrong {
        "<p role=\"alert\">That password is not right. Please try again.</p>"
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>Password required</title></head>\
         <body><h1>This link is protected</h1>{notice}<form method=\"post\">\
         <label>Password <input type=\"password\" name=\"{FIELD}\" autocomplete=\"off\" \
         autofocus required maxlength=\"{MAX_PASSWORD_BYTES}\"></label> \
         <button type=\"submit\">Open</button></form></body></html>\n"
    )
    .into_bytes()
}

/// The page after too many attempts.
pub fn rate_limited_page() -> Vec<u8> {
    b"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta name=\"robots\" content=\"noindex\">\
      <title>Too many attempts</title></head><body><h1>Too many attempts</h1>\
      <p>Please wait a few minutes before trying this link's password again.</p></body></html>\n"
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_and_nothing_else_matches() {
        let password = Password::new(b"s3cret pass", [7; SALT_LEN]);
        assert!(password.matches(b"s3cret pass"));
        for wrong in [&b""[..], b"s3cret", b"s3cret pass ", b"S3cret pass"] {
            assert!(!password.matches(wrong));
        }
        // The salt changes the digest: equal passwords of two links look unrelated.
        assert_ne!(
            Password::new(b"x", [1; 16]).digest,
            Password::new(b"x", [2; 16]).digest
        );
        let bytes = password.to_bytes();
        assert_eq!(Password::from_bytes(&bytes[1..]), None);
        assert_eq!(
            Password::from_hex(&password.to_hex()),
            Some(password.clone())
        );
        assert_eq!(Password::from_bytes(&bytes), Some(password));
        assert_eq!(Password::from_hex("00"), None);
        assert_eq!(Password::from_hex(&"zz".repeat(48)), None);
        assert!(!Password::unmatchable().matches(b""));
    }

    #[test]
    fn form_values_decode_like_a_browser_encodes_them() {
        assert_eq!(
            form_value(b"password=a+b%21%C3%A9", FIELD),
            Some("a b!é".into())
        );
        assert_eq!(form_value(b"x=1&password=&y=2", FIELD), Some(vec![]));
        assert_eq!(form_value(b"passwords=1", FIELD), None);
        assert_eq!(form_value(b"password=%G1", FIELD), None);
        assert_eq!(form_value(b"password=%4", FIELD), None);
        let long = format!("password={}", "a".repeat(MAX_PASSWORD_BYTES + 1));
        assert_eq!(form_value(long.as_bytes(), FIELD), None);
    }

    #[test]
    fn clients_are_addresses_and_ipv6_slash_64s() {
        let key = |text: &str| String::from_utf8(client_key(text.as_bytes())).unwrap();
        assert_eq!(key("192.0.2.10"), "192.0.2.10");
        assert_eq!(key("::ffff:192.0.2.10"), "192.0.2.10");
        assert_eq!(key("2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:3::1"), "2001:db8:1:3::/64");
        assert_eq!(key("unix:"), "unix:");
    }

    #[test]
    fn the_budget_numbers_agree() {
        assert_eq!(MAX_WRONG_PER_HOUR, 80);
        let args = attempt_args(false);
        assert_eq!(args, ["0", "5", "120000", "20", "60000"]);
        assert_eq!(attempt_args(true)[0], "1");
    }

    #[test]
    fn the_page_posts_the_field_back() {
        let page = String::from_utf8(password_page(true)).unwrap();
        assert!(page.contains("method=\"post\"") && page.contains("name=\"password\""));
        assert!(page.contains("not right"));
        assert!(!String::from_utf8(password_page(false))
            .unwrap()
            .contains("not right"));
    }
}

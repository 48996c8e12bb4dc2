//! How a sticky split recognises a visitor, so one person keeps seeing one variant.
//!
//! | `sticky` (rules JSON) | byte | the variant follows |
//! |---|---|---|
//! | `false` | 0 | nothing: drawn per click |
//! | `true` | 1 | the link's recipient if it has a `ref`, else the visitor cookie, else address + `User-Agent` |
//! | `"visitor"` | 2 | address + `User-Agent` ([`super::visitor`]) |
//! | `"cookie"` | 3 | the visitor cookie, else address + `User-Agent` |
//! | `"ref"` | 4 | the link's recipient if it has a `ref`, else address + `User-Agent` |
//!
//! The recipient's number is the record's ([`crate::record::Extras::recipient`]): a stable hash
//! of the link's code and `ref` ([`recipient`]), so a per-recipient link shows its person one
//! variant from any network or browser. The visitor cookie (`sl_v`, [`COOKIE`]) is first-party,
//! on the short domain: a click by cookie that brings none is answered by address +
//! `User-Agent` and given a cookie holding that very number ([`cookie_to_set`]), so the next
//! click finds the same variant from another network, and a client that refuses cookies keeps
//! today's stickiness. Readers before these modes refuse bytes 2 to 4 ("not mine": the fallback
//! answers), and byte 1 keeps its variant for every click without a ref or a cookie.

use super::choose::absorb;
use super::{codec, RuleSet};

/// The visitor cookie's name.
pub const COOKIE: &str = "sl_v";
/// A year, in seconds: how long a browser keeps the cookie.
pub const COOKIE_MAX_AGE: u32 = 31_536_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Sticky {
    /// Per click.
    #[default]
    No,
    /// `true`: recipient, else cookie, else address + agent.
    Default,
    Visitor,
    Cookie,
    Ref,
}

impl Sticky {
    pub fn byte(self) -> u8 {
        match self {
            Sticky::No => 0,
            Sticky::Default => 1,
            Sticky::Visitor => 2,
            Sticky::Cookie => 3,
            Sticky::Ref => 4,
        }
    }

    pub fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Sticky::No,
            1 => Sticky::Default,
            2 => Sticky::Visitor,
            3 => Sticky::Cookie,
            4 => Sticky::Ref,
            _ => return None,
        })
    }

    /// The number that picks this click's variant; `None`: drawn per click.
    pub(super) fn visitor(self, click: &super::Click<'_>) -> Option<u64> {
        let cookie = || visitor_cookie(click.cookies);
        Some(match self {
            Sticky::No => return None,
            Sticky::Visitor => click.visitor,
            Sticky::Ref => click.recipient.unwrap_or(click.visitor),
            Sticky::Cookie => cookie().unwrap_or(click.visitor),
            Sticky::Default => click.recipient.or_else(cookie).unwrap_or(click.visitor),
        })
    }

    /// Whether this mode reads the visitor cookie for a link with (or without) a recipient.
    fn by_cookie(self, has_recipient: bool) -> bool {
        match self {
            Sticky::Cookie => true,
            Sticky::Default => !has_recipient,
            _ => false,
        }
    }
}

/// The rules JSON's `true` and `false`.
impl From<bool> for Sticky {
    fn from(sticky: bool) -> Self {
        if sticky {
            Sticky::Default
        } else {
            Sticky::No
        }
    }
}

/// The recipient number of a link with a `ref`: stable across builds and machines (the sidecar
/// writes it into the record; see [`super::visitor`] for the hash).
pub fn recipient(code: &[u8], reference: &[u8]) -> u64 {
    // Another start than the visitor's: the two numbers never meet by construction.
    absorb(absorb(0x6c62_272e_07bb_0142, code), reference)
}

/// The number in a `Cookie` header's `sl_v=<16 hex digits>`, if there is one.
pub fn visitor_cookie(cookies: &[u8]) -> Option<u64> {
    cookies.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii_start();
        let value = pair.strip_prefix(COOKIE.as_bytes())?.strip_prefix(b"=")?;
        let digits: &[u8; 16] = value.trim_ascii_end().try_into().ok()?;
        digits.iter().try_fold(0u64, |n, &d| {
            let digit = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                _ => return None,
            };
            Some(n << 4 | u64::from(digit))
        })
    })
}

const ATTRIBUTES: &[u8] = b"; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax";
const SECURE: &[u8] = b"; Secure";
const SET_COOKIE_MAX: usize = COOKIE.len() + 1 + 16 + ATTRIBUTES.len() + SECURE.len();

/// A `Set-Cookie` value, on the stack: the module writes one per first click of a split that
/// follows the cookie, without a heap allocation.
#[derive(Clone, Copy)]
pub struct SetCookie {
    bytes: [u8; SET_COOKIE_MAX],
    len: usize,
}

impl SetCookie {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The `Set-Cookie` value keeping `visitor` on the short domain (`Secure` over https):
/// `sl_v=<16 hex digits>; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax[; Secure]`.
pub fn set_cookie(visitor: u64, secure: bool) -> SetCookie {
    let mut out = SetCookie {
        bytes: [0; SET_COOKIE_MAX],
        len: 0,
    };
    let mut push = |piece: &[u8]| {
        out.bytes[out.len..out.len + piece.len()].copy_from_slice(piece);
        out.len += piece.len();
    };
    push(COOKIE.as_bytes());
    push(b"=");
    let mut hex = [0u8; 16];
    for (i, digit) in hex.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(visitor >> (60 - 4 * i) & 15) as usize];
    }
    push(&hex);
    push(ATTRIBUTES);
    if secure {
        push(SECURE);
    }
    out
}

/// The visitor a click answered by rule `rule` (a split) must be given in the cookie: `Some`
/// when that split reads the cookie and the click brought none, and then the number it was
/// answered by (`visitor`: address + `User-Agent`).
pub fn cookie_to_set(
    rules: &RuleSet,
    rule: u8,
    has_recipient: bool,
    cookies: &[u8],
    visitor: impl FnOnce() -> u64,
) -> Option<u64> {
    let (action_at, end) = rules.spans().nth(usize::from(rule))?;
    let action = codec::Reader::new(rules.as_bytes().get(action_at..end)?)
        .action()
        .ok()?;
    let codec::RawAction::Split { sticky, .. } = action else {
        return None;
    };
    (sticky.by_cookie(has_recipient) && visitor_cookie(cookies).is_none()).then(visitor)
}

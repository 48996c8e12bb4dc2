//! What a version-2 record carries beyond version 1's fields: the lifecycle of a link
//! (`valid_since`, the URLs that answer before and after it lives) and its click-time rules.
//!
//! After the text line of version 1 and one `\n` (a target never holds one), a sequence of
//! fields, each `tag:u8 len:u16 value` (big-endian length), each tag at most once:
//!
//! | tag | value |
//! |---|---|
//! | `s` | `valid_since`: Unix seconds, `u64` big-endian |
//! | `n` | the "not yet" URL: where a click before `valid_since` goes (302) |
//! | `e` | the expired URL: where a click after `expires_at` goes (302) instead of a 410 |
//! | `r` | the rules, in [`crate::rules::codec`]'s form |
//! | `m` | `max_visits`: `u64` big-endian; clicks past it answer like an expired link |
//! | `p` | the password: 16 bytes of salt, then the SHA-256 digest ([`super::password`]) |
//! | `c` | (empty) the link has a preview card in `sl:p:<code>` ([`crate::preview`]) |
//! | `w` | the link's workspace ([`WorkspaceName`]), never `default`: a record without it is of `default` |
//! | `i` | the click id parameter ([`ClickIdParam`]): the module appends `<param>=<click id>` to the `Location` |
//! | `f` | the link's recipient number (`u64` big-endian, [`crate::rules::recipient`]): a link with a `ref` and rules; sticky splits keep its person on one variant |
//!
//! A tag this reader does not know makes the whole record "not mine" (a newer writer added a
//! feature this reader cannot honour), never a partial answer.

use super::password::Password;
use super::{is_valid_target, RecordError, WorkspaceName};
use crate::click_id::ClickIdParam;
use crate::rules::RuleSet;

const VALID_SINCE: u8 = b's';
const NOT_YET_URL: u8 = b'n';
const EXPIRED_URL: u8 = b'e';
const RULES: u8 = b'r';
const MAX_VISITS: u8 = b'm';
const PASSWORD: u8 = b'p';
const CARD: u8 = b'c';
const WORKSPACE: u8 = b'w';
const CLICK_ID_PARAM: u8 = b'i';
const RECIPIENT: u8 = b'f';

/// A link's lifecycle and rules: absent (or empty) for a plain link, which keeps version 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras {
    /// Unix seconds before which the link does not redirect yet; 0 = from its creation.
    pub valid_since: u64,
    /// Where a click before `valid_since` goes; none: a "not yet" page.
    pub not_yet_url: Option<Box<[u8]>>,
    /// Where a click after `expires_at` goes; none: 410.
    pub expired_url: Option<Box<[u8]>>,
    /// Tried in order; the first that holds answers, else the link's own target.
    pub rules: RuleSet,
    /// Redirects answered at most; 0 = no cap. Counted in Redis ([`crate::keys::visit_count_key`]),
    /// one `INCR` per click that would redirect; the click that makes the count pass the cap, and
    /// every one after, answers like an expired link.
    pub max_visits: u64,
    /// Clicks must give this password first ([`super::password`]).
    pub password: Option<Password>,
    /// Preview fetchers get the card in `sl:p:<code>` ([`crate::preview`]) instead of the
    /// redirect; everyone else is unaffected.
    pub has_card: bool,
    /// The workspace the link belongs to; `None` (or `default`, which is never written) for
    /// `default`. The module answers the link only on hosts nginx maps to this workspace.
    pub workspace: Option<WorkspaceName>,
    /// The query parameter the click's id goes in ([`crate::click_id`]); none: no id.
    pub click_id_param: Option<ClickIdParam>,
    /// The recipient number of a link with a `ref` ([`crate::rules::recipient`]): a sticky split
    /// keeps to one variant for it whoever clicks ([`crate::rules::Sticky`]). Written only for a
    /// link with rules.
    pub recipient: Option<u64>,
}

impl Extras {
    /// True when nothing here changes an answer or names a workspace: the record is then
    /// written as version 1.
    pub fn is_empty(&self) -> bool {
        self.only_workspace() && self.foreign_workspace().is_none()
    }

    /// Nothing but (maybe) a workspace: all a revoked link's record may carry.
    pub(super) fn only_workspace(&self) -> bool {
        self.valid_since == 0
            && self.not_yet_url.is_none()
            && self.expired_url.is_none()
            && self.rules.is_empty()
            && self.max_visits == 0
            && self.password.is_none()
            && !self.has_card
            && self.click_id_param.is_none()
            && self.recipient.is_none()
    }

    /// The workspace as written: `None` for `default`.
    pub(super) fn foreign_workspace(&self) -> Option<&WorkspaceName> {
        self.workspace.as_ref().filter(|name| !name.is_default())
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        if self.valid_since != 0 {
            field(out, VALID_SINCE, &self.valid_since.to_be_bytes());
        }
        if let Some(url) = &self.not_yet_url {
            field(out, NOT_YET_URL, url);
        }
        if let Some(url) = &self.expired_url {
            field(out, EXPIRED_URL, url);
        }
        if self.max_visits != 0 {
            field(out, MAX_VISITS, &self.max_visits.to_be_bytes());
        }
        if let Some(password) = &self.password {
            field(out, PASSWORD, &password.to_bytes());
        }
        if self.has_card {
            field(out, CARD, &[]);
        }
        if let Some(workspace) = self.foreign_workspace() {
            field(out, WORKSPACE, workspace.as_bytes());
        }
        if let Some(param) = &self.click_id_param {
            field(out, CLICK_ID_PARAM, param.as_bytes());
        }
        if let Some(recipient) = self.recipient {
            field(out, RECIPIENT, &recipient.to_be_bytes());
        }
        if !self.rules.is_empty() {
            field(out, RULES, self.rules.as_bytes());
        }
    }

    pub(super) fn decode(mut bytes: &[u8]) -> Result<Extras, RecordError> {
        let mut extras = Extras::default();
        let mut seen = 0u32;
        while let Some((&tag, rest)) = bytes.split_first() {
            let [hi, lo, rest @ ..] = rest else {
                return Err(RecordError::Extras);
            };
            let len = usize::from(u16::from_be_bytes([*hi, *lo]));
            if rest.len() < len {
                return Err(RecordError::Extras);
            }
            let (value, rest) = rest.split_at(len);
            bytes = rest;
            let bit = match tag {
                VALID_SINCE => 1,
                NOT_YET_URL => 2,
                EXPIRED_URL => 4,
                RULES => 8,
                MAX_VISITS => 16,
                PASSWORD => 32,
                CARD => 64,
                WORKSPACE => 128,
                CLICK_ID_PARAM => 256,
                RECIPIENT => 512,
                _ => return Err(RecordError::Version),
            };
            if seen & bit != 0 {
                return Err(RecordError::Extras);
            }
            seen |= bit;
            match tag {
                VALID_SINCE => extras.valid_since = u64_field(value)?,
                MAX_VISITS => extras.max_visits = u64_field(value)?,
                CARD if value.is_empty() => extras.has_card = true,
                CARD => return Err(RecordError::Extras),
                RECIPIENT => extras.recipient = Some(u64_field(value)?),
                CLICK_ID_PARAM => {
                    extras.click_id_param =
                        Some(ClickIdParam::parse(value).ok_or(RecordError::Extras)?)
                }
                PASSWORD => {
                    extras.password = Some(Password::from_bytes(value).ok_or(RecordError::Extras)?)
                }
                NOT_YET_URL => extras.not_yet_url = Some(url(value)?),
                EXPIRED_URL => extras.expired_url = Some(url(value)?),
                WORKSPACE => {
                    let name = WorkspaceName::parse(value).ok_or(RecordError::Workspace)?;
                    extras.workspace = Some(name).filter(|name| !name.is_default());
                }
                _ => extras.rules = RuleSet::new(value).map_err(RecordError::Rules)?,
            }
        }
        Ok(extras)
    }
}

fn field(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    // The API keeps every value far below 64 KiB (crate::record::MAX_RECORD_BYTES).
    out.extend((value.len() as u16).to_be_bytes());
    out.extend_from_slice(value);
}

fn u64_field(value: &[u8]) -> Result<u64, RecordError> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| RecordError::Extras)?;
    Ok(u64::from_be_bytes(bytes))
}

fn url(value: &[u8]) -> Result<Box<[u8]>, RecordError> {
    if is_valid_target(value) {
        Ok(value.into())
    } else {
        Err(RecordError::Target)
    }
}

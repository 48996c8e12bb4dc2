//! What makes a link request acceptable, whoever sends it: the REST API, the console's forms and
//! uploads, `import`. The HTTP layer turns an [`Invalid`] into its 422 answer; the others report
//! it their own way.

use super::{IdempotencyKey, LinkService, NewLink};
use crate::validate::{UrlError, UrlPolicy};
use chrono::{DateTime, SubsecRound, Utc};
use std::borrow::Cow;

/// Redirect status of a link created without one.
pub const DEFAULT_REDIRECT: u16 = 302;
/// Longest campaign and recipient reference, in bytes.
pub const MAX_META_LEN: usize = 200;
/// Most tags on a link, and longest tag in bytes.
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_LEN: usize = 64;
/// Longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// Why a request cannot become a link: a stable error code and a message for the caller.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("{message}")]
    Field {
        code: &'static str,
        message: Cow<'static, str>,
    },
    #[error("invalid url: {0}")]
    Url(#[from] UrlError),
}

impl Invalid {
    pub fn new(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Invalid::Field {
            code,
            message: message.into(),
        }
    }
}

/// A request for one link, as its sender parsed it (every field as given, none checked).
#[derive(Debug, Default)]
pub struct LinkRequest {
    pub url: String,
    pub code: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub redirect: Option<u16>,
    pub forward_query: Option<bool>,
    pub idempotent: Option<bool>,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    pub tags: Option<Vec<String>>,
}

fn printable(value: &str, max: usize) -> bool {
    !value.is_empty() && value.len() <= max && !value.chars().any(char::is_control)
}

/// A campaign or recipient reference (`what`), refused with `code`.
pub fn meta(
    value: Option<String>,
    code: &'static str,
    what: &str,
) -> Result<Option<String>, Invalid> {
    match value {
        Some(text) if !printable(&text, MAX_META_LEN) => Err(Invalid::new(
            code,
            format!("{what} must be 1 to {MAX_META_LEN} bytes without control characters"),
        )),
        other => Ok(other),
    }
}

pub fn tags(value: Option<Vec<String>>) -> Result<Vec<String>, Invalid> {
    let tags = value.unwrap_or_default();
    if tags.len() > MAX_TAGS || !tags.iter().all(|tag| printable(tag, MAX_TAG_LEN)) {
        return Err(Invalid::new(
            "invalid_tags",
            format!(
                "tags must be at most {MAX_TAGS} strings of 1 to {MAX_TAG_LEN} bytes without \
                 control characters"
            ),
        ));
    }
    Ok(tags)
}

/// An idempotency key (1 to 255 visible ASCII characters), scoped to its API key; `None` if
/// `key` is not one.
pub fn idempotency_key(key: &str, api_key_id: i64) -> Option<IdempotencyKey> {
    ((1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&key.len())
        && key.bytes().all(|b| b.is_ascii_graphic()))
    .then(|| IdempotencyKey {
        api_key_id,
        key: key.to_owned(),
    })
}

pub fn redirect_status(value: Option<u16>) -> Result<u16, Invalid> {
    match value.unwrap_or(DEFAULT_REDIRECT) {
        status @ (301 | 302 | 307 | 308) => Ok(status),
        other => Err(Invalid::new(
            "invalid_redirect",
            format!("redirect must be 301, 302, 307 or 308, not {other}"),
        )),
    }
}

/// An expiry: in the future, whole seconds.
pub fn expiry(value: DateTime<Utc>) -> Result<DateTime<Utc>, Invalid> {
    // The Redis record carries whole seconds; keep SQL identical to it.
    let value = value.trunc_subsecs(0);
    if value <= Utc::now() {
        return Err(Invalid::new(
            "invalid_expiry",
            "expires_at must be in the future",
        ));
    }
    Ok(value)
}

/// Checks a create request (single or batch item) and turns it into a [`NewLink`]. A target on
/// one of `own_domains` would loop.
pub fn new_link(
    links: &LinkService,
    policy: &UrlPolicy,
    own_domains: &[String],
    request: LinkRequest,
) -> Result<NewLink, Invalid> {
    let target = policy.check(&request.url, own_domains)?;
    if let Some(code) = &request.code {
        shortcode::parse_alias(links.scheme(), code)
            .map_err(|e| Invalid::new("invalid_code", e.to_string()))?;
        if code == "batch" {
            // `/links/batch` is the batch route.
            return Err(Invalid::new(
                "invalid_code",
                "the alias \"batch\" is reserved",
            ));
        }
    }
    Ok(NewLink {
        target,
        code: request.code,
        expires_at: request.expires_at.map(expiry).transpose()?,
        redirect: redirect_status(request.redirect)?,
        forward_query: request.forward_query.unwrap_or(false),
        idempotent: request.idempotent.unwrap_or(false),
        campaign: meta(request.campaign, "invalid_campaign", "campaign")?,
        recipient_ref: meta(request.recipient_ref, "invalid_ref", "ref")?,
        tags: tags(request.tags)?,
        restore: None,
    })
}

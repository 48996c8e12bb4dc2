//! What makes a link request acceptable, whoever sends it: the REST API, the console's forms and
//! uploads, `import`. The HTTP layer turns an [`Invalid`] into its 422 answer; the others report
//! it their own way.

pub use super::requests::CreateLinkRequest;
use super::{IdempotencyKey, LinkService, NewLink, Restore};
use crate::projection;
use chrono::{DateTime, SubsecRound, Utc};
use shortcode::CodeScheme;
use shortlink_model::link::{card, rules};
pub use shortlink_model::link::{redirect_status, Invalid, DEFAULT_REDIRECT};
use shortlink_model::validate::{UrlError, UrlPolicy};
use shortlink_model::{Link, LinkExtras, WorkspaceId};
use shortlink_wire::record::password::{Password, MAX_PASSWORD_BYTES, SALT_LEN};
use shortlink_wire::record::MAX_RECORD_BYTES;

pub use shortlink_model::schema::{MAX_META_LEN, MAX_TAGS, MAX_TAG_LEN};
/// Longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
/// The highest `max_visits`: the largest integer every JSON reader reads exactly.
pub const MAX_VISITS_LIMIT: i64 = shortlink_model::schema::MAX_JSON_INTEGER;

/// A password as the caller sent it. Never logged (its `Debug` says nothing) and never stored:
/// [`password`] turns it into the salted digest SQL keeps.
#[derive(Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct PlainPassword(pub String);

impl std::fmt::Debug for PlainPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlainPassword(..)")
    }
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

/// Checks a create request (single or batch item) of `workspace` and turns it into a
/// [`NewLink`]. A target on one of `own_domains` would loop.
pub fn new_link(
    links: &LinkService,
    workspace: WorkspaceId,
    policy: &UrlPolicy,
    own_domains: &[String],
    request: CreateLinkRequest,
) -> Result<NewLink, Invalid> {
    imported_link(
        links,
        workspace,
        policy,
        own_domains,
        request,
        Kept::default(),
    )
}

/// What an import keeps of a link that a create decides itself.
#[derive(Debug, Default)]
pub struct Kept {
    pub origin: Origin,
    /// The link's times as they were. Its expiry may then be past: it is kept, not refused.
    pub restore: Option<Restore>,
    /// The password's salted digest as `export` wrote it, instead of a password
    /// ([`password_digest`]).
    pub password_digest: Option<String>,
}

/// The replacement of stored link `link` under a new code (a drained domain's reissue): all it
/// has but its code and `ref`, checked as a create's request is ([`imported_link`]), since the
/// URL policy or a limit may have tightened since it was made and a replacement is a new link.
/// Its password stays the stored digest (nobody knows the password to give again).
pub fn replacement_link(
    links: &LinkService,
    policy: &UrlPolicy,
    own_domains: &[String],
    link: &Link,
    recipient_ref: String,
) -> Result<NewLink, Invalid> {
    let stored = |field: &'static str, text: Option<&str>| {
        text.map(serde_json::from_str::<serde_json::Value>)
            .transpose()
            .map_err(|_| {
                Invalid::new(
                    "invalid_stored_link",
                    format!("the stored {field} are not JSON"),
                )
            })
    };
    let preview = stored("card", link.extras.preview.as_deref())?
        .map(serde_json::from_value)
        .transpose()
        .map_err(|_| Invalid::new("invalid_stored_link", "the stored card is not a card"))?;
    let request = CreateLinkRequest {
        url: link.target.clone(),
        expires_at: link.expires_at,
        redirect: Some(link.redirect),
        forward_query: Some(link.flags.forward_query()),
        campaign: link.campaign.clone(),
        recipient_ref: Some(recipient_ref),
        tags: Some(link.tags.clone()),
        valid_since: link.extras.valid_since,
        not_yet_url: link.extras.not_yet_url.clone(),
        expired_url: link.extras.expired_url.clone(),
        rules: stored("rules", link.extras.rules.as_deref())?,
        max_visits: link
            .extras
            .max_visits
            .map(shortlink_model::schema::WholeNumber),
        preview,
        click_id_param: link.extras.click_id_param.clone(),
        ..CreateLinkRequest::default()
    };
    let kept = Kept {
        password_digest: link.extras.password_digest.clone(),
        ..Kept::default()
    };
    imported_link(links, link.workspace, policy, own_domains, request, kept)
}

/// Where a link's code comes from, which says what a code may be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// A create: a custom alias (not `batch`), or none for a generated one.
    #[default]
    Request,
    /// A row of our own export (`import FILE`): an alias or a code of the generated shape; and
    /// another shortener's code when the row restores an exported link (`exported`).
    Export { exported: bool },
    /// Another shortener's link (`import --from`): its code kept exactly.
    Foreign,
}

/// Checks a link `import` writes as a create's request is checked ([`new_link`]), with what the
/// import keeps of it (`kept`).
pub fn imported_link(
    links: &LinkService,
    workspace: WorkspaceId,
    policy: &UrlPolicy,
    own_domains: &[String],
    request: CreateLinkRequest,
    kept: Kept,
) -> Result<NewLink, Invalid> {
    let target = policy.check(&request.url, own_domains)?;
    let foreign = match &request.code {
        Some(code) => code_origin(links.scheme(), code, kept.origin)?,
        None => false,
    };
    let extras = LinkExtras {
        valid_since: request.valid_since.map(valid_since).transpose()?,
        not_yet_url: lifecycle_url(policy, own_domains, request.not_yet_url, "not_yet_url")?,
        expired_url: lifecycle_url(policy, own_domains, request.expired_url, "expired_url")?,
        rules: rules_column(policy, own_domains, request.rules)?,
        max_visits: request.max_visits.map(|n| max_visits(n.0)).transpose()?,
        password_digest: match (request.password, kept.password_digest) {
            (Some(plain), _) => Some(password(plain)?),
            (None, digest) => digest.map(password_digest).transpose()?,
        },
        preview: card::column(policy, own_domains, request.preview)?,
        click_id_param: request.click_id_param.map(click_id_param).transpose()?,
    };
    let expires_at = match kept.restore {
        None => request.expires_at.map(expiry).transpose()?,
        // The record carries whole seconds.
        Some(_) => request.expires_at.map(|at| at.trunc_subsecs(0)),
    };
    let redirect = redirect_status(request.redirect)?;
    let forward_query = request.forward_query.unwrap_or(false);
    if !extras.is_empty() {
        whole(
            target.as_str(),
            redirect,
            forward_query,
            expires_at,
            &extras,
        )?;
    }
    Ok(NewLink {
        workspace,
        target,
        code: request.code,
        expires_at,
        redirect,
        forward_query,
        idempotent: request.idempotent.unwrap_or(false),
        campaign: meta(request.campaign, "invalid_campaign", "campaign")?,
        recipient_ref: meta(request.recipient_ref, "invalid_ref", "ref")?,
        tags: tags(request.tags)?,
        extras,
        restore: kept.restore,
        foreign,
        held: None,
    })
}

/// Checks a code given with a link, as its `origin` allows; whether it is another shortener's
/// (see [`NewLink::foreign`]).
pub fn code_origin(scheme: &CodeScheme, code: &str, origin: Origin) -> Result<bool, Invalid> {
    let invalid = |error: &dyn std::fmt::Display| Invalid::new("invalid_code", error.to_string());
    match origin {
        Origin::Request => {
            shortcode::parse_alias(scheme, code).map_err(|e| invalid(&e))?;
            if code == "batch" {
                // `/links/batch` is the batch route.
                return Err(Invalid::new(
                    "invalid_code",
                    "the alias \"batch\" is reserved",
                ));
            }
            Ok(false)
        }
        // A generated shape comes from an export; any other is an alias, or a foreign code the
        // exported link had.
        Origin::Export { .. } if scheme.decode(code).is_some() => Ok(false),
        Origin::Export { exported } => match shortcode::parse_alias(scheme, code) {
            Ok(_) => Ok(false),
            Err(_) if exported && shortcode::parse_imported(code).is_ok() => Ok(true),
            Err(alias) => Err(invalid(&alias)),
        },
        Origin::Foreign => {
            shortcode::parse_imported(code).map_err(|e| invalid(&e))?;
            Ok(true)
        }
    }
}

/// `valid_since`: whole seconds (the record's), any time after 1970 (a past one is allowed: a
/// link may be written as "open since").
pub fn valid_since(value: DateTime<Utc>) -> Result<DateTime<Utc>, Invalid> {
    let value = value.trunc_subsecs(0);
    if value.timestamp() < 0 {
        return Err(Invalid::new(
            "invalid_valid_since",
            "valid_since must be after 1970",
        ));
    }
    Ok(value)
}

/// `click_id_param`: a query parameter name the module may append as it is
/// (`shortlink_wire::click_id::ClickIdParam`).
pub fn click_id_param(name: String) -> Result<String, Invalid> {
    match shortlink_wire::click_id::ClickIdParam::parse(name.as_bytes()) {
        Some(_) => Ok(name),
        None => Err(Invalid::new(
            "invalid_click_id_param",
            format!(
                "click_id_param must be 1 to {} characters of A-Z a-z 0-9 _ . -",
                shortlink_wire::click_id::PARAM_MAX_LEN
            ),
        )),
    }
}

/// `max_visits`: 1 to [`MAX_VISITS_LIMIT`].
pub fn max_visits(value: i64) -> Result<i64, Invalid> {
    if !(1..=MAX_VISITS_LIMIT).contains(&value) {
        return Err(Invalid::new(
            "invalid_max_visits",
            format!("max_visits must be 1 to {MAX_VISITS_LIMIT}, not {value}"),
        ));
    }
    Ok(value)
}

/// Shortest password taken, in characters: the module's guess budget (docs/SECURITY.md, "Password
/// links") only makes guessing slow; a short password would still fall to it.
pub const MIN_PASSWORD_CHARS: usize = shortlink_wire::limits::PASSWORD_MIN_CHARS;

/// `password`: at least [`MIN_PASSWORD_CHARS`] characters and at most `MAX_PASSWORD_BYTES` bytes,
/// turned into what SQL keeps (the salted digest as hex, a fresh salt per link). The error never
/// repeats the value.
pub fn password(value: PlainPassword) -> Result<String, Invalid> {
    let plain = value.0.as_bytes();
    if value.0.chars().count() < MIN_PASSWORD_CHARS || plain.len() > MAX_PASSWORD_BYTES {
        return Err(Invalid::new(
            "invalid_password",
            format!(
                "password must be at least {MIN_PASSWORD_CHARS} characters and at most \
                 {MAX_PASSWORD_BYTES} bytes (UTF-8)"
            ),
        ));
    }
    let mut salt = [0; SALT_LEN];
    getrandom::fill(&mut salt).map_err(Invalid::NoRandomness)?;
    Ok(Password::new(plain, salt).to_hex())
}

/// A stored digest carried by `export` and `import`: what [`password`] made, read back.
pub fn password_digest(hex: String) -> Result<String, Invalid> {
    match Password::from_hex(&hex) {
        Some(digest) => Ok(digest.to_hex()),
        None => Err(Invalid::new(
            "invalid_password_digest",
            "password_digest must be the hex salt and digest an export wrote",
        )),
    }
}

/// `not_yet_url` or `expired_url` (`field`), checked and normalised exactly like a target.
pub fn lifecycle_url(
    policy: &UrlPolicy,
    own_domains: &[String],
    value: Option<String>,
    field: &str,
) -> Result<Option<String>, Invalid> {
    value
        .map(|raw| {
            policy
                .check(&raw, own_domains)
                .map(|url| url.into_string())
                .map_err(|error| Invalid::new(error.code(), format!("{field}: {error}")))
        })
        .transpose()
}

/// The `rules` column of a request's rules: their normalised JSON, `None` for none (absent,
/// `null` or `[]`).
pub fn rules_column(
    policy: &UrlPolicy,
    own_domains: &[String],
    value: Option<serde_json::Value>,
) -> Result<Option<String>, Invalid> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    let check_url = |raw: &str| -> Result<String, UrlError> {
        Ok(policy.check(raw, own_domains)?.into_string())
    };
    let checked = rules::check(value, &check_url)?;
    if checked.specs.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        serde_json::to_string(&checked.specs).expect("rules serialise"),
    ))
}

/// What only the whole link can say: it opens before it expires, and its record fits.
pub fn whole(
    target: &str,
    redirect: u16,
    forward_query: bool,
    expires_at: Option<DateTime<Utc>>,
    extras: &LinkExtras,
) -> Result<(), Invalid> {
    if let (Some(since), Some(until)) = (extras.valid_since, expires_at) {
        if since >= until {
            return Err(Invalid::new(
                "invalid_valid_since",
                "valid_since must be before expires_at",
            ));
        }
    }
    let flags = shortlink_model::LinkFlags::with_forward_query(forward_query).0;
    let record = projection::encode_live(
        target,
        redirect,
        flags,
        expires_at,
        &projection::wire_extras("", extras),
    );
    if record.len() > MAX_RECORD_BYTES {
        return Err(Invalid::new(
            "record_too_large",
            format!(
                "the link's rules and URLs make a record of {} bytes, over the limit of \
                 {MAX_RECORD_BYTES}: use fewer or shorter rules or URLs",
                record.len()
            ),
        ));
    }
    Ok(())
}

/// [`whole`] for a stored link after a change.
pub fn whole_link(link: &Link) -> Result<(), Invalid> {
    if link.extras.is_empty() {
        return Ok(());
    }
    whole(
        &link.target,
        link.redirect,
        link.flags.forward_query(),
        link.expires_at,
        &link.extras,
    )
}

//! Why a link's part cannot be stored: the error every check of a link returns, from the API's
//! fields to a stored card or rule set read back.

use crate::validate::UrlError;
use shortlink_wire::status::{is_redirect_status, REDIRECT_STATUSES};
use std::borrow::Cow;

/// Redirect status of a link created without one.
pub const DEFAULT_REDIRECT: u16 = 302;

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
    /// Not the request's fault: the operating system gave no randomness (a password's salt). The
    /// API answers 500 without the cause.
    #[error("no randomness from the operating system")]
    NoRandomness(#[source] getrandom::Error),
}

impl Invalid {
    pub fn new(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Invalid::Field {
            code,
            message: message.into(),
        }
    }
}

pub fn redirect_status(value: Option<u16>) -> Result<u16, Invalid> {
    match value.unwrap_or(DEFAULT_REDIRECT) {
        status if is_redirect_status(u64::from(status)) => Ok(status),
        other => Err(Invalid::new(
            "invalid_redirect",
            format!("redirect must be one of {REDIRECT_STATUSES:?}, not {other}"),
        )),
    }
}

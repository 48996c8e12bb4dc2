//! A workspace's gateway made ready to send: its password read from the workspace's own
//! directory of `--gateway-secrets-dir` (`<dir>/<workspace slug>/<file>`: a slug never changes,
//! and no name a workspace gives reaches another workspace's file), its URLs within the
//! operator's gateway policy (`--gateway-allow-networks`, never the deployment's own listeners:
//! core's `outbound::reach`), checked on every address its name resolves to and again at each
//! connection.

use super::kannel::Sendsms;
use crate::{Error, Messaging, Result};
use shortlink_core::outbound::Policy;
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{new_token_id, CallbackToken, Gateway};
use std::time::Duration;

/// The longest wait for a connection to the gateway (a connection not made sends nothing: it is
/// tried again).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// What a callback token's value starts with (then 64 hex digits).
pub const TOKEN_PREFIX: &str = "slc_";

/// A job's gateway, ready to send.
pub struct Ready {
    /// Its `dlr_base` is the callback base alone: the job adds its token.
    pub sendsms: Sendsms,
    /// A client for the callback base's probe (`super::callback`).
    pub probe: reqwest::ClientBuilder,
    pub per_second: u32,
    pub reports_hours: u32,
}

impl Messaging {
    /// The workspace's gateway with its password read and a client built: `no_gateway` without
    /// one, `invalid_password_file` when its file cannot be read.
    pub async fn ready(&self, workspace: WorkspaceId) -> Result<Ready> {
        let config = (self.store.gateways().gateway(workspace).await?).ok_or_else(|| {
            Error::invalid(
                "no_gateway",
                "the workspace has no gateway (PUT /api/v1/gateway)",
            )
        })?;
        let password = self.password(workspace, &config.password_file).await?;
        let url = self.http_url(&config.url, "invalid_url", true)?;
        let base = self.http_url(&config.callback_base, "invalid_callback_base", false)?;
        let timeout = Duration::from_millis(config.timeout_ms);
        let client = (self.policy.client_for(&url, None, "--gateway-ca"))
            .and_then(|builder| {
                let builder = builder
                    .timeout(timeout)
                    .connect_timeout(CONNECT_TIMEOUT.min(timeout));
                builder.build().map_err(|e| e.to_string())
            })
            .map_err(|error| Error::Internal(error.into()))?;
        let probe = (self
            .gateway_policy(false)
            .client_for(&base, None, "--gateway-ca"))
        .map_err(|error| Error::Internal(error.into()))?;
        Ok(Ready {
            sendsms: Sendsms {
                client,
                url,
                username: config.username,
                password,
                sender: config.sender,
                dlr_base: config.callback_base,
                attempts: config.attempts,
                backoff: Duration::from_millis(config.backoff_ms),
            },
            probe,
            per_second: config.per_second,
            reports_hours: config.reports_hours,
        })
    }

    /// The password in `file` of the workspace's own secrets directory (`invalid_password_file`
    /// when it cannot be read: the one answer, whatever the reason; the path and the reason are
    /// the operator's, logged).
    pub async fn password(&self, workspace: WorkspaceId, file: &str) -> Result<String> {
        let unreadable = || {
            Error::invalid(
                "invalid_password_file",
                "no readable password file of this name in the workspace's secrets directory",
            )
        };
        let dir = self.secrets_dir.as_ref().ok_or_else(unreadable)?;
        // The slug, which never changes: the operator's name for the workspace's directory.
        let owner = self.storage.workspace(workspace).await?;
        let slug = owner.ok_or_else(unreadable)?.slug;
        let path = dir.join(&slug).join(file);
        let text = tokio::fs::read_to_string(&path).await.map_err(|error| {
            tracing::warn!(%error, path = %path.display(), "a gateway's password file cannot be read");
            unreadable()
        })?;
        let password = text.trim_end_matches(['\r', '\n']);
        match password.is_empty() {
            true => Err(unreadable()),
            false => Ok(password.to_owned()),
        }
    }

    /// An http(s) URL without query, user or fragment whose address literal the gateway policy
    /// allows (`denied`: the deployment's listeners are refused too: a gateway's URL; a callback
    /// base may be this sidecar itself).
    pub fn http_url(&self, text: &str, code: &'static str, denied: bool) -> Result<url::Url> {
        let invalid = |why: &str| Error::invalid(code, why);
        let url = url::Url::parse(text).map_err(|_| invalid("not a URL"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid("an http:// or https:// URL with a host"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
            return Err(invalid("no query, fragment or credentials in the URL"));
        }
        (self.gateway_policy(denied).check(&url)).map_err(|host| not_allowed(code, &host))?;
        Ok(url)
    }

    /// [`Self::http_url`]'s check on every address the URL's name resolves to now.
    pub async fn reachable(&self, text: &str, code: &'static str, denied: bool) -> Result<()> {
        let url = self.http_url(text, code, denied)?;
        let checked = self.gateway_policy(denied).check_resolved(&url).await;
        checked.map_err(|host| not_allowed(code, &host))
    }

    /// The gateway policy, with or without the deployment's listeners refused.
    fn gateway_policy(&self, denied: bool) -> Policy {
        match denied {
            true => self.policy.clone(),
            false => self.policy.without_denied(),
        }
    }

    /// A Kannel callback token of the workspace for job `job`: (its id, the token). Made per
    /// job so that it can end with the job's reports: revoked `reports_hours` after the job ends
    /// (`super::runner`). The job's row keeps the token in its `dlr-url` base while it sends, for
    /// a sidecar that resumes it, and forgets it when it ends.
    pub async fn job_token(&self, workspace: WorkspaceId, job: &str) -> Result<(String, String)> {
        let token = new_callback_token()?;
        let stored = CallbackToken {
            id: new_token_id()?,
            workspace,
            name: format!("compose send {job}"),
            gateway: Gateway::Kannel,
            token_hash: shortlink_core::signing::secret_hash(&token),
            twilio_auth_token: None,
            created_at: shortlink_store::now(),
            revoked_at: None,
        };
        self.store.callback_tokens().insert_token(&stored).await?;
        Ok((stored.id, token))
    }
}

/// One answer for every address refused: which rule refused it (a listener of the deployment,
/// a network not listed) is the operator's to know.
fn not_allowed(code: &'static str, host: &str) -> Error {
    Error::invalid(
        code,
        format!(
            "{host} is not an address gateways may reach (the operator's --gateway-allow-networks)"
        ),
    )
}

/// A new random callback token: [`TOKEN_PREFIX`] and 256 bits in hex.
pub fn new_callback_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| Error::Internal(Box::new(error)))?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        shortlink_model::validate::hex(&bytes)
    ))
}

/// `<prefix>_` and 64 random bits in hex.
pub fn new_id(prefix: &str) -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| Error::Internal(Box::new(error)))?;
    Ok(format!("{prefix}_{:016x}", u64::from_be_bytes(bytes)))
}

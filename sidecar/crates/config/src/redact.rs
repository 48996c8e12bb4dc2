//! Secrets kept out of logs and error messages.

/// A connection URL with its password replaced, fit for logs.
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("****"));
            url.to_string()
        }
        _ => raw.to_owned(),
    }
}

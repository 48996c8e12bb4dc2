//! Where a feed comes from, and fetching it only when it changed: a URL with a conditional
//! request (`If-None-Match` with the last `ETag`, `If-Modified-Since` with the last
//! `Last-Modified`; URLhaus and most list hosts answer 304), or a file whose modification time
//! stands in for the validator. A body larger than the limit is refused, not truncated.

use crate::error::Error;
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use reqwest::StatusCode;
use std::path::PathBuf;
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Url(String),
    File(PathBuf),
}

impl Source {
    /// `http://` or `https://` is a URL; anything else a path.
    pub fn parse(raw: &str) -> Self {
        if raw.starts_with("http://") || raw.starts_with("https://") {
            Source::Url(raw.to_owned())
        } else {
            Source::File(PathBuf::from(raw))
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Url(url) => f.write_str(url),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// What the last successful fetch was told, to ask the next one "only if changed".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
    modified: Option<SystemTime>,
}

#[derive(Debug)]
pub enum Fetched {
    NotModified,
    Body(Vec<u8>, Validators),
}

pub async fn fetch(
    client: &reqwest::Client,
    source: &Source,
    previous: &Validators,
    max_bytes: u64,
) -> Result<Fetched, Error> {
    match source {
        Source::File(path) => {
            let metadata = tokio::fs::metadata(path).await?;
            let modified = metadata.modified().ok();
            if modified.is_some() && modified == previous.modified {
                return Ok(Fetched::NotModified);
            }
            if metadata.len() > max_bytes {
                return Err(Error::TooLarge { limit: max_bytes });
            }
            let body = tokio::fs::read(path).await?;
            let validators = Validators {
                modified,
                ..Validators::default()
            };
            Ok(Fetched::Body(body, validators))
        }
        Source::Url(url) => fetch_url(client, url, previous, max_bytes).await,
    }
}

async fn fetch_url(
    client: &reqwest::Client,
    url: &str,
    previous: &Validators,
    max_bytes: u64,
) -> Result<Fetched, Error> {
    let mut request = client.get(url);
    if let Some(etag) = &previous.etag {
        request = request.header(IF_NONE_MATCH, etag);
    }
    if let Some(date) = &previous.last_modified {
        request = request.header(IF_MODIFIED_SINCE, date);
    }
    let mut response = request.send().await?;
    if response.status() == StatusCode::NOT_MODIFIED {
        return Ok(Fetched::NotModified);
    }
    if !response.status().is_success() {
        return Err(Error::Status(response.status().as_u16()));
    }
    if response.content_length().is_some_and(|len| len > max_bytes) {
        return Err(Error::TooLarge { limit: max_bytes });
    }
    let header = |name| {
        (response.headers().get(name))
            .and_then(|value: &reqwest::header::HeaderValue| value.to_str().ok())
            .map(str::to_owned)
    };
    let validators = Validators {
        etag: header(ETAG),
        last_modified: header(LAST_MODIFIED),
        modified: None,
    };
    // Read by chunks: a server without Content-Length is held to the limit too.
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(Error::TooLarge { limit: max_bytes });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched::Body(body, validators))
}

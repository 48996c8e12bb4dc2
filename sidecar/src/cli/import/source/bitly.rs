//! Bitly, API v4 (`Authorization: Bearer`): `GET /v4/groups/{guid}/bitlinks?size=` gives
//! `links[]` (id `bit.ly/abc` or `custom.domain/abc`, long_url, title, created_at, tags,
//! archived) and `pagination.next`, the next page's URL (its `search_after`); a link's total is
//! `GET /v4/bitlinks/{id}/clicks/summary?unit=month&units=-1` (`total_clicks`). Bitly does not
//! hand out individual clicks. `pagination.next` is followed only on the API's own origin
//! ([`Fetch`] refuses any other, so the token never leaves it).

use super::args::SourceArgs;
use super::fetch::{base, Fetch};
use super::item::{Item, Source, SourceLink, Unreadable};
use super::time;
use crate::cli::error::BoxError;
use async_trait::async_trait;
use serde_json::Value;

pub const API: &str = "https://api-ssl.bitly.com";

pub struct BitlyApi {
    fetch: Fetch,
    base: String,
    next: Option<String>,
    total: Option<u64>,
}

impl BitlyApi {
    pub fn new(args: &SourceArgs) -> Result<Self, BoxError> {
        let token = args
            .source_key
            .clone()
            .ok_or("--from bitly needs --source-key (a token)")?;
        let group = args
            .bitly_group
            .as_deref()
            .ok_or("--from bitly needs --bitly-group")?;
        let base = base(args.source_url.as_deref().unwrap_or(API));
        Ok(Self {
            fetch: Fetch::new(
                &base,
                Some(("Authorization", format!("Bearer {token}"))),
                &args.outbound,
            )?,
            next: Some(format!(
                "{base}/v4/groups/{group}/bitlinks?size={}",
                args.page_size.min(100)
            )),
            base,
            total: None,
        })
    }
}

#[async_trait]
impl Source for BitlyApi {
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError> {
        let Some(url) = self.next.take() else {
            return Ok(None);
        };
        let answer = self.fetch.json(&url).await?;
        self.total = answer["pagination"]["total"].as_u64();
        self.next = answer["pagination"]["next"]
            .as_str()
            .filter(|next| !next.is_empty())
            .map(str::to_owned);
        let data = answer["links"]
            .as_array()
            .ok_or_else(|| format!("GET {url}: no links"))?;
        if data.is_empty() {
            return Ok(None);
        }
        let mut items = Vec::with_capacity(data.len());
        for item in data {
            let mut read = link(item);
            if let Ok(link) = &mut read {
                let id = format!("{}/{}", link.domain, link.code);
                let url = format!(
                    "{}/v4/bitlinks/{id}/clicks/summary?unit=month&units=-1",
                    self.base
                );
                link.visits = self.fetch.json(&url).await?["total_clicks"]
                    .as_i64()
                    .unwrap_or(0);
            }
            items.push(read);
        }
        Ok(Some(items))
    }

    fn total(&self) -> Option<u64> {
        self.total
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned).filter(|s| !s.is_empty())
}

/// `bit.ly/abc` → (`bit.ly`, `abc`).
pub fn split_id(id: &str) -> Option<(String, String)> {
    let id = id
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let (domain, code) = id.split_once('/')?;
    (!domain.is_empty() && !code.is_empty()).then(|| (domain.to_owned(), code.to_owned()))
}

fn link(item: &Value) -> Item {
    let id = text(&item["id"]).unwrap_or_default();
    let (domain, code) = split_id(&id).ok_or_else(|| Unreadable {
        at: id.clone(),
        message: "id is not domain/code".into(),
    })?;
    Ok(SourceLink {
        code,
        domain,
        target: text(&item["long_url"]).unwrap_or_default(),
        created_at: item["created_at"].as_str().and_then(time::parse),
        title: text(&item["title"]),
        tags: item["tags"]
            .as_array()
            .map(|tags| tags.iter().filter_map(text).collect())
            .unwrap_or_default(),
        // Bitly appends the short link's query parameters to the long URL.
        forward_query: true,
        redirect: 301,
        ..SourceLink::default()
    })
}

//! Kutt v2 and v3, API v2 (`X-API-KEY`): `GET /api/v2/links?limit=&skip=` gives `data[]`
//! (address, target, description, expire_in, created_at, visit_count, domain, password, link)
//! and `total`. Kutt keeps visit totals and daily aggregates, not individual visits.

use super::args::SourceArgs;
use super::fetch::{base, Fetch};
use super::item::{Item, Source, SourceLink, Unreadable};
use super::time;
use crate::cli::error::BoxError;
use async_trait::async_trait;
use serde_json::Value;

pub struct KuttApi {
    fetch: Fetch,
    base: String,
    skip: u64,
    total: Option<u64>,
    limit: u32,
}

impl KuttApi {
    pub fn new(args: &SourceArgs) -> Result<Self, BoxError> {
        let url = args
            .source_url
            .as_deref()
            .ok_or("--from kutt needs --source-url")?;
        let key = args
            .source_key
            .clone()
            .ok_or("--from kutt needs --source-key")?;
        Ok(Self {
            fetch: Fetch::new(url, Some(("X-API-KEY", key)), &args.outbound)?,
            base: base(url),
            skip: 0,
            total: None,
            limit: args.page_size,
        })
    }
}

#[async_trait]
impl Source for KuttApi {
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError> {
        if self.total.is_some_and(|total| self.skip >= total) {
            return Ok(None);
        }
        let url = format!(
            "{}/api/v2/links?limit={}&skip={}",
            self.base, self.limit, self.skip
        );
        let answer = self.fetch.json(&url).await?;
        self.total = answer["total"].as_u64();
        let data = answer["data"]
            .as_array()
            .ok_or_else(|| format!("GET {url}: no data"))?;
        if data.is_empty() {
            return Ok(None);
        }
        self.skip += data.len() as u64;
        Ok(Some(data.iter().map(link).collect()))
    }

    fn total(&self) -> Option<u64> {
        self.total
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned).filter(|s| !s.is_empty())
}

fn link(item: &Value) -> Item {
    let code = text(&item["address"]).ok_or_else(|| Unreadable {
        at: text(&item["id"]).unwrap_or_default(),
        message: "no address".into(),
    })?;
    // The domain: the custom domain's name, else the host of the short URL (`link`).
    let domain = text(&item["domain"])
        .or_else(|| {
            text(&item["link"])
                .and_then(|link| url::Url::parse(&link).ok())
                .and_then(|url| url.host_str().map(str::to_owned))
        })
        .unwrap_or_default();
    Ok(SourceLink {
        domain,
        target: text(&item["target"]).unwrap_or_default(),
        created_at: item["created_at"].as_str().and_then(time::parse),
        expires_at: item["expire_in"].as_str().and_then(time::parse),
        title: text(&item["description"]),
        visits: item["visit_count"].as_i64().unwrap_or(0),
        // Kutt redirects (`res.redirect(link.target)`: Express's 302) to the target as stored,
        // without the short URL's query.
        forward_query: false,
        redirect: 302,
        password: item["password"].as_bool().unwrap_or(false),
        // Kutt sends a banned link's visitors to its /banned page.
        revoked: item["banned"].as_bool().unwrap_or(false),
        code,
        ..SourceLink::default()
    })
}

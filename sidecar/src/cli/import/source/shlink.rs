//! Shlink 4.x, REST API v3 (`X-Api-Key`): `GET /rest/v3/short-urls?page=&itemsPerPage=` gives
//! `shortUrls.data[]` and `shortUrls.pagination`; a link's visits are
//! `GET /rest/v3/short-urls/{code}/visits?domain=&page=&itemsPerPage=` (`visits.data[]`).

use super::args::SourceArgs;
use super::fetch::{base, escape, Fetch};
use super::item::{derived_visit_id, Item, Source, SourceLink, SourceVisit, Unreadable};
use super::time;
use crate::cli::error::BoxError;
use async_trait::async_trait;
use serde_json::Value;

pub struct ShlinkApi {
    fetch: Fetch,
    base: String,
    page: u64,
    pages: Option<u64>,
    total: Option<u64>,
    per_page: u32,
}

impl ShlinkApi {
    pub fn new(args: &SourceArgs) -> Result<Self, BoxError> {
        let url = args
            .source_url
            .as_deref()
            .ok_or("--from shlink needs --source-url")?;
        let key = args
            .source_key
            .clone()
            .ok_or("--from shlink needs --source-key")?;
        Ok(Self {
            fetch: Fetch::new(url, Some(("X-Api-Key", key)), &args.outbound)?,
            base: base(url),
            page: 0,
            pages: None,
            total: None,
            per_page: args.page_size,
        })
    }
}

#[async_trait]
impl Source for ShlinkApi {
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError> {
        if self.pages.is_some_and(|pages| self.page >= pages) {
            return Ok(None);
        }
        self.page += 1;
        let url = format!(
            "{}/rest/v3/short-urls?page={}&itemsPerPage={}&orderBy=dateCreated-ASC",
            self.base, self.page, self.per_page
        );
        let answer = self.fetch.json(&url).await?;
        let list = &answer["shortUrls"];
        let pagination = &list["pagination"];
        self.pages = Some(pagination["pagesCount"].as_u64().unwrap_or(0));
        self.total = pagination["totalItems"].as_u64();
        let data = list["data"]
            .as_array()
            .ok_or_else(|| format!("GET {url}: no shortUrls.data"))?;
        if data.is_empty() {
            return Ok(None);
        }
        Ok(Some(data.iter().map(link).collect()))
    }

    fn total(&self) -> Option<u64> {
        self.total
    }

    async fn visits(&mut self, link: &SourceLink) -> Result<Vec<SourceVisit>, BoxError> {
        let mut visits = Vec::new();
        let mut seen = std::collections::HashMap::new();
        let mut page = 0;
        loop {
            page += 1;
            let mut url = format!(
                "{}/rest/v3/short-urls/{}/visits?page={page}&itemsPerPage=5000",
                self.base,
                escape(&link.code)
            );
            if !link.domain.is_empty() {
                url.push_str(&format!("&domain={}", escape(&link.domain)));
            }
            let answer = self.fetch.json(&url).await?;
            let data = answer["visits"]["data"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for visit in &data {
                if let Some(visit) = shlink_visit(&link.code, visit, &mut seen) {
                    visits.push(visit);
                }
            }
            let pages = answer["visits"]["pagination"]["pagesCount"]
                .as_u64()
                .unwrap_or(0);
            if data.is_empty() || page >= pages {
                return Ok(visits);
            }
        }
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned).filter(|s| !s.is_empty())
}

fn link(item: &Value) -> Item {
    let code = text(&item["shortCode"]).ok_or_else(|| Unreadable {
        at: item.to_string().chars().take(80).collect(),
        message: "no shortCode".into(),
    })?;
    let meta = &item["meta"];
    Ok(SourceLink {
        domain: text(&item["domain"]).unwrap_or_default(),
        target: text(&item["longUrl"]).unwrap_or_default(),
        created_at: item["dateCreated"].as_str().and_then(time::parse),
        expires_at: meta["validUntil"].as_str().and_then(time::parse),
        valid_since: meta["validSince"].as_str().and_then(time::parse),
        max_visits: meta["maxVisits"].as_i64(),
        title: text(&item["title"]),
        tags: item["tags"]
            .as_array()
            .map(|tags| tags.iter().filter_map(text).collect())
            .unwrap_or_default(),
        visits: item["visitsSummary"]["total"]
            .as_i64()
            .or_else(|| item["visitsCount"].as_i64())
            .unwrap_or(0),
        // Shlink's per-link setting (default on since 2.9).
        forward_query: item["forwardQuery"].as_bool().unwrap_or(true),
        // REDIRECT_STATUS_CODE's default; a server set otherwise: say so with --redirect.
        redirect: 302,
        password: false,
        revoked: false,
        code,
    })
}

fn shlink_visit(
    code: &str,
    visit: &Value,
    seen: &mut std::collections::HashMap<String, usize>,
) -> Option<SourceVisit> {
    let date = visit["date"].as_str()?;
    let at = time::parse(date)?;
    let location = &visit["visitLocation"];
    let user_agent = text(&visit["userAgent"]);
    let referrer = text(&visit["referer"]);
    let key = format!(
        "{date}\0{}\0{}",
        user_agent.as_deref().unwrap_or(""),
        referrer.as_deref().unwrap_or("")
    );
    let n = seen.entry(key).or_insert(0);
    *n += 1;
    Some(SourceVisit {
        id: derived_visit_id(
            "shlink",
            code,
            &[
                date,
                user_agent.as_deref().unwrap_or(""),
                referrer.as_deref().unwrap_or(""),
            ],
            *n,
        ),
        at,
        // Shlink keeps no address (it anonymises them before locating the visit).
        ip: None,
        user_agent,
        referrer,
        country: text(&location["countryCode"]),
        region: text(&location["regionName"]),
        city: text(&location["cityName"]),
    })
}

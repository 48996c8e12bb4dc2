//! YOURLS 1.9, from its MySQL/MariaDB database: `<prefix>url` (keyword, url, title, timestamp,
//! ip, clicks) by keyword, and each link's clicks from `<prefix>log` (click_id, click_time,
//! shorturl, referrer, user_agent, ip_address, country_code). Times are read as UTC (YOURLS
//! writes them in the server's time zone: run with a UTC server, or expect them shifted). YOURLS
//! answers one domain (its `YOURLS_SITE`), given as `--source-domain`.

use super::args::SourceArgs;
use super::item::{Item, Source, SourceLink, SourceVisit};
use super::time;
use crate::cli::error::BoxError;
use async_trait::async_trait;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::Row;

pub struct YourlsDb {
    pool: MySqlPool,
    /// Table names, the prefix checked to be a plain identifier.
    url_table: String,
    log_table: String,
    after: String,
    page: u32,
    total: Option<u64>,
    done: bool,
}

impl YourlsDb {
    pub async fn connect(args: &SourceArgs) -> Result<Self, BoxError> {
        let url = (args.source_database.as_deref())
            .ok_or("--from yourls needs --source-database mysql://user:password@host/yourls")?;
        let prefix = &args.table_prefix;
        if !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!("--table-prefix {prefix:?}: letters, digits and _ only").into());
        }
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .connect(url)
            .await
            .map_err(|e| format!("YOURLS database: {e}"))?;
        let url_table = format!("`{prefix}url`");
        let total: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {url_table}"))
            .fetch_one(&pool)
            .await
            .map_err(|e| format!("YOURLS database, table {prefix}url: {e}"))?;
        Ok(Self {
            pool,
            url_table,
            log_table: format!("`{prefix}log`"),
            after: String::new(),
            page: args.page_size,
            total: u64::try_from(total).ok(),
            done: false,
        })
    }
}

#[async_trait]
impl Source for YourlsDb {
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError> {
        if self.done {
            return Ok(None);
        }
        // Keyset by keyword (the primary key, binary collation in YOURLS 1.9): a page costs the
        // same at the end of a million links as at the start. The column is ordered, not its
        // cast (named apart: an ORDER BY name means the select list's first, and the cast
        // compares in the connection's case-insensitive collation, skipping `Promo` after `bad`).
        let rows = sqlx::query(&format!(
            "SELECT CAST(keyword AS CHAR) AS code, CAST(url AS CHAR) AS url, \
             CAST(title AS CHAR) AS title, DATE_FORMAT(`timestamp`, '%Y-%m-%d %H:%i:%s') AS created, \
             CAST(clicks AS SIGNED) AS clicks FROM {} WHERE keyword > ? ORDER BY keyword LIMIT ?",
            self.url_table
        ))
        .bind(&self.after)
        .bind(self.page)
        .fetch_all(&self.pool)
        .await?;
        if rows.len() < self.page as usize {
            self.done = true;
        }
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            let code: String = row.try_get("code")?;
            let created: Option<String> = row.try_get("created")?;
            items.push(Ok(SourceLink {
                target: row.try_get::<Option<String>, _>("url")?.unwrap_or_default(),
                title: row
                    .try_get::<Option<String>, _>("title")?
                    .filter(|t| !t.is_empty()),
                created_at: created.as_deref().and_then(time::parse),
                visits: row.try_get::<Option<i64>, _>("clicks")?.unwrap_or(0),
                // YOURLS redirects with a 301 and drops the short URL's query.
                redirect: 301,
                forward_query: false,
                code: code.clone(),
                ..SourceLink::default()
            }));
            self.after = code;
        }
        Ok((!items.is_empty()).then_some(items))
    }

    fn total(&self) -> Option<u64> {
        self.total
    }

    async fn visits(&mut self, link: &SourceLink) -> Result<Vec<SourceVisit>, BoxError> {
        let rows = sqlx::query(&format!(
            "SELECT CAST(click_id AS SIGNED) AS id, \
             DATE_FORMAT(click_time, '%Y-%m-%d %H:%i:%s') AS at, CAST(referrer AS CHAR) AS referrer, \
             CAST(user_agent AS CHAR) AS user_agent, CAST(ip_address AS CHAR) AS ip, \
             CAST(country_code AS CHAR) AS country FROM {} WHERE shorturl = ? ORDER BY click_id",
            self.log_table
        ))
        .bind(&link.code)
        .fetch_all(&self.pool)
        .await?;
        let mut visits = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get("id")?;
            let Some(at) = row
                .try_get::<Option<String>, _>("at")?
                .as_deref()
                .and_then(time::parse)
            else {
                continue;
            };
            let text = |name: &str| -> Result<Option<String>, sqlx::Error> {
                Ok(row
                    .try_get::<Option<String>, _>(name)?
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty()))
            };
            visits.push(SourceVisit {
                id: format!("import:yourls:{}:{id}", link.code),
                at,
                ip: text("ip")?,
                user_agent: text("user_agent")?,
                // YOURLS writes "direct" when there was no referrer.
                referrer: text("referrer")?.filter(|r| r != "direct"),
                country: text("country")?.map(|c| c.to_ascii_uppercase()),
                region: None,
                city: None,
            });
        }
        Ok(visits)
    }
}

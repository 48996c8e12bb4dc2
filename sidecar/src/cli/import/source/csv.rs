//! CSV files with a header line: the generic format (code, url, domain, created_at, expires_at,
//! title, tags, visits), Shlink's export (shlink-web-client: createdAt, domain, shortCode,
//! shortUrl, longUrl, title, tags, visits) and Bitly's (links_list: Bitlink, Long URL, Title,
//! Date Created, Tags, Clicks/Engagements). Columns are found by name, whatever their order,
//! case, spaces or underscores; a short URL column gives the domain and code when there is no
//! code column.

use super::item::{Item, Source, SourceLink, Unreadable};
use super::time;
use crate::cli::error::BoxError;
use async_trait::async_trait;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// Rows per page.
const PAGE: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Code,
    ShortUrl,
    Url,
    Domain,
    Created,
    Expires,
    Title,
    Tags,
    Visits,
    ForwardQuery,
    Redirect,
}

/// A header name, lowercased without spaces, `_` and `-`, and the field it names.
const NAMES: [(&str, Field); 27] = [
    ("code", Field::Code),
    ("shortcode", Field::Code),
    ("keyword", Field::Code),
    ("backhalf", Field::Code),
    ("shorturl", Field::ShortUrl),
    ("bitlink", Field::ShortUrl),
    ("link", Field::ShortUrl),
    ("url", Field::Url),
    ("longurl", Field::Url),
    ("target", Field::Url),
    ("destination", Field::Url),
    ("domain", Field::Domain),
    ("createdat", Field::Created),
    ("datecreated", Field::Created),
    ("created", Field::Created),
    ("expiresat", Field::Expires),
    ("validuntil", Field::Expires),
    ("title", Field::Title),
    ("tags", Field::Tags),
    ("visits", Field::Visits),
    ("clicks", Field::Visits),
    ("totalclicks", Field::Visits),
    ("engagements", Field::Visits),
    ("visitcount", Field::Visits),
    ("forwardquery", Field::ForwardQuery),
    ("redirect", Field::Redirect),
    ("status", Field::Redirect),
];

pub struct CsvSource {
    reader: csv::Reader<BufReader<File>>,
    columns: Vec<Option<Field>>,
    name: String,
    /// What the source does when a row does not say.
    forward_query: bool,
    redirect: u16,
    done: bool,
}

impl CsvSource {
    pub fn generic(path: &Path) -> Result<Self, BoxError> {
        Self::open(path, false, 302)
    }

    /// Shlink forwards the query by default (`forwardQuery`, not in its export) and answers 302.
    pub fn shlink(path: &Path) -> Result<Self, BoxError> {
        Self::open(path, true, 302)
    }

    /// Bitly forwards the query and answers 301.
    pub fn bitly(path: &Path) -> Result<Self, BoxError> {
        Self::open(path, true, 301)
    }

    fn open(path: &Path, forward_query: bool, redirect: u16) -> Result<Self, BoxError> {
        let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .from_reader(BufReader::new(file));
        let columns: Vec<Option<Field>> = reader
            .headers()
            .map_err(|e| format!("{}: line 1: {e}", path.display()))?
            .iter()
            .map(|name| {
                let name: String = name
                    .trim_start_matches('\u{feff}')
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
                    .to_ascii_lowercase();
                NAMES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
            })
            .collect();
        let has = |field| columns.contains(&Some(field));
        if !has(Field::Url) {
            return Err(format!("{}: line 1: no url (or long URL) column", path.display()).into());
        }
        if !has(Field::Code) && !has(Field::ShortUrl) {
            return Err(
                format!("{}: line 1: no code (or short URL) column", path.display()).into(),
            );
        }
        Ok(Self {
            reader,
            columns,
            name: path.display().to_string(),
            forward_query,
            redirect,
            done: false,
        })
    }

    fn row(&self, line: u64, record: &csv::StringRecord) -> Item {
        let at = format!("{}:{line}", self.name);
        let unreadable = |message: String| Unreadable {
            at: at.clone(),
            message,
        };
        let mut link = SourceLink {
            forward_query: self.forward_query,
            redirect: self.redirect,
            ..SourceLink::default()
        };
        let mut short_url = None;
        for (field, value) in self.columns.iter().zip(record.iter()) {
            let value = value.trim();
            let Some(field) = field.filter(|_| !value.is_empty()) else {
                continue;
            };
            match field {
                Field::Code => link.code = value.to_owned(),
                Field::ShortUrl => short_url = Some(value.to_owned()),
                Field::Url => link.target = value.to_owned(),
                Field::Domain => link.domain = value.to_ascii_lowercase(),
                Field::Created => {
                    link.created_at = Some(time::parse(value).ok_or_else(|| {
                        unreadable(format!("created time {value:?} is not a time"))
                    })?)
                }
                Field::Expires => {
                    link.expires_at = Some(
                        time::parse(value)
                            .ok_or_else(|| unreadable(format!("expiry {value:?} is not a time")))?,
                    )
                }
                Field::Title => link.title = Some(value.to_owned()),
                Field::Tags => {
                    link.tags = value
                        .split(['|', ';'])
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect()
                }
                Field::Visits => {
                    link.visits = value
                        .parse()
                        .map_err(|_| unreadable(format!("visits {value:?} is not a number")))?
                }
                Field::ForwardQuery => {
                    link.forward_query =
                        matches!(value.to_ascii_lowercase().as_str(), "true" | "1" | "yes")
                }
                Field::Redirect => {
                    link.redirect = value
                        .parse()
                        .map_err(|_| unreadable(format!("redirect {value:?} is not a status")))?
                }
            }
        }
        if let Some(short) = short_url {
            if let Some((domain, code)) = super::bitly::split_id(&short) {
                if link.domain.is_empty() {
                    link.domain = domain.to_ascii_lowercase();
                }
                if link.code.is_empty() {
                    link.code = code;
                }
            }
        }
        if link.code.is_empty() {
            return Err(unreadable("no code".into()));
        }
        Ok(link)
    }
}

#[async_trait]
impl Source for CsvSource {
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError> {
        if self.done {
            return Ok(None);
        }
        let mut items = Vec::with_capacity(PAGE);
        let mut record = csv::StringRecord::new();
        while items.len() < PAGE {
            let line = self.reader.position().line();
            match self.reader.read_record(&mut record) {
                Ok(false) => {
                    self.done = true;
                    break;
                }
                Ok(true) => {
                    let line = record.position().map_or(line, |p| p.line());
                    items.push(self.row(line, &record));
                }
                Err(error) if !matches!(error.kind(), csv::ErrorKind::Io(_)) => {
                    let line = error.position().map_or(line, |p| p.line());
                    items.push(Err(Unreadable {
                        at: format!("{}:{line}", self.name),
                        message: format!("unreadable CSV row: {error}"),
                    }));
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok((!items.is_empty()).then_some(items))
    }
}

//! The feeds' public formats, read into hosts and URLs. A line that is not an entry (a comment,
//! a header, a blank) is skipped; a line that should be one and is not counts as a parse error,
//! reported with the feed, so a format that changes under us shows before it empties a feed.

use crate::normalize;
use std::str::FromStr;

/// A feed's format, as `--threat-feeds` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// URLhaus's CSV dumps (`csv_recent`, `csv_online`): `"id","dateadded","url",...`, `#` comments.
    UrlhausCsv,
    /// One URL a line: OpenPhish's feed, URLhaus's `text_online`, PhishTank's URL lists.
    Urls,
    /// PhishTank's CSV (`online-valid.csv`): a header row naming a `url` column.
    PhishtankCsv,
    /// Hosts and adblock lists: `host`, `0.0.0.0 host` (URLhaus's host file), `||host^`.
    Hosts,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Ok(match name {
            "urlhaus-csv" => Format::UrlhausCsv,
            "urls" => Format::Urls,
            "phishtank-csv" => Format::PhishtankCsv,
            "hosts" => Format::Hosts,
            other => {
                return Err(format!(
                    "unknown feed format {other:?}: urlhaus-csv, urls, phishtank-csv or hosts"
                ))
            }
        })
    }
}

/// A feed's entries, normalised ([`normalize`]), and how many lines could not be read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub hosts: Vec<String>,
    pub urls: Vec<String>,
    pub errors: u64,
}

impl Parsed {
    pub fn entries(&self) -> usize {
        self.hosts.len() + self.urls.len()
    }

    fn url(&mut self, raw: &str) {
        match normalize::url(raw) {
            Some(url) => self.urls.push(url),
            None => self.errors += 1,
        }
    }
}

pub fn parse(format: Format, body: &[u8]) -> Parsed {
    match format {
        Format::UrlhausCsv => csv_column(body, Column::At(2)),
        Format::PhishtankCsv => csv_column(body, Column::Named("url")),
        Format::Urls => lines(body, |parsed, line| parsed.url(line)),
        Format::Hosts => lines(body, host_line),
    }
}

/// Each line that is not blank or a comment (`#`, adblock's `!` and `[Adblock Plus]` header).
fn lines(body: &[u8], mut entry: impl FnMut(&mut Parsed, &str)) -> Parsed {
    let mut parsed = Parsed::default();
    for line in body.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            parsed.errors += 1;
            continue;
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', '!', '[']) {
            continue;
        }
        entry(&mut parsed, line);
    }
    parsed
}

fn host_line(parsed: &mut Parsed, line: &str) {
    let line = line.split('#').next().unwrap_or_default().trim();
    let name = if let Some(rule) = line.strip_prefix("||") {
        // `||host^` and `||host^$third-party`: a rule with a path is not a host entry.
        match rule.split_once('^') {
            Some((host, _)) => host,
            None => rule,
        }
    } else {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next()) {
            (Some(address), Some(host)) if address.parse::<std::net::IpAddr>().is_ok() => host,
            (Some(host), None) => host,
            _ => {
                parsed.errors += 1;
                return;
            }
        }
    };
    // Hosts files map their own names too (`127.0.0.1 localhost`, `0.0.0.0 0.0.0.0`).
    if matches!(
        name,
        "localhost" | "localhost.localdomain" | "0.0.0.0" | "broadcasthost"
    ) {
        return;
    }
    match normalize::host(name) {
        Some(host) => parsed.hosts.push(host),
        None => parsed.errors += 1,
    }
}

enum Column {
    At(usize),
    Named(&'static str),
}

fn csv_column(body: &[u8], column: Column) -> Parsed {
    let mut parsed = Parsed::default();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(body);
    let mut at = match column {
        Column::At(at) => Some(at),
        Column::Named(_) => None,
    };
    for record in reader.records() {
        let Ok(record) = record else {
            parsed.errors += 1;
            continue;
        };
        let Some(index) = at else {
            // The header row names the column.
            at = match &column {
                Column::Named(name) => record.iter().position(|field| field.trim() == *name),
                Column::At(at) => Some(*at),
            };
            if at.is_none() {
                parsed.errors += 1;
            }
            continue;
        };
        match record.get(index) {
            Some(url) => parsed.url(url),
            None => parsed.errors += 1,
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urlhaus_csv() {
        let body = b"################\n# abuse.ch URLhaus Database Dump (CSV - recent URLs only)\n\
# id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter\n\
\"3210001\",\"2026-11-28 10:00:04\",\"http://198.51.100.7:47312/i\",\"online\",\"2026-11-28 10:00:04\",\"malware_download\",\"elf,Mozi\",\"https://urlhaus.abuse.ch/url/3210001/\",\"lrz_urlhaus\"\n\
\"3210002\",\"2026-11-28 10:01:00\",\"https://Evil.example/login#x\",\"online\",\"\",\"malware_download\",\"\",\"https://urlhaus.abuse.ch/url/3210002/\",\"x\"\n\
\"3210003\",\"2026-11-28 10:01:00\",\"not a url\",\"online\",\"\",\"malware_download\",\"\",\"\",\"x\"\n";
        let parsed = parse(Format::UrlhausCsv, body);
        assert_eq!(
            parsed.urls,
            ["http://198.51.100.7:47312/i", "https://evil.example/login"]
        );
        assert_eq!(parsed.errors, 1);
    }

    #[test]
    fn phishtank_csv_by_header() {
        let body = b"phish_id,url,phish_detail_url,submission_time,verified,verification_time,online,target\n\
8000001,https://bank.example.phish.example/x,http://www.phishtank.com/phish_detail.php?phish_id=8000001,2026-11-28T10:00:00+00:00,yes,2026-11-28T10:05:00+00:00,yes,Other\n";
        let parsed = parse(Format::PhishtankCsv, body);
        assert_eq!(parsed.urls, ["https://bank.example.phish.example/x"]);
        assert_eq!(parsed.errors, 0);
    }

    #[test]
    fn hosts_and_adblock_lines() {
        let body = b"[Adblock Plus]\n! Title: test\n# comment\n127.0.0.1\tlocalhost\n0.0.0.0 0.0.0.0\n\
0.0.0.0 Bad.example\n127.0.0.1\tmal.example # urlhaus\n||ads.example^\n||tracker.example^$third-party\n\
plain.example\nnot a host at all\n\n";
        let parsed = parse(Format::Hosts, body);
        assert_eq!(
            parsed.hosts,
            [
                "bad.example",
                "mal.example",
                "ads.example",
                "tracker.example",
                "plain.example"
            ]
        );
        assert_eq!(parsed.errors, 1);
    }

    #[test]
    fn url_lists() {
        let parsed = parse(
            Format::Urls,
            b"https://a.example/x\r\nhttp://b.example\nmailto:x\n",
        );
        assert_eq!(parsed.urls, ["https://a.example/x", "http://b.example/"]);
        assert_eq!(parsed.errors, 1);
    }
}

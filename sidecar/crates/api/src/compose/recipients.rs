//! Recipients as they come: one NDJSON object or one CSV record a line.
//!
//! NDJSON: `{"phone":"06 12 34 56 78","ref":"c-1","variables":{"name":"Ann"},
//! "url":"https://…","link":{"expires_at":"…"}}`; only `phone` is required. CSV: a header
//! line, then one recipient a line; the columns `phone`, `ref`, `url` and `link` (a JSON object)
//! are those fields, every other column is a variable. A quoted field may hold line breaks
//! (RFC 4180): the body is cut into records, not lines ([`body::Framing::CsvRecords`]).

use crate::batch::body::{self, RawItem};
use crate::links::CreateLinkRequest;
use crate::{Error, Result};
use serde::Deserialize;
use serde_json::{Map, Value};
use shortlink_core::service::compose::Recipient;
use std::collections::{BTreeMap, BTreeSet};

/// The CSV columns that are not variables.
pub const FIELDS: [&str; 4] = ["phone", "ref", "url", "link"];

/// How the body's lines are read.
#[derive(Debug, Clone)]
pub enum Input {
    Ndjson,
    /// The header's column names.
    Csv(Vec<String>),
}

/// One recipient line: who, and the link options of its create.
#[derive(Debug, Default)]
pub struct Line {
    pub recipient: Recipient,
    pub recipient_ref: Option<String>,
    /// Link options as `POST /links` takes them, without `url`, `campaign` and `ref`.
    pub link: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine {
    phone: String,
    #[serde(rename = "ref")]
    recipient_ref: Option<String>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
    url: Option<String>,
    link: Option<Map<String, Value>>,
}

impl Input {
    /// The CSV header line's columns (a `phone` column is required).
    pub fn csv(header: Option<RawItem>) -> Result<Input> {
        let header = match header {
            Some(RawItem::Line(line)) => line,
            _ => return Err(invalid_csv("the CSV body has no header line")),
        };
        let columns = csv_record(&header).map_err(|message| invalid_csv(&message))?;
        let unique: BTreeSet<&String> = columns.iter().collect();
        if unique.len() != columns.len() {
            return Err(invalid_csv("the CSV header names a column twice"));
        }
        if !columns.iter().any(|c| c == "phone") {
            return Err(invalid_csv("the CSV header has no `phone` column"));
        }
        Ok(Input::Csv(columns))
    }

    /// Parses one line.
    pub fn parse(&self, item: RawItem) -> Result<Line> {
        let line = match item {
            RawItem::Line(line) => line,
            other => return body::parse(other).map(|_| Line::default()),
        };
        match self {
            Input::Ndjson => {
                let parsed: JsonLine =
                    serde_json::from_slice(&line).map_err(body::item_json_error)?;
                Ok(Line {
                    recipient: Recipient {
                        phone: parsed.phone,
                        url: parsed.url,
                        variables: parsed.variables,
                    },
                    recipient_ref: parsed.recipient_ref,
                    link: parsed.link,
                })
            }
            Input::Csv(columns) => csv_line(columns, &line),
        }
    }

    /// The variable names the recipients bring: the CSV's other columns, or every name of the
    /// first NDJSON lines (`first`).
    pub fn known_variables<'a>(
        &self,
        first: impl Iterator<Item = &'a RawItem>,
    ) -> BTreeSet<String> {
        match self {
            Input::Csv(columns) => (columns.iter())
                .filter(|c| !FIELDS.contains(&c.as_str()))
                .cloned()
                .collect(),
            Input::Ndjson => first
                .filter_map(|item| match item {
                    RawItem::Line(line) => serde_json::from_slice::<JsonLine>(line).ok(),
                    _ => None,
                })
                .flat_map(|line| line.variables.into_keys())
                .collect(),
        }
    }
}

fn csv_line(columns: &[String], line: &[u8]) -> Result<Line> {
    let values = csv_record(line).map_err(|message| Error::invalid("invalid_csv", message))?;
    if values.len() != columns.len() {
        return Err(Error::invalid(
            "invalid_csv",
            format!(
                "the line has {} fields, the header {}",
                values.len(),
                columns.len()
            ),
        ));
    }
    let mut parsed = Line::default();
    let present = |value: String| Some(value).filter(|v| !v.is_empty());
    for (column, value) in columns.iter().zip(values) {
        match column.as_str() {
            "phone" => parsed.recipient.phone = value,
            "ref" => parsed.recipient_ref = present(value),
            "url" => parsed.recipient.url = present(value),
            "link" => {
                parsed.link = present(value)
                    .map(|text| serde_json::from_str(&text))
                    .transpose()
                    .map_err(body::item_json_error)?;
            }
            _ => {
                parsed.recipient.variables.insert(column.clone(), value);
            }
        }
    }
    Ok(parsed)
}

/// The fields of one CSV line.
fn csv_record(line: &[u8]) -> std::result::Result<Vec<String>, String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .buffer_capacity(line.len().max(64))
        .from_reader(line);
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => {}
        Ok(false) => return Err("the line is empty".into()),
        Err(error) => return Err(format!("not a CSV line: {error}")),
    }
    if reader
        .read_record(&mut csv::StringRecord::new())
        .unwrap_or(true)
    {
        return Err("the line holds more than one CSV record".into());
    }
    Ok(record.iter().map(|field| field.trim().to_owned()).collect())
}

fn invalid_csv(message: &str) -> Error {
    Error::invalid("invalid_csv", message.to_owned())
}

/// The create request of a recipient's link: its options with the target, campaign and ref.
pub fn link_request(
    url: String,
    campaign: Option<String>,
    recipient_ref: Option<String>,
    options: Option<Map<String, Value>>,
) -> Result<CreateLinkRequest> {
    let Some(mut options) = options else {
        // The common case, without a detour through a JSON value.
        return Ok(CreateLinkRequest {
            url,
            campaign,
            recipient_ref,
            ..CreateLinkRequest::default()
        });
    };
    for field in ["url", "campaign", "ref"] {
        if options.contains_key(field) {
            return Err(Error::invalid(
                "invalid_body",
                format!(
                    "`link` cannot set `{field}`: the recipient's url, the campaign and the \
                     recipient's ref are given outside it"
                ),
            ));
        }
    }
    options.insert("url".into(), Value::String(url));
    if let Some(campaign) = campaign {
        options.insert("campaign".into(), Value::String(campaign));
    }
    if let Some(recipient_ref) = recipient_ref {
        options.insert("ref".into(), Value::String(recipient_ref));
    }
    serde_json::from_value(Value::Object(options)).map_err(body::item_json_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> RawItem {
        RawItem::Line(text.as_bytes().to_vec())
    }

    #[test]
    fn csv_columns_become_fields_and_variables() {
        let input = Input::csv(Some(line("phone,ref,name,url"))).unwrap();
        let parsed = input
            .parse(line("\"06 12 34 56 78\",c-1,\"Ann, Jr\",\r"))
            .unwrap();
        assert_eq!(parsed.recipient.phone, "06 12 34 56 78");
        assert_eq!(parsed.recipient_ref.as_deref(), Some("c-1"));
        assert_eq!(parsed.recipient.url, None);
        assert_eq!(parsed.recipient.variables["name"], "Ann, Jr");
        let known = input.known_variables(std::iter::empty());
        assert_eq!(known.into_iter().collect::<Vec<_>>(), ["name"]);
        let two_lines = input.parse(line("0612,c-2,\"Cy\nDee\",")).unwrap();
        assert_eq!(two_lines.recipient.variables["name"], "Cy\nDee");
        assert!(input.parse(line("1,2")).is_err());
        assert!(input.parse(line("\"open,x,y,z")).is_err());
        assert!(Input::csv(Some(line("ref,name"))).is_err());
        assert!(Input::csv(Some(line("phone,a,a"))).is_err());
    }

    #[test]
    fn link_options_cannot_override_the_recipient() {
        let options = serde_json::json!({"ref": "x"});
        let Value::Object(options) = options else {
            unreachable!()
        };
        let refused = link_request("https://t.example".into(), None, None, Some(options));
        assert_eq!(refused.unwrap_err().code(), "invalid_body");
        let options = serde_json::json!({"redirect": 301});
        let Value::Object(options) = options else {
            unreachable!()
        };
        let request = link_request(
            "https://t.example".into(),
            Some("c".into()),
            None,
            Some(options),
        )
        .unwrap();
        assert_eq!(
            (request.redirect, request.campaign.as_deref()),
            (Some(301), Some("c"))
        );
    }
}

//! A gateway's callback parameters, as each gateway's module reads them.

use chrono::{DateTime, Utc};

/// A request's parameters (a query or a form), in order, each name's first value winning.
#[derive(Debug, Clone, Default)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn from_query(query: &str) -> Self {
        Params(
            url::form_urlencoded::parse(query.as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        (self.0.iter())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A time in Unix seconds.
pub(crate) fn unix_seconds(text: &str) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(text.trim().parse::<i64>().ok()?, 0)
}

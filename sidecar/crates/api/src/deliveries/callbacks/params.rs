//! A gateway's callback parameters, as each gateway's module reads them (apart from the router
//! in `mod.rs`, which imports the modules: the modules import this, not it).

use chrono::DateTime;

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

/// Unix seconds as RFC 3339.
pub(crate) fn unix_seconds(text: &str) -> Option<String> {
    let seconds = text.trim().parse::<i64>().ok()?;
    DateTime::from_timestamp(seconds, 0).map(|at| at.to_rfc3339())
}

//! Statements written once with `?` for each value, and the values bound to them: what every
//! part of the shared SQL and every backend builds its queries from.

use chrono::{DateTime, Utc};

/// A value bound to a statement. The backends differ in how they store times (SQLite: text), so
/// shared code binds values through [`super::Dialect`], which turns times into what it stores.
#[derive(Debug, Clone)]
pub enum Value {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
    Time(DateTime<Utc>),
    OptTime(Option<DateTime<Utc>>),
}

/// A statement and its values, for any backend: text pieces with a value between each two.
/// Rendered with the database's own placeholders when it runs ([`Driver`](super::Driver)).
#[derive(Debug, Clone, Default)]
pub struct Statement {
    // Read where the driver renders it (`driver::render`).
    pub(super) pieces: Vec<String>,
    pub(super) values: Vec<Value>,
}

impl Statement {
    pub fn new(sql: impl Into<String>) -> Self {
        Self {
            pieces: vec![sql.into()],
            values: Vec::new(),
        }
    }

    pub fn push(&mut self, sql: &str) -> &mut Self {
        if let Some(last) = self.pieces.last_mut() {
            last.push_str(sql);
        }
        self
    }

    pub fn bind(&mut self, value: Value) -> &mut Self {
        self.values.push(value);
        self.pieces.push(String::new());
        self
    }
}

/// `template` with each `?` replaced by the next of `values`.
pub fn statement(template: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    let mut values = values.into_iter();
    let mut parts = template.split('?');
    let mut query = Statement::new(parts.next().unwrap_or_default());
    for part in parts {
        query
            .bind(values.next().expect("a value for every ?"))
            .push(part);
    }
    debug_assert!(values.next().is_none(), "more values than ? in {template}");
    query
}

/// Most values bound in one statement by the shared code (IN lists): well under every backend's
/// limit (SQLite 32,766, PostgreSQL and MySQL 65,535).
pub const IN_LIST: usize = 1000;

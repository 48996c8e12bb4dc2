//! PostgreSQL array literals (`{"a","b",NULL}`) as one text value each, so that a batch insert
//! is one statement of a fixed shape (`INSERT ... SELECT ... FROM UNNEST(?::text[], ...)`)
//! whatever its rows: parsed and planned once per connection, not once per row count, and with
//! 19 values to bind instead of 19 per row.

/// `{...}` of `items` as a `text[]` literal: each quoted, `"` and `\` escaped; `None` is NULL.
pub(super) fn text_array<'a>(items: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::from("{");
    for (n, item) in items.into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        match item {
            None => out.push_str("NULL"),
            Some(text) => {
                out.push('"');
                for c in text.chars() {
                    if c == '"' || c == '\\' {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
            }
        }
    }
    out.push('}');
    out
}

/// `{...}` of `items` as a `bigint[]` literal; `None` is NULL.
pub(super) fn int_array(items: impl IntoIterator<Item = Option<i64>>) -> String {
    let items: Vec<String> = (items.into_iter())
        .map(|item| item.map_or_else(|| "NULL".to_owned(), |n| n.to_string()))
        .collect();
    format!("{{{}}}", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_backslashes_are_escaped_and_none_is_null() {
        let items = [Some("a"), None, Some(r#"q"u\o{t,e} NULL"#), Some("")];
        assert_eq!(text_array(items), r#"{"a",NULL,"q\"u\\o{t,e} NULL",""}"#);
        assert_eq!(text_array([Some("NULL")]), r#"{"NULL"}"#);
        assert_eq!(int_array([Some(-1), None, Some(1999)]), "{-1,NULL,1999}");
        assert_eq!(text_array(std::iter::empty::<Option<&str>>()), "{}");
    }
}

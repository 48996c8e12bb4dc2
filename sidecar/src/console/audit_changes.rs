//! An audit row's `changes` as a person reads them: one line per field with its value before and
//! after, and nested values (rules, variants, a preview card, tags) as a diff per key and index,
//! each value shown as text or pretty JSON. The rows are rendered as stored: secrets and
//! personal fields were replaced by `<redacted>` / `<changed>` when the row was written
//! (`storage::audit::changes`), so nothing here can reveal them.

use maud::{html, Markup};
use serde_json::{Map, Value};

/// One difference inside a nested value, at `path` (`rules[1].split.variants[0].url`).
#[derive(Debug, PartialEq)]
enum Step {
    Added(String, Value),
    Removed(String, Value),
    Changed(String, Value, Value),
}

/// The stored `changes` text (`{"field": [before, after]}`) as a table; text that is not such an
/// object (a row written by hand in SQL) is shown as it is, wrapped.
pub fn render(changes: &str) -> Markup {
    let Ok(fields) = serde_json::from_str::<Map<String, Value>>(changes) else {
        return html! { pre.changes { (changes) } };
    };
    if fields.is_empty() {
        return html! { span.hint { "none" } };
    }
    html! {
        table.changes {
            thead { tr { th scope="col" { "Field" } th scope="col" { "Before" } th scope="col" { "After" } } }
            tbody {
                @for (field, value) in &fields {
                    @let (before, after) = before_after(value);
                    @if nested(&before) || nested(&after) {
                        tr { th scope="row" { (field) } td colspan="2" { (steps(field, &before, &after)) } }
                    } @else {
                        tr { th scope="row" { (field) } td { (shown(&before)) } td { (shown(&after)) } }
                    }
                }
            }
        }
    }
}

/// A field's `[before, after]`, each with JSON kept as text (rules, a card) parsed; any other
/// shape reads as a value set.
fn before_after(value: &Value) -> (Value, Value) {
    match value.as_array().map(Vec::as_slice) {
        Some([before, after]) => (parsed(before), parsed(after)),
        _ => (Value::Null, parsed(value)),
    }
}

/// A string that holds a JSON object or array, as that value: rules and preview cards are kept
/// as JSON text, and JSON escaped inside JSON is unreadable.
fn parsed(value: &Value) -> Value {
    match value {
        Value::String(text) if text.starts_with(['{', '[']) => {
            serde_json::from_str(text).unwrap_or_else(|_| value.clone())
        }
        _ => value.clone(),
    }
}

fn nested(value: &Value) -> bool {
    matches!(value, Value::Object(_) | Value::Array(_))
}

/// The differences between `before` and `after` under `path`, parents before children; a value
/// that appears or goes (`null` on one side) lists its entries one by one.
fn diff(path: &str, before: &Value, after: &Value, out: &mut Vec<Step>) {
    match (before, after) {
        _ if before == after => {}
        (Value::Null, Value::Array(_)) => diff(path, &Value::Array(Vec::new()), after, out),
        (Value::Array(_), Value::Null) => diff(path, before, &Value::Array(Vec::new()), out),
        (Value::Null, Value::Object(_)) => diff(path, &Value::Object(Map::new()), after, out),
        (Value::Object(_), Value::Null) => diff(path, before, &Value::Object(Map::new()), out),
        (Value::Object(b), Value::Object(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                entry(&format!("{path}.{key}"), b.get(key), a.get(key), out);
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for i in 0..b.len().max(a.len()) {
                entry(&format!("{path}[{i}]"), b.get(i), a.get(i), out);
            }
        }
        _ => out.push(Step::Changed(path.into(), before.clone(), after.clone())),
    }
}

fn entry(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<Step>) {
    match (before, after) {
        (Some(b), Some(a)) => diff(path, b, a, out),
        (None, Some(a)) => out.push(Step::Added(path.into(), a.clone())),
        (Some(b), None) => out.push(Step::Removed(path.into(), b.clone())),
        (None, None) => {}
    }
}

fn steps(field: &str, before: &Value, after: &Value) -> Markup {
    let mut out = Vec::new();
    diff(field, before, after, &mut out);
    html! {
        ul.diff {
            @for step in &out {
                @match step {
                    Step::Added(path, value) => li.added { code { (path) } " added: " (shown(value)) },
                    Step::Removed(path, value) => li.removed { code { (path) } " removed: " (shown(value)) },
                    Step::Changed(path, before, after) => li.changed {
                        code { (path) } ": " (shown(before)) " → " (shown(after))
                    },
                }
            }
        }
    }
}

/// A value as a person reads it: text without quotes, nothing as "none", nested values as
/// indented JSON.
fn shown(value: &Value) -> Markup {
    match value {
        Value::Null => html! { span.hint { "none" } },
        Value::String(text) => html! { span.value { (text) } },
        Value::Object(_) | Value::Array(_) => {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
            html! { pre.value { (pretty) } }
        }
        other => html! { span.value { (other.to_string()) } },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn steps_of(before: Value, after: Value) -> Vec<Step> {
        let mut out = Vec::new();
        diff("rules", &before, &after, &mut out);
        out
    }

    #[test]
    fn a_nested_change_is_listed_per_key_and_index() {
        let before = json!([{"if": {"country": ["PT"]}, "then": {"url": "https://a.example/"}}]);
        let after = json!([
            {"if": {"country": ["PT", "BR"]}, "then": {"url": "https://a.example/"}},
            {"if": {}, "then": {"url": "https://b.example/"}}
        ]);
        assert_eq!(
            steps_of(before, after),
            vec![
                Step::Added("rules[0].if.country[1]".into(), json!("BR")),
                Step::Added(
                    "rules[1]".into(),
                    json!({"if": {}, "then": {"url": "https://b.example/"}})
                ),
            ]
        );
        assert_eq!(
            steps_of(json!({"url": "https://a.example/"}), Value::Null),
            vec![Step::Removed(
                "rules.url".into(),
                json!("https://a.example/")
            )]
        );
        assert_eq!(
            steps_of(json!({"weight": 1}), json!({"weight": 3})),
            vec![Step::Changed("rules.weight".into(), json!(1), json!(3))]
        );
    }

    #[test]
    fn json_kept_as_text_is_parsed_and_other_text_is_not() {
        let stored = json!(["[{\"if\":{}}]", "{not json"]);
        assert_eq!(
            before_after(&stored),
            (json!([{"if": {}}]), json!("{not json"))
        );
        let page = render(&json!({"rules": stored}).to_string()).into_string();
        assert!(!page.contains("\\&quot;"), "{page}");
    }
}

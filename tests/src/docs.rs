//! The Markdown side of the docs test (tests/tests/e2e/docs.rs, conventions in docs/DOCS-TESTS.md):
//! finding the fenced blocks of a page, splitting a shell block into steps with the output the
//! page shows for each, and checking a real output against a shown one by shape.

use serde_json::Value;
use std::collections::BTreeMap;

/// Fence labels whose blocks are shell commands, run by the docs test unless marked.
pub const SHELL_LABELS: [&str; 4] = ["sh", "bash", "shell", "console"];

/// The marker that keeps a block from running, on the line directly before its opening fence:
/// `<!-- docs-test: skip (reason) -->`.
const SKIP_OPEN: &str = "<!-- docs-test: skip (";
const SKIP_CLOSE: &str = ") -->";

/// One fenced block of a Markdown page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The 1-based line of the opening fence.
    pub line: usize,
    /// The fence's label (`sh`, `nginx`, ...); empty when the fence has none.
    pub label: String,
    /// The lines between the fences, without the fences' indentation.
    pub text: String,
    /// The reason of a skip marker directly before the fence.
    pub skip: Option<String>,
}

impl Block {
    pub fn is_shell(&self) -> bool {
        SHELL_LABELS.contains(&self.label.as_str())
    }
}

/// A line that is not a well-formed skip marker but starts like one (a typo would otherwise run
/// the block, or silently stop marking it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMarker {
    pub line: usize,
    pub text: String,
}

/// Every fenced block of `markdown` (``` or ~~~ fences, indented or not), in page order, and
/// every malformed skip marker.
pub fn blocks(markdown: &str) -> (Vec<Block>, Vec<BadMarker>) {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut bad = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("<!-- docs-test") && skip_reason(trimmed).is_none() {
            bad.push(BadMarker {
                line: i + 1,
                text: line.to_owned(),
            });
        }
        let Some((fence, label)) = opening_fence(trimmed) else {
            i += 1;
            continue;
        };
        let indent = line.len() - trimmed.len();
        let skip = i
            .checked_sub(1)
            .and_then(|prev| skip_reason(lines[prev].trim()));
        let mut end = i + 1;
        while end < lines.len() && !closes(lines[end].trim_start(), &fence) {
            end += 1;
        }
        let text = lines[i + 1..end.min(lines.len())]
            .iter()
            .map(|l| strip_indent(l, indent))
            .collect::<Vec<_>>()
            .join("\n");
        blocks.push(Block {
            line: i + 1,
            label,
            text,
            skip,
        });
        i = end + 1;
    }
    (blocks, bad)
}

/// The fence characters and the label of an opening fence line.
fn opening_fence(trimmed: &str) -> Option<(String, String)> {
    let ch = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let fence: String = trimmed.chars().take_while(|c| *c == ch).collect();
    if fence.len() < 3 {
        return None;
    }
    let label = trimmed[fence.len()..]
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    Some((fence, label))
}

fn closes(trimmed: &str, fence: &str) -> bool {
    let ch = fence.chars().next().unwrap_or('`');
    let run = trimmed.chars().take_while(|c| *c == ch).count();
    run >= fence.len() && trimmed[run..].trim().is_empty()
}

fn strip_indent(line: &str, indent: usize) -> &str {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    &line[spaces.min(indent)..]
}

/// The reason of `<!-- docs-test: skip (reason) -->`; `None` unless the marker is exactly that
/// with a reason of its own.
fn skip_reason(trimmed: &str) -> Option<String> {
    let reason = trimmed
        .strip_prefix(SKIP_OPEN)?
        .strip_suffix(SKIP_CLOSE)?
        .trim();
    (!reason.is_empty()).then(|| reason.to_owned())
}

/// A run of commands and the output the page shows for them (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The commands, as bash reads them.
    pub script: String,
    /// Each shown output line that is JSON, in order: checked against the command's output lines.
    pub shown: Vec<String>,
}

/// A shell block in steps. In `sh`/`bash`/`shell` blocks a comment line that starts with `{` or
/// `[` after the `#` is output: it ends the step before it. In `console` blocks commands start
/// with `$ ` (continued by a trailing `\`) and every other line is output; its JSON lines are
/// checked.
pub fn steps(block: &Block) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut script = String::new();
    let mut shown: Vec<String> = Vec::new();
    let console = block.label == "console";
    let mut continued = false;
    for line in block.text.lines() {
        let (command, output) = if console {
            match line.strip_prefix("$ ") {
                Some(command) => (Some(command), None),
                None if continued => (Some(line), None),
                None => (None, Some(line.trim())),
            }
        } else {
            match line.trim_start().strip_prefix('#').map(str::trim) {
                Some(rest) if rest.starts_with('{') || rest.starts_with('[') => (None, Some(rest)),
                _ => (Some(line), None),
            }
        };
        if let Some(command) = command {
            if !shown.is_empty() {
                steps.push(Step {
                    script: std::mem::take(&mut script),
                    shown: std::mem::take(&mut shown),
                });
            }
            continued = command.trim_end().ends_with('\\');
            script.push_str(command);
            script.push('\n');
        } else if let Some(output) = output {
            continued = false;
            if output.starts_with('{') || output.starts_with('[') {
                shown.push(output.to_owned());
            }
        }
    }
    if !script.trim().is_empty() || !shown.is_empty() {
        steps.push(Step { script, shown });
    }
    steps
}

/// A shown example value and the real one that takes its place in the rest of the page.
pub type Bindings = BTreeMap<String, String>;

/// Checks a command's real output against the JSON lines the page shows for it: the k-th shown
/// line against the k-th non-empty output line. Same JSON types and, for objects, the same keys;
/// an object or array written with `...` (or `…`) may hold more. Returns the string values shown
/// that differ from the real ones (the example code and its real counterpart, ...).
pub fn check_shape(shown: &[String], output: &str) -> Result<Bindings, String> {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut bindings = Bindings::new();
    for (k, shown) in shown.iter().enumerate() {
        let (expected, open) = parse_shown(shown)?;
        let line = lines
            .get(k)
            .ok_or_else(|| format!("shown output line {} ({shown}) has no real line", k + 1))?;
        let actual: Value = serde_json::from_str(line)
            .map_err(|e| format!("output line {} is not JSON ({e}): {line}", k + 1))?;
        compare(&expected, &actual, open, "$", &mut bindings)
            .map_err(|e| format!("{e}\n  shown: {shown}\n  real:  {line}"))?;
    }
    Ok(bindings)
}

/// The shown JSON with its ellipses removed, and whether it had any (then every object and array
/// in it may hold more than shown).
fn parse_shown(shown: &str) -> Result<(Value, bool), String> {
    let mut cleaned = String::with_capacity(shown.len());
    let mut open = false;
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = shown;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = c != '"' || escaped;
            escaped = c == '\\' && !escaped;
        } else if c == '"' {
            in_string = true;
        } else if let Some(after) = rest.strip_prefix("...").or_else(|| rest.strip_prefix('…')) {
            open = true;
            // Drop the comma that led to the ellipsis (or follows it, when it comes first).
            let trimmed = cleaned.trim_end();
            if trimmed.ends_with(',') {
                cleaned.truncate(trimmed.len() - 1);
                rest = after;
            } else {
                rest = after.trim_start().strip_prefix(',').unwrap_or(after);
            }
            continue;
        }
        cleaned.push(c);
        rest = &rest[c.len_utf8()..];
    }
    serde_json::from_str(&cleaned)
        .map(|value| (value, open))
        .map_err(|e| format!("the shown output is not JSON ({e}): {shown}"))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn compare(
    shown: &Value,
    real: &Value,
    open: bool,
    path: &str,
    bindings: &mut Bindings,
) -> Result<(), String> {
    match (shown, real) {
        (Value::Object(shown), Value::Object(real)) => {
            for (key, value) in shown {
                let inner = format!("{path}.{key}");
                let real_value = real
                    .get(key)
                    .ok_or_else(|| format!("{inner}: shown, but not in the output"))?;
                compare(value, real_value, open, &inner, bindings)?;
            }
            if !open {
                if let Some(extra) = real.keys().find(|k| !shown.contains_key(*k)) {
                    return Err(format!(
                        "{path}.{extra}: in the output, not shown (write `...` if the page shows a part)"
                    ));
                }
            }
            Ok(())
        }
        (Value::Array(shown), Value::Array(real)) => {
            if real.len() < shown.len() || (!open && real.len() != shown.len()) {
                return Err(format!(
                    "{path}: {} items shown, {} in the output",
                    shown.len(),
                    real.len()
                ));
            }
            for (i, (s, r)) in shown.iter().zip(real).enumerate() {
                compare(s, r, open, &format!("{path}[{i}]"), bindings)?;
            }
            Ok(())
        }
        (Value::String(s), Value::String(r)) => {
            if s != r {
                bindings.insert(s.clone(), r.clone());
            }
            Ok(())
        }
        (s, r) if type_name(s) == type_name(r) => Ok(()),
        (s, r) => Err(format!(
            "{path}: shown a {}, the output has a {} ({r})",
            type_name(s),
            type_name(r)
        )),
    }
}

/// `text` with every shown value replaced by its real one, longest first (a short URL holds the
/// code).
pub fn bind(text: &str, bindings: &Bindings) -> String {
    let mut pairs: Vec<_> = bindings.iter().collect();
    pairs.sort_by_key(|(shown, _)| std::cmp::Reverse(shown.len()));
    pairs
        .into_iter()
        .fold(text.to_owned(), |text, (shown, real)| {
            text.replace(shown.as_str(), real)
        })
}

/// `text` with each `:<default port>` (a port not followed by another digit) replaced by the
/// port the test stack listens on.
pub fn substitute_ports(text: &str, ports: &[(u16, u16)]) -> String {
    let mut out = text.to_owned();
    for (default, real) in ports {
        let needle = format!(":{default}");
        let mut result = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(at) = rest.find(&needle) {
            let after = &rest[at + needle.len()..];
            result.push_str(&rest[..at]);
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                result.push_str(&needle);
            } else {
                result.push_str(&format!(":{real}"));
            }
            rest = after;
        }
        result.push_str(rest);
        out = result;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "intro\n\n<!-- docs-test: skip (needs a public DNS name) -->\n```sh\ncurl https://s1.example/\n```\n\n  ```bash\n  key=1\n  curl -s http://127.0.0.1:8081/x\n  # {\"code\":\"k3Xq9aZ\",...}\n  curl -i http://localhost:8080/k3Xq9aZ\n  ```\n\n```\ndiagram\n```\n<!-- docs-test: skip () -->\n```nginx\nserver {}\n```\n";

    #[test]
    fn finds_blocks_labels_markers_and_bad_markers() {
        let (blocks, bad) = blocks(PAGE);
        let summary: Vec<_> = blocks
            .iter()
            .map(|b| (b.line, b.label.as_str(), b.skip.as_deref(), b.is_shell()))
            .collect();
        assert_eq!(
            summary,
            [
                (4, "sh", Some("needs a public DNS name"), true),
                (8, "bash", None, true),
                (15, "", None, false),
                (19, "nginx", None, false),
            ]
        );
        assert_eq!(blocks[1].text.lines().next(), Some("key=1"));
        assert_eq!(bad.len(), 1, "an empty reason is no marker: {bad:?}");
        assert_eq!(bad[0].line, 18);
    }

    #[test]
    fn a_shown_output_line_ends_a_step() {
        let (blocks, _) = blocks(PAGE);
        let steps = steps(&blocks[1]);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].script, "key=1\ncurl -s http://127.0.0.1:8081/x\n");
        assert_eq!(steps[0].shown, ["{\"code\":\"k3Xq9aZ\",...}"]);
        assert_eq!(steps[1].script, "curl -i http://localhost:8080/k3Xq9aZ\n");
        assert!(steps[1].shown.is_empty());
    }

    #[test]
    fn console_blocks_split_prompts_from_output() {
        let block = Block {
            line: 1,
            label: "console".into(),
            text: "$ curl -s \\\n  http://x/\n{\"a\":1}\nnot json\n$ echo hi\nhi".into(),
            skip: None,
        };
        let steps = steps(&block);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].script, "curl -s \\\n  http://x/\n");
        assert_eq!(steps[0].shown, ["{\"a\":1}"]);
        assert_eq!(steps[1].script, "echo hi\n");
    }

    #[test]
    fn shapes_match_on_keys_and_types_and_bind_example_values() {
        let shown = vec![
            r#"{"code":"k3Xq9aZ","short_url":"http://localhost:8080/k3Xq9aZ",...}"#.to_owned(),
        ];
        let real = r#"{"code":"Ab3dE9","short_url":"http://localhost:9/Ab3dE9","state":"active"}"#;
        let bindings = check_shape(&shown, real).unwrap();
        assert_eq!(bindings["k3Xq9aZ"], "Ab3dE9");
        assert_eq!(
            bind("curl http://localhost:8080/k3Xq9aZ", &bindings),
            "curl http://localhost:9/Ab3dE9"
        );

        // Without `...` the keys must be the same.
        let closed = vec![r#"{"code":"x"}"#.to_owned()];
        assert!(check_shape(&closed, real)
            .unwrap_err()
            .contains("$.short_url"));
        // A type that differs, a key that is missing, output that is no JSON.
        let typed = vec![r#"{"code":1,...}"#.to_owned()];
        assert!(check_shape(&typed, real).unwrap_err().contains("$.code"));
        let missing = vec![r#"{"id":"x",…}"#.to_owned()];
        assert!(check_shape(&missing, real).unwrap_err().contains("$.id"));
        assert!(check_shape(&closed, "curl: (3) URL malformed").is_err());
        // NDJSON: line by line, and each shown line needs a real one.
        let two = vec![r#"{"a":1}"#.to_owned(), r#"{"b":[1,...]}"#.to_owned()];
        assert!(check_shape(&two, "{\"a\":2}\n{\"b\":[3,4]}\n").is_ok());
        assert!(check_shape(&two, "{\"a\":2}\n").is_err());
        assert!(check_shape(&two, "{\"a\":2}\n{\"b\":[]}").is_err());
    }

    #[test]
    fn ports_are_replaced_only_whole() {
        let ports = [(8080, 41000), (8081, 41001)];
        assert_eq!(
            substitute_ports(
                "http://localhost:8080/a http://127.0.0.1:8081 x:80801",
                &ports
            ),
            "http://localhost:41000/a http://127.0.0.1:41001 x:80801"
        );
    }
}

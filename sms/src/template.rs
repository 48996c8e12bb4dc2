//! Message templates: `Hi {{name}}, 20% off today: {{link}} Reply STOP to end`.
//!
//! Syntax:
//! - `{{name}}` is replaced by the recipient's variable `name`. A name is an ASCII letter or `_`
//!   followed by ASCII letters, digits or `_`, at most [`MAX_NAME_LEN`] long.
//! - Spaces and tabs just inside the braces are allowed and ignored: `{{ name }}` is `{{name}}`
//!   (people write both; nothing else may stand there).
//! - `{{link}}` is reserved for the recipient's short link; it may appear any number of times.
//! - A single `{` or `}` is text. `{{` always opens a placeholder and `}}` outside one is an error:
//!   there is no escape for a literal `{{`, which no campaign needs.
//! - Values are inserted as they are: a value containing `{{x}}` is text, never expanded.
//!
//! Errors carry the character position (Unicode scalar values from 0) of the offending `{{`
//! or `}}`, and parsing reports every error, not only the first.

use crate::segments::{self, Measure, Options};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The placeholder for the recipient's short link.
pub const LINK: &str = "link";
/// Longest variable name.
pub const MAX_NAME_LEN: usize = 64;

/// Bounds that keep a hostile template or value from costing much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Characters of the template source.
    pub max_template_chars: usize,
    /// Placeholders in the template.
    pub max_placeholders: usize,
    /// Characters of one rendered message. The default, 1,530, is ten GSM-7 parts of 153.
    pub max_output_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_template_chars: 4_000,
            max_placeholders: 100,
            max_output_chars: 1_530,
        }
    }
}

/// Why a template was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("the template has {chars} characters; at most {max} are allowed")]
    TooLong { chars: usize, max: usize },
    #[error("the template has more than {max} placeholders")]
    TooManyPlaceholders { max: usize },
    #[error("`{{{{` at character {position} is not closed by `}}}}`")]
    Unclosed { position: usize },
    #[error("`}}}}` at character {position} closes no `{{{{`")]
    StrayClose { position: usize },
    #[error("the placeholder at character {position} has no name")]
    EmptyName { position: usize },
    #[error("the placeholder at character {position} has an invalid name {name:?} (letters, digits and `_`, not starting with a digit, at most 64)")]
    InvalidName { position: usize, name: String },
    #[error("the placeholder at character {position} names an unknown variable {name:?}")]
    UnknownVariable { position: usize, name: String },
}

/// Every error found in a template, in source order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateErrors(pub Vec<TemplateError>);

impl fmt::Display for TemplateErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TemplateErrors {}

/// Why one recipient's message could not be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("the recipient has no value for {name:?}")]
    MissingVariable { name: String },
    #[error("the message would be longer than {max} characters")]
    TooLong { max: usize },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    /// A byte range of the source.
    Text {
        start: usize,
        end: usize,
        chars: usize,
    },
    Variable(String),
    Link,
}

/// A parsed template, to render once per recipient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    source: String,
    pieces: Vec<Piece>,
    max_output_chars: usize,
}

/// The variables of one recipient.
pub trait Variables {
    fn get(&self, name: &str) -> Option<&str>;
}

impl<S: std::hash::BuildHasher> Variables for HashMap<String, String, S> {
    fn get(&self, name: &str) -> Option<&str> {
        HashMap::get(self, name).map(String::as_str)
    }
}

impl Variables for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        BTreeMap::get(self, name).map(String::as_str)
    }
}

impl Variables for [(&str, &str)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == name).map(|&(_, v)| v)
    }
}

impl<const N: usize> Variables for [(&str, &str); N] {
    fn get(&self, name: &str) -> Option<&str> {
        Variables::get(self.as_slice(), name)
    }
}

fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= MAX_NAME_LEN
}

/// What the placeholder `name` (trimmed) at character `position` stands for, or why it is refused.
fn placeholder(
    name: &str,
    position: usize,
    known: &impl Fn(&str) -> bool,
) -> Result<Piece, TemplateError> {
    if name.is_empty() {
        Err(TemplateError::EmptyName { position })
    } else if !valid_name(name) {
        Err(TemplateError::InvalidName {
            position,
            name: name.to_owned(),
        })
    } else if name == LINK {
        Ok(Piece::Link)
    } else if known(name) {
        Ok(Piece::Variable(name.to_owned()))
    } else {
        Err(TemplateError::UnknownVariable {
            position,
            name: name.to_owned(),
        })
    }
}

impl Template {
    /// Parses `source`, accepting `{{link}}` and the variables for which `known` is true.
    pub fn parse(
        source: &str,
        known: impl Fn(&str) -> bool,
        limits: &Limits,
    ) -> Result<Template, TemplateErrors> {
        let chars = source.chars().count();
        if chars > limits.max_template_chars {
            let e = TemplateError::TooLong {
                chars,
                max: limits.max_template_chars,
            };
            return Err(TemplateErrors(vec![e]));
        }
        let mut errors = Vec::new();
        let mut pieces = Vec::new();
        let mut placeholders = 0;
        // Walk by characters, keeping byte offsets for slicing and character positions for
        // errors; `text` is where the current literal run began.
        let mut it = source.char_indices().enumerate().peekable();
        let (mut text_start, mut text_chars) = (0, 0);
        while let Some((position, (at, c))) = it.next() {
            let doubled = |it: &mut std::iter::Peekable<_>, want: char| matches!(it.peek(), Some(&(_, (_, n))) if n == want);
            if c == '}' && doubled(&mut it, '}') {
                errors.push(TemplateError::StrayClose { position });
                it.next();
                text_chars += 2;
                continue;
            }
            if !(c == '{' && doubled(&mut it, '{')) {
                text_chars += 1;
                continue;
            }
            it.next();
            if text_chars > 0 {
                pieces.push(Piece::Text {
                    start: text_start,
                    end: at,
                    chars: text_chars,
                });
            }
            // Find the closing `}}`; a `{{` before it means this one is unclosed.
            let inner_start = at + 2;
            let rest = &source[inner_start..];
            let close = rest.find("}}");
            let reopen = rest.find("{{");
            let Some(close) = close.filter(|&c| reopen.is_none_or(|r| c < r)) else {
                errors.push(TemplateError::Unclosed { position });
                // Treat the `{{` as text and go on, to report what follows too.
                text_start = at;
                text_chars = 2;
                continue;
            };
            placeholders += 1;
            let name = rest[..close].trim_matches([' ', '\t']);
            match placeholder(name, position, &known) {
                Ok(piece) => pieces.push(piece),
                Err(error) => errors.push(error),
            }
            // Skip the inside and the `}}`.
            let end = inner_start + close + 2;
            while it.peek().is_some_and(|&(_, (b, _))| b < end) {
                it.next();
            }
            text_start = end;
            text_chars = 0;
        }
        if text_chars > 0 {
            pieces.push(Piece::Text {
                start: text_start,
                end: source.len(),
                chars: text_chars,
            });
        }
        if placeholders > limits.max_placeholders {
            errors.insert(
                0,
                TemplateError::TooManyPlaceholders {
                    max: limits.max_placeholders,
                },
            );
        }
        if !errors.is_empty() {
            return Err(TemplateErrors(errors));
        }
        Ok(Template {
            source: source.to_owned(),
            pieces,
            max_output_chars: limits.max_output_chars,
        })
    }

    /// Whether the template has a `{{link}}`.
    pub fn has_link(&self) -> bool {
        self.pieces.contains(&Piece::Link)
    }

    /// The variable names used, in order of first use, without `link`.
    pub fn variables(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in &self.pieces {
            if let Piece::Variable(name) = p {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// Renders for one recipient into `out` (cleared first), refusing output longer than the
    /// limit before building it.
    pub fn render_into<V: Variables + ?Sized>(
        &self,
        variables: &V,
        link: &str,
        out: &mut String,
    ) -> Result<(), RenderError> {
        self.render_with(
            variables,
            out,
            |out| out.push_str(link),
            link.chars().count(),
        )
    }

    /// Renders for one recipient.
    pub fn render<V: Variables + ?Sized>(
        &self,
        variables: &V,
        link: &str,
    ) -> Result<String, RenderError> {
        let mut out = String::new();
        self.render_into(variables, link, &mut out)?;
        Ok(out)
    }

    /// The numbers for one recipient when only the length of the link is known (a dry run
    /// before the links exist). Exact when the link is made of default-alphabet characters
    /// outside the extension table, as shortlink's links are (`https`, a host name, `/`, a
    /// base62 code or an alias of `[A-Za-z0-9_-]`); `scratch` is reused between calls.
    pub fn measure_with_link_len<V: Variables + ?Sized>(
        &self,
        variables: &V,
        link_len: usize,
        options: &Options,
        scratch: &mut String,
    ) -> Result<Measure, RenderError> {
        let fill = |out: &mut String| out.extend(std::iter::repeat_n('x', link_len));
        self.render_with(variables, scratch, fill, link_len)?;
        Ok(segments::measure(scratch, options))
    }

    fn render_with<V: Variables + ?Sized>(
        &self,
        variables: &V,
        out: &mut String,
        link: impl Fn(&mut String),
        link_chars: usize,
    ) -> Result<(), RenderError> {
        out.clear();
        let max = self.max_output_chars;
        let too_long = || RenderError::TooLong { max };
        let mut chars = 0usize;
        for piece in &self.pieces {
            match piece {
                Piece::Text {
                    start,
                    end,
                    chars: n,
                } => {
                    chars += n;
                    if chars > max {
                        return Err(too_long());
                    }
                    out.push_str(&self.source[*start..*end]);
                }
                Piece::Variable(name) => {
                    let value = variables
                        .get(name)
                        .ok_or_else(|| RenderError::MissingVariable { name: name.clone() })?;
                    // Count the value's characters only up to one past the room left, so a huge
                    // value costs no more than the limit to refuse.
                    chars += value.chars().take(max + 1 - chars).count();
                    if chars > max {
                        return Err(too_long());
                    }
                    out.push_str(value);
                }
                Piece::Link => {
                    chars += link_chars;
                    if chars > max {
                        return Err(too_long());
                    }
                    link(out);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Encoding;

    fn known(names: &'static [&'static str]) -> impl Fn(&str) -> bool {
        move |n| names.contains(&n)
    }

    fn parse(src: &str) -> Result<Template, TemplateErrors> {
        Template::parse(
            src,
            known(&["name", "city", "first_name"]),
            &Limits::default(),
        )
    }

    fn errors(src: &str) -> Vec<TemplateError> {
        parse(src).unwrap_err().0
    }

    #[test]
    fn renders_the_issue_example() {
        let t = parse("Hi {{name}}, 20% off today: {{link}} Reply STOP to end").unwrap();
        assert!(t.has_link());
        assert_eq!(t.variables(), vec!["name"]);
        let out = t
            .render(&[("name", "Ann")], "https://s.ex/Ab3dE9x")
            .unwrap();
        assert_eq!(
            out,
            "Hi Ann, 20% off today: https://s.ex/Ab3dE9x Reply STOP to end"
        );
    }

    #[test]
    fn whitespace_inside_braces_is_ignored_and_single_braces_are_text() {
        let t = parse("{{ name }}/{{\tcity\t}} {x} }{ {{link}}").unwrap();
        let vars = BTreeMap::from([
            ("name".to_owned(), "A".to_owned()),
            ("city".to_owned(), "B".to_owned()),
        ]);
        assert_eq!(t.render(&vars, "L").unwrap(), "A/B {x} }{ L");
        assert_eq!(
            parse("no placeholders").unwrap().render(&[], "").unwrap(),
            "no placeholders"
        );
        assert_eq!(parse("").unwrap().render(&[], "").unwrap(), "");
    }

    #[test]
    fn values_are_not_expanded() {
        let t = parse("{{name}}").unwrap();
        assert_eq!(t.render(&[("name", "{{city}}")], "").unwrap(), "{{city}}");
    }

    #[test]
    fn errors_carry_character_positions() {
        assert_eq!(
            errors("Hi {{name"),
            vec![TemplateError::Unclosed { position: 3 }]
        );
        assert_eq!(
            errors("é {{name {{city}}"),
            vec![TemplateError::Unclosed { position: 2 }]
        );
        assert_eq!(
            errors("Hi name}} x"),
            vec![TemplateError::StrayClose { position: 7 }]
        );
        assert_eq!(
            errors("ж{{}}"),
            vec![TemplateError::EmptyName { position: 1 }]
        );
        assert_eq!(
            errors("{{  }}"),
            vec![TemplateError::EmptyName { position: 0 }]
        );
        assert_eq!(
            errors("{{1st}} {{a b}} {{na-me}}"),
            vec![
                TemplateError::InvalidName {
                    position: 0,
                    name: "1st".into()
                },
                TemplateError::InvalidName {
                    position: 8,
                    name: "a b".into()
                },
                TemplateError::InvalidName {
                    position: 16,
                    name: "na-me".into()
                },
            ]
        );
        assert_eq!(
            errors("Hi {{nmae}}, {{link}} {{zip}}"),
            vec![
                TemplateError::UnknownVariable {
                    position: 3,
                    name: "nmae".into()
                },
                TemplateError::UnknownVariable {
                    position: 22,
                    name: "zip".into()
                },
            ]
        );
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert!(matches!(
            &errors(&format!("{{{{{long}}}}}"))[..],
            [TemplateError::InvalidName { .. }]
        ));
        assert_eq!(
            TemplateErrors(errors("{{x}} }}")).to_string(),
            "the placeholder at character 0 names an unknown variable \"x\"; `}}` at character 6 closes no `{{`"
        );
    }

    #[test]
    fn hostile_templates_are_refused() {
        let limits = Limits::default();
        let huge = "a".repeat(limits.max_template_chars + 1);
        assert_eq!(
            errors(&huge),
            vec![TemplateError::TooLong {
                chars: 4_001,
                max: 4_000
            }]
        );
        let many = "{{name}}".repeat(limits.max_placeholders + 1);
        assert_eq!(
            errors(&many),
            vec![TemplateError::TooManyPlaceholders { max: 100 }]
        );
        let ok = "{{name}}".repeat(limits.max_placeholders);
        let t = parse(&ok).unwrap();
        // 100 copies of a 1,000-character value: refused without building 100,000 characters.
        let value = "v".repeat(1_000);
        assert_eq!(
            t.render(&[("name", value.as_str())], ""),
            Err(RenderError::TooLong { max: 1_530 })
        );
        let t = parse("{{name}}{{link}}").unwrap();
        assert_eq!(
            t.render(&[("name", "a".repeat(1_530).as_str())], ""),
            Ok("a".repeat(1_530))
        );
        assert!(t
            .render(&[("name", "a".repeat(1_530).as_str())], "L")
            .is_err());
        assert!(t
            .render(&[("name", "ж".repeat(1_531).as_str())], "")
            .is_err());
    }

    #[test]
    fn missing_values_are_per_recipient_errors() {
        let t = parse("Hi {{first_name}}").unwrap();
        assert_eq!(
            t.render(&[("name", "x")], ""),
            Err(RenderError::MissingVariable {
                name: "first_name".into()
            })
        );
        assert_eq!(t.render(&[("first_name", "")], "").unwrap(), "Hi ");
    }

    #[test]
    fn dry_run_matches_the_real_render() {
        let t = parse("Hi {{name}}, 20% off today: {{link}} Reply STOP to end").unwrap();
        let options = Options::default();
        let mut scratch = String::new();
        for name in ["Ann", "Zoë", "Łukasz", &"Bartholomew".repeat(12)] {
            let vars = [("name", name)];
            let link = "https://s.example/Ab3dE9x";
            let real = segments::measure(&t.render(&vars, link).unwrap(), &options);
            let dry = t
                .measure_with_link_len(&vars, link.len(), &options, &mut scratch)
                .unwrap();
            assert_eq!(real, dry, "{name}");
        }
        let ann = t
            .measure_with_link_len(&[("name", "Ann")], 25, &options, &mut scratch)
            .unwrap();
        assert_eq!(
            (ann.encoding, ann.units, ann.segments),
            (Encoding::GSM7, 66, 1)
        );
    }
}

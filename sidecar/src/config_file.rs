//! The TOML configuration file (`--config`, `SHORTLINK_CONFIG`): the same settings as the flags,
//! each key named as its flag with `_` for `-` (`database_url = "sqlite:///..."`). Precedence:
//! flags, then environment, then the file, then the defaults. Every problem in a file is reported
//! at once, each with the file, line and key, and nothing starts until the file is right.

use crate::cli::Cli;
use clap::builder::ArgAction;
use clap::parser::ValueSource;
use clap::{Arg, CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The argument naming the file; it cannot be set from inside the file.
const CONFIG_ARG: &str = "config_file";

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem found in a configuration file (at least one).
#[derive(Debug)]
pub struct FileError(pub Vec<Problem>);

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        write!(
            f,
            "{count} problem{} in the configuration file:",
            if count == 1 { "" } else { "s" }
        )?;
        for problem in &self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FileError {}

/// A setting read from the file, checked, as the flag's text.
struct Setting {
    id: String,
    long: String,
    text: String,
    is_switch: bool,
}

/// Parses `args` (the program name first), the environment and the configuration file they name.
/// A command-line error exits as clap does; a file's problems come back all together.
pub fn parse_from<I, T>(args: I) -> Result<Cli, FileError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let command = Cli::command();
    let matches = command
        .clone()
        .try_get_matches_from(&args)
        .unwrap_or_else(|e| e.exit());
    let Some(path) = matches.get_one::<PathBuf>(CONFIG_ARG).cloned() else {
        return Ok(Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()));
    };
    let settings = read(&path, &command)?;
    // Only what neither a flag nor the environment set: those win over the file.
    let mut merged = vec![args[0].clone()];
    for setting in settings {
        let from_file = matches!(
            matches.value_source(&setting.id),
            None | Some(ValueSource::DefaultValue)
        );
        if !from_file {
            continue;
        }
        if setting.is_switch {
            if setting.text == "true" {
                merged.push(format!("--{}", setting.long).into());
            }
        } else {
            merged.push(format!("--{}={}", setting.long, setting.text).into());
        }
    }
    merged.extend(args.into_iter().skip(1));
    Ok(Cli::try_parse_from_merged(merged))
}

impl Cli {
    fn try_parse_from_merged(args: Vec<OsString>) -> Cli {
        let matches = Cli::command()
            .try_get_matches_from(args)
            .unwrap_or_else(|e| e.exit());
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

/// Reads and checks every key of the file at `path`.
fn read(path: &Path, command: &clap::Command) -> Result<Vec<Setting>, FileError> {
    let problem = |line: Option<usize>, key: Option<&str>, message: String| Problem {
        file: path.to_owned(),
        line,
        key: key.map(str::to_owned),
        message,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| FileError(vec![problem(None, None, format!("cannot read it: {e}"))]))?;
    let document = text.parse::<toml_edit::Document<String>>().map_err(|e| {
        let line = e.span().map(|span| line_of(&text, span.start));
        FileError(vec![problem(
            line,
            None,
            format!("not valid TOML: {}", e.message()),
        )])
    })?;

    let settings_args: Vec<&Arg> = command
        .get_arguments()
        .filter(|arg| arg.is_global_set() && arg.get_id() != CONFIG_ARG)
        .collect();
    let mut settings = Vec::new();
    let mut problems = Vec::new();
    for (key, item) in document.as_table().iter() {
        let line = document
            .as_table()
            .key(key)
            .and_then(|key| key.span())
            .map(|span| line_of(&text, span.start));
        let Some(arg) = settings_args.iter().find(|arg| arg.get_id() == key) else {
            let hint = if key == CONFIG_ARG || key == "config" {
                "the file cannot name another file".to_owned()
            } else {
                match closest(key, settings_args.iter().map(|arg| arg.get_id().as_str())) {
                    Some(near) => format!("unknown key; did you mean `{near}`?"),
                    None => "unknown key; the keys are the flags of `shortlink-sidecar --help` with `_` for `-`".to_owned(),
                }
            };
            problems.push(problem(line, Some(key), hint));
            continue;
        };
        match check(command, arg, item) {
            Ok(setting) => settings.push(setting),
            Err(message) => problems.push(problem(line, Some(key), message)),
        }
    }
    if problems.is_empty() {
        Ok(settings)
    } else {
        Err(FileError(problems))
    }
}

/// The value of `item` for `arg` as its flag would take it, checked by the flag's own parser.
fn check(command: &clap::Command, arg: &Arg, item: &toml_edit::Item) -> Result<Setting, String> {
    let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
    let value = item
        .as_value()
        .ok_or_else(|| "expected a value, not a table".to_owned())?;
    let text = match value {
        toml_edit::Value::Boolean(b) => b.value().to_string(),
        _ if is_switch => return Err("expected true or false".to_owned()),
        toml_edit::Value::String(s) => s.value().clone(),
        toml_edit::Value::Integer(i) => i.value().to_string(),
        toml_edit::Value::Array(array) => {
            if arg.get_value_delimiter().is_none() {
                return Err("expected a single value, not a list".to_owned());
            }
            let items: Option<Vec<&str>> = array.iter().map(|v| v.as_str()).collect();
            let items = items.ok_or_else(|| "expected a list of strings".to_owned())?;
            if let Some(bad) = items.iter().find(|item| item.contains(',')) {
                return Err(format!("{bad:?}: a list item cannot contain a comma"));
            }
            items.join(",")
        }
        toml_edit::Value::Float(_) => {
            return Err("expected a whole number or a string, not a decimal".to_owned())
        }
        toml_edit::Value::Datetime(_) => {
            return Err("expected a string (a duration is written \"7d\", \"1h\")".to_owned())
        }
        toml_edit::Value::InlineTable(_) => return Err("expected a value, not a table".to_owned()),
    };
    if !is_switch {
        // The flag's own parser (clap keeps value parsers to itself): parse this one flag alone.
        let flag = format!("--{}={text}", arg.get_long().unwrap_or_default());
        command
            .clone()
            .try_get_matches_from(["shortlink-sidecar", flag.as_str()])
            .map_err(|e| clap_message(&e))?;
    }
    Ok(Setting {
        id: arg.get_id().to_string(),
        long: arg.get_long().unwrap_or_default().to_owned(),
        text,
        is_switch,
    })
}

/// clap's message for a bad value without its `error:` prefix and usage lines.
fn clap_message(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.trim_start_matches("error: ").to_owned()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The known key nearest to `key` (at most two edits away), for typos.
fn closest<'a>(key: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known
        .map(|candidate| (distance(key, candidate), candidate))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, candidate)| candidate)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            previous = current;
        }
    }
    row[b.len()]
}

//! `conversions import <file.ndjson>`: conversions from a file (one JSON object a line, as
//! `POST /api/v1/conversions` takes them), through the API's own path, answered line by line
//! on stdout as the API answers an NDJSON batch. Safe to run again: a line already stored
//! answers as a duplicate (its `event_id`).

use super::error::BoxError;
use super::workspaces::WorkspaceArg;
use crate::config::Config;
use std::io::{BufRead, Write};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum ConversionsCommand {
    /// Record conversions from an NDJSON file (`-` for stdin); prints one answer line each.
    Import {
        file: PathBuf,
        /// The workspace whose clicks the conversions name.
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
}

pub async fn run(config: &Config, command: ConversionsCommand) -> Result<(), BoxError> {
    let ConversionsCommand::Import { file, workspace } = command;
    let state = crate::build_state(config).await?;
    let workspace = workspace.resolve(state.links.storage().as_ref()).await?.id;
    let input: Box<dyn BufRead> = match file.to_str() {
        Some("-") => Box::new(std::io::stdin().lock()),
        _ => Box::new(std::io::BufReader::new(std::fs::File::open(&file)?)),
    };
    let mut stdout = std::io::stdout().lock();
    let (mut index, mut refused) = (0, 0);
    let mut out = Vec::new();
    for line in input.split(b'\n') {
        let line = line?;
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        out.clear();
        let status =
            crate::http::conversions::answer_line(&state, workspace, index, text, &mut out).await?;
        if status >= 300 {
            refused += 1;
        }
        stdout.write_all(&out)?;
        index += 1;
    }
    stdout.flush()?;
    eprintln!("conversions import: {index} lines, {refused} refused");
    match refused {
        0 => Ok(()),
        n => Err(format!("{n} of {index} conversions refused (see their lines)").into()),
    }
}

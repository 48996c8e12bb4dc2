//! `conversions import <file.ndjson>`: conversions from a file (one JSON object a line, as
//! `POST /api/v1/conversions` takes them), through the API's own path, answered line by line
//! on stdout as the API answers an NDJSON batch. Safe to run again: a line already stored
//! answers as a duplicate (its `event_id`).

use super::error::BoxError;
use super::workspaces::WorkspaceArg;
use shortlink_config::Config;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Lines recorded together.
const CHUNK: usize = 2000;

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
    let (mut index, mut refused) = (0i64, 0);
    let mut out = Vec::new();
    let mut pending: Vec<Vec<u8>> = Vec::with_capacity(CHUNK);
    let mut lines = input.split(b'\n');
    loop {
        let line = lines.next().transpose()?;
        if let Some(line) = &line {
            let text = line.trim_ascii();
            if !text.is_empty() {
                pending.push(text.to_vec());
            }
        }
        if pending.len() == CHUNK || (line.is_none() && !pending.is_empty()) {
            out.clear();
            let texts: Vec<&[u8]> = pending.iter().map(Vec::as_slice).collect();
            let statuses = shortlink_api::conversions::answer_lines(
                &state, workspace, index, &texts, &mut out,
            )
            .await?;
            refused += statuses.iter().filter(|status| **status >= 300).count();
            index += statuses.len() as i64;
            stdout.write_all(&out)?;
            pending.clear();
        }
        if line.is_none() {
            break;
        }
    }
    stdout.flush()?;
    eprintln!("conversions import: {index} lines, {refused} refused");
    match refused {
        0 => Ok(()),
        n => Err(format!("{n} of {index} conversions refused (see their lines)").into()),
    }
}

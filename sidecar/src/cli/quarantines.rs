//! `shortlink-sidecar quarantines`: the operator's view of the links threat feeds quarantined
//! (issue 79), and their release, in any workspace; and the visitors' abuse reports.

use super::workspaces::WorkspaceArg;
use super::BoxError;
use clap::Subcommand;
use shortlink_config::Config;
use shortlink_store::audit::{Actor, Origin};

#[derive(Debug, Subcommand)]
pub enum QuarantinesCommand {
    /// A workspace's quarantined links, held and released: code, feed, entry, since when, and
    /// who released it.
    List {
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
    /// Let a quarantined link answer again (audited `link.released`, actor `cli`); the feed
    /// entry that listed it does not quarantine it again while the feed keeps it.
    Release {
        /// The link's code (whichever workspace owns it).
        code: String,
    },
}

/// The operator's queue of abuse reports, newest first, one a line: time, host, code.
pub async fn abuse_reports(config: &Config, limit: u32) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    for report in storage.abuse_reports(limit).await? {
        let at = report.reported_at.to_rfc3339();
        println!("{at}\t{}\t{}", report.host, report.code);
    }
    Ok(())
}

pub async fn run(config: &Config, command: QuarantinesCommand) -> Result<(), BoxError> {
    let state = crate::build_state(config).await?;
    match command {
        QuarantinesCommand::List { workspace } => {
            let storage = state.links.storage();
            let workspace = workspace.resolve(storage.as_ref()).await?;
            for q in state.links.quarantines(workspace.id).await? {
                let released = match (q.released_at, q.released_by) {
                    (Some(at), by) => {
                        format!("released {} by {}", at.to_rfc3339(), by.unwrap_or_default())
                    }
                    (None, _) => "held".to_owned(),
                };
                let since = q.quarantined_at.to_rfc3339();
                println!("{}\t{}\t{}\t{since}\t{released}", q.code, q.feed, q.entry);
            }
            Ok(())
        }
        QuarantinesCommand::Release { code } => {
            let origin = Origin::new(Actor::cli());
            let link = state.links.release(None, &code, &origin).await?;
            println!("{} answers again", link.code);
            Ok(())
        }
    }
}

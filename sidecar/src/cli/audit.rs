//! `audit verify`: checks every audit chain (or one workspace's) and exits non-zero on the
//! first broken row of any.

use super::BoxError;
use shortlink_config::Config;
use shortlink_store::audit;
use shortlink_store::Storage;

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Walk each workspace's chain from its retention anchor: report the first row deleted,
    /// edited or inserted in SQL, and how many rows were checked; exits 1 if any chain is broken.
    Verify {
        /// Only this workspace's chain.
        #[arg(long)]
        workspace: Option<i64>,
    },
}

pub async fn run(config: &Config, command: AuditCommand) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    match command {
        AuditCommand::Verify { workspace } => verify(storage.as_ref(), workspace).await,
    }
}

async fn verify(storage: &dyn Storage, workspace: Option<i64>) -> Result<(), BoxError> {
    let reports = audit::verify(storage, workspace).await?;
    if reports.is_empty() {
        return Err(match workspace {
            Some(id) => format!("workspace {id} has no audit chain").into(),
            None => "no audit chain".into(),
        });
    }
    let (mut checked, mut broken) = (0, 0);
    for report in &reports {
        checked += report.rows_checked;
        let from = match report.anchor_seq {
            0 => String::new(),
            anchor => format!(" after the retention anchor (row {anchor})"),
        };
        match &report.problem {
            None => println!(
                "workspace {}: {} rows checked{from}: sound",
                report.workspace_id, report.rows_checked
            ),
            Some(problem) => {
                broken += 1;
                println!(
                    "workspace {}: {} rows checked{from}, then: {problem}",
                    report.workspace_id, report.rows_checked
                );
            }
        }
    }
    println!("{checked} rows checked in {} chains", reports.len());
    match broken {
        0 => Ok(()),
        n => Err(format!("{n} of {} audit chains are broken", reports.len()).into()),
    }
}

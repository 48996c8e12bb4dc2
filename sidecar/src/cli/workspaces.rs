//! `workspaces create|list|rename|suspend|resume|delete`: the brands or clients an installation
//! serves (the operator's side of `/api/v1/workspaces`), and `--workspace` for the commands that
//! act in one.

use super::BoxError;
use shortlink_config::Config;
use shortlink_core::service::keys::MAX_RATE;
use shortlink_store::audit::{Actor, Origin};
use shortlink_store::{self, Quotas, Storage, Workspace, WorkspaceChange, DEFAULT_SLUG};

/// The workspace a command acts in.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WorkspaceArg {
    /// The workspace's slug (default: `default`, the one every installation has).
    #[arg(long = "workspace", value_name = "SLUG")]
    slug: Option<String>,
}

impl WorkspaceArg {
    /// Whether `--workspace` was given.
    pub fn named(&self) -> bool {
        self.slug.is_some()
    }

    /// The workspace named, which must exist.
    pub async fn resolve(&self, storage: &dyn Storage) -> Result<Workspace, BoxError> {
        let slug = self.slug.as_deref().unwrap_or(DEFAULT_SLUG);
        find(storage, slug).await
    }
}

async fn find(storage: &dyn Storage, slug: &str) -> Result<Workspace, BoxError> {
    (storage.workspace_by_slug(slug).await?)
        .ok_or_else(|| format!("no workspace has the slug {slug:?} (see `workspaces list`)").into())
}

#[derive(Debug, clap::Subcommand)]
pub enum WorkspacesCommand {
    /// Create a workspace; map its short domains to its slug in nginx's `domains.conf`.
    Create {
        /// 1 to 32 of a-z, 0-9 and '-': what nginx's host map and the link records name.
        slug: String,
        /// What people see (default: the slug).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// List the workspaces.
    List,
    /// Change what people see; the slug never changes.
    Rename { slug: String, name: String },
    /// Set the workspace's quotas (a quota left out takes the installation's default).
    Quotas {
        slug: String,
        #[command(flatten)]
        quotas: QuotaArgs,
    },
    /// Refuse the workspace's keys; its links keep answering.
    Suspend { slug: String },
    /// Accept the workspace's keys again.
    Resume { slug: String },
    /// Delete the workspace with its links (they stop answering), keys and webhooks.
    Delete {
        slug: String,
        /// Required: the links go for good.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct QuotaArgs {
    /// Links the workspace may create per UTC day.
    #[arg(long)]
    links_per_day: Option<u64>,
    /// Recipients one compose may have.
    #[arg(long)]
    compose_recipients: Option<u64>,
    /// Webhook subscriptions the workspace may have (not `--webhooks`: that is the global
    /// setting turning deliveries on or off).
    #[arg(long = "webhook-subscriptions", id = "webhook_subscriptions")]
    webhooks: Option<u64>,
    /// The highest request rate (per second) an admin may give a key of the workspace, and what
    /// every key of it is held to (1 to 1000000, core's `keys::MAX_RATE`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_RATE))]
    key_rate_per_second: Option<u64>,
    /// The highest burst likewise.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_RATE))]
    key_rate_burst: Option<u64>,
}

impl From<QuotaArgs> for Quotas {
    fn from(args: QuotaArgs) -> Self {
        Quotas {
            links_per_day: args.links_per_day,
            compose_recipients: args.compose_recipients,
            webhooks: args.webhooks,
            key_rate_per_second: args.key_rate_per_second,
            key_rate_burst: args.key_rate_burst,
        }
    }
}

pub async fn run(config: &Config, command: WorkspacesCommand) -> Result<(), BoxError> {
    match command {
        WorkspacesCommand::Create { slug, name, quotas } => {
            let state = crate::build_state(config).await?;
            let name = name.unwrap_or_else(|| slug.clone());
            let created = (state.links)
                .create_workspace(&slug, &name, quotas.into(), &cli_origin())
                .await?;
            println!("created workspace {} ({:?})", created.slug, created.name);
        }
        WorkspacesCommand::List => {
            let storage = crate::open_storage(config).await?;
            println!("{:>6}  {:<32}  {:<9}  name", "id", "slug", "state");
            for workspace in storage.workspaces().await? {
                let state = match workspace.suspended_at {
                    Some(_) => "suspended",
                    None => "active",
                };
                println!(
                    "{:>6}  {:<32}  {state:<9}  {}",
                    workspace.id, workspace.slug, workspace.name
                );
            }
        }
        WorkspacesCommand::Rename { slug, name } => {
            change(config, &slug, |change| change.name = Some(name)).await?;
        }
        WorkspacesCommand::Quotas { slug, quotas } => {
            change(config, &slug, |change| change.quotas = Some(quotas.into())).await?;
        }
        WorkspacesCommand::Suspend { slug } => {
            let now = shortlink_store::now();
            change(config, &slug, |change| {
                change.suspended_at = Some(Some(now))
            })
            .await?;
        }
        WorkspacesCommand::Resume { slug } => {
            change(config, &slug, |change| change.suspended_at = Some(None)).await?;
        }
        WorkspacesCommand::Delete { slug, yes } => {
            if !yes {
                return Err("deleting a workspace deletes its links for good: add --yes".into());
            }
            let state = crate::build_state(config).await?;
            let workspace = find(state.links.storage().as_ref(), &slug).await?;
            let deleted = (state.links)
                .delete_workspace(workspace.id, &cli_origin())
                .await?;
            println!(
                "deleted workspace {slug}: {} links, {} keys, {} webhooks",
                deleted.links, deleted.keys, deleted.webhooks
            );
        }
    }
    Ok(())
}

async fn change(
    config: &Config,
    slug: &str,
    edit: impl FnOnce(&mut WorkspaceChange),
) -> Result<(), BoxError> {
    let state = crate::build_state(config).await?;
    let workspace = find(state.links.storage().as_ref(), slug).await?;
    let mut change = WorkspaceChange::default();
    edit(&mut change);
    let changed = (state.links)
        .change_workspace(workspace.id, &change, &cli_origin())
        .await?;
    println!("changed workspace {} ({:?})", changed.slug, changed.name);
    Ok(())
}

/// The command line as an audit row's actor.
pub(super) fn cli_origin() -> Origin {
    Origin::new(Actor::cli())
}

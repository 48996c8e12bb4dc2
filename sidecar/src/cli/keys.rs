//! `keys create|list|revoke`: API keys, each acting in one workspace (an operator's in none).

use super::workspaces::{cli_origin, WorkspaceArg};
use super::BoxError;
use shortlink_config::Config;
use shortlink_core::service::keys::{self, NewKey};
use shortlink_store::Role;

#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (on stdout, once: only its hash is stored).
    Create {
        /// What the key is for, e.g. the campaign tool using it.
        #[arg(long)]
        name: String,
        /// `admin`: every route of its workspace; `issuer`: links; `viewer`: reads;
        /// `resolve`: only `GET /api/v1/resolve/{code}` (nginx's fallback); `operator`: the
        /// workspaces themselves, and nothing in them.
        #[arg(long, value_enum, default_value_t = Role::Admin)]
        role: Role,
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
    /// List keys (never the keys themselves), of every workspace.
    List,
    /// Revoke a key by id; requests with it are refused from then on.
    Revoke {
        /// The id shown by `keys list`.
        id: i64,
    },
}

pub async fn run(config: &Config, command: KeysCommand) -> Result<(), BoxError> {
    let storage = crate::open_storage(config).await?;
    match command {
        KeysCommand::Create {
            name,
            role,
            workspace,
        } => {
            let name = name.trim();
            if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
                return Err("--name must be 1 to 200 printable characters".into());
            }
            let workspace = match role {
                Role::Operator if workspace.named() => {
                    return Err(
                        "an operator key acts in no workspace: leave out --workspace".into(),
                    )
                }
                Role::Operator => None,
                _ => Some(workspace.resolve(storage.as_ref()).await?),
            };
            let key = shortlink_api::generate_api_key()?;
            let new = NewKey {
                name,
                role,
                workspace: workspace.as_ref().map(|workspace| workspace.id),
                rate: None,
            };
            let created = keys::create(
                storage.as_ref(),
                new,
                &shortlink_api::hash_api_key(&key),
                &cli_origin(),
            )
            .await?;
            let place = workspace.map_or_else(String::new, |workspace| {
                format!(" in workspace {:?}", workspace.slug)
            });
            eprintln!(
                "created API key {} ({:?}, role {}{place}: it {}); it is shown only this once:",
                created.id,
                created.name,
                created.role,
                created.role.scope()
            );
            println!("{key}");
        }
        KeysCommand::List => {
            println!(
                "{:>6}  {:<8}  {:<32}  {:<27}  {:<27}  name",
                "id", "role", "workspace", "created", "revoked"
            );
            for key in storage.list_api_keys(None).await? {
                println!(
                    "{:>6}  {:<8}  {:<32}  {:<27}  {:<27}  {}",
                    key.id,
                    key.role.as_str(),
                    key.workspace.map_or_else(|| "-".to_owned(), |w| w.slug),
                    key.created_at.to_rfc3339(),
                    key.revoked_at
                        .map_or_else(|| "-".to_owned(), |at| at.to_rfc3339()),
                    key.name
                );
            }
        }
        KeysCommand::Revoke { id } => {
            match keys::revoke(storage.as_ref(), None, id, &cli_origin()).await? {
                Some(key) => println!("revoked API key {} ({:?})", key.id, key.name),
                None => return Err(format!("no API key has id {id}").into()),
            }
        }
    }
    Ok(())
}

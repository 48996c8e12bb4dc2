//! Subcommands: `serve` (default), `keys create|list|revoke`, `workspaces …`, `import`, `export`,
//! `compose`, `resync`, `migrate`, `backup`, `code-scheme show|adopt`, `audit verify`, `conversions import`.

pub(crate) mod audit;
mod backup;
mod check;
mod code_scheme;
mod compose;
mod conversions;
pub(crate) mod error;
mod export;
mod format;
pub(crate) mod import;
mod keys;
pub mod orphans;
mod progress;
mod quarantines;
mod resync;
mod visits;
mod workspaces;

use crate::Application;
use shortlink_config::Config;
use std::io::Write;

pub use audit::AuditCommand;
pub use backup::BackupArgs;
pub use check::problems as config_problems;
pub use code_scheme::CodeSchemeCommand;
pub use compose::ComposeArgs;
pub use conversions::ConversionsCommand;
pub use export::ExportArgs;
pub use import::verify::VerifyArgs;
pub use import::ImportArgs;
pub use keys::KeysCommand;
pub use resync::ResyncArgs;
pub use workspaces::{WorkspaceArg, WorkspacesCommand};

pub use error::BoxError;

#[derive(Debug, clap::Parser)]
#[command(
    name = "shortlink-sidecar",
    version,
    about = "Issues short links for the shortlink nginx module."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: Config,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the HTTP API (the default).
    Serve,
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Manage workspaces (the brands or clients this installation serves).
    Workspaces {
        #[command(subcommand)]
        command: WorkspacesCommand,
    },
    /// Create links from our own CSV or NDJSON file, or move another shortener's links here
    /// (`--from yourls|shlink|kutt|bitly|csv`, codes kept), through the same write path as the
    /// API; resumable (run it again after a failure: links already imported are not created twice).
    Import(ImportArgs),
    /// Ask our edge for every link of another shortener, as its phones would, and report each
    /// that does not answer as before (run it before switching DNS).
    VerifyImport(VerifyArgs),
    /// Write links as CSV or NDJSON (what `import` reads), optionally only some of them.
    Export(ExportArgs),
    /// Compose a campaign's SMS from a file of recipients: per recipient its link, text,
    /// encoding and segments, then the totals (as `POST /api/v1/compose`; `--dry-run` issues
    /// nothing).
    Compose(ComposeArgs),
    /// Rebuild Redis from SQL: every link rewritten (live, expiring with their TTL, revoked as
    /// tombstones); links past their grace period are removed.
    Resync(ResyncArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Check the settings (flags, environment, `--config` file) without starting: every problem
    /// at once, each with its file and key; exits 1 if there is any.
    CheckConfig,
    /// Consume visit events without the HTTP API (several may run, each with its own
    /// `--consumer-name`); also runs the cleanup jobs if configured.
    Consume,
    /// Run the idle-link expiry and raw-visit retention jobs once, and exit.
    Cleanup,
    /// Write a consistent copy of the SQLite database (while the sidecar runs); see
    /// docs/BACKUP.md for what else must be kept with it.
    Backup(BackupArgs),
    /// The code scheme (secret, length, check character) recorded with the data: show it, or
    /// adopt the configured one on purpose.
    CodeScheme {
        #[command(subcommand)]
        command: CodeSchemeCommand,
    },
    /// The audit log: `verify` checks its hash chains.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Conversions (docs/CONVERSIONS.md): `import` records them from an NDJSON file.
    Conversions {
        #[command(subcommand)]
        command: ConversionsCommand,
    },
    /// Links a threat feed quarantined after they were created: `list` a workspace's, `release`
    /// one (docs/SECURITY.md, "Quarantine").
    Quarantines {
        #[command(subcommand)]
        command: quarantines::QuarantinesCommand,
    },
    /// Visitors' abuse reports (the warning page's and the home pages' form), newest first: when,
    /// the host, the code (docs/SECURITY.md, "Quarantine").
    AbuseReports {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

pub async fn run(cli: Cli) -> Result<(), BoxError> {
    let config = cli.config;
    let db_timeout = config.db_timeout;
    run_command(&config, cli.command.unwrap_or(Command::Serve))
        .await
        .map_err(|error| error::explain_locked(error, db_timeout))
}

async fn run_command(config: &Config, command: Command) -> Result<(), BoxError> {
    match command {
        Command::Serve => serve(config).await,
        Command::Keys { command } => keys::run(config, command).await,
        Command::Workspaces { command } => workspaces::run(config, command).await,
        Command::Import(args) => import::run(config, args).await,
        Command::VerifyImport(args) => import::verify::run(config, args).await,
        Command::Export(args) => export::run(config, args).await,
        Command::Compose(args) => compose::run(config, args).await,
        Command::Resync(args) => resync::run(config, args).await,
        Command::Consume => visits::consume(config).await,
        Command::Cleanup => visits::cleanup_once(config).await,
        Command::Backup(args) => backup::run(config, args).await,
        Command::CodeScheme { command } => code_scheme::run(config, command).await,
        Command::Audit { command } => audit::run(config, command).await,
        Command::Conversions { command } => conversions::run(config, command).await,
        Command::Quarantines { command } => quarantines::run(config, command).await,
        Command::AbuseReports { limit } => quarantines::abuse_reports(config, limit).await,
        Command::CheckConfig => check::check_config(config),
        Command::Migrate => {
            crate::open_storage(config).await?;
            println!("migrations applied");
            Ok(())
        }
    }
}

async fn serve(config: &Config) -> Result<(), BoxError> {
    tracing::info!(?config, "starting");
    // A long-running writer: a command run beside it gets its turn on SQLite's one writer.
    shortlink_store::sqlite_turn::serve_beside_commands();
    let app = Application::build_serving(config).await?;
    let addr = app.local_addr();
    // Test harnesses and scripts read this exact line to learn the port.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "shortlink-sidecar listening on {addr}")?;
    if let Some(metrics) = app.metrics_addr() {
        writeln!(stdout, "shortlink-sidecar metrics on {metrics}")?;
    }
    stdout.flush()?;
    drop(stdout);
    tracing::info!(%addr, "listening");
    // Stops the API, then every background task.
    app.run_until(crate::shutdown_signal()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    const SECRET: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn defaults_and_global_flags() {
        let cli = Cli::try_parse_from(["shortlink-sidecar"]).unwrap();
        assert!(cli.command.is_none(), "serve is the default");
        let c = &cli.config;
        assert_eq!(c.listen.to_string(), "127.0.0.1:8700");
        assert_eq!(c.code_length, 6);
        assert!(c.code_check);
        assert_eq!(c.max_url_length, 5000);
        assert_eq!(c.sequence_block, 1000);
        assert_eq!(c.expired_grace.as_secs(), 7 * 86_400);

        // Flags may follow the subcommand; booleans take a value; lists split on commas.
        let cli = Cli::try_parse_from([
            "shortlink-sidecar",
            "keys",
            "create",
            "--name",
            "tool",
            "--code-check",
            "false",
            "--short-domains",
            "s1.example,s2.example",
            "--expired-grace",
            "36h",
            "--listen",
            "127.0.0.1:0",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Keys { command: KeysCommand::Create { ref name, role: shortlink_store::Role::Admin, .. } })
                if name == "tool"
        ));
        assert!(!cli.config.code_check);
        assert_eq!(cli.config.short_domains, ["s1.example", "s2.example"]);
        assert_eq!(cli.config.expired_grace.as_secs(), 36 * 3600);
        assert_eq!(cli.config.listen.port(), 0);
    }

    #[test]
    fn max_url_length_stops_at_what_nginx_carries() {
        use shortlink_wire::limits::TARGET_BYTES_CEILING;
        let parse = |value: &str| Cli::try_parse_from(["x", "--max-url-length", value]);
        let ceiling = TARGET_BYTES_CEILING.to_string();
        assert_eq!(
            parse(&ceiling).unwrap().config.max_url_length,
            TARGET_BYTES_CEILING
        );
        let refused = parse(&(TARGET_BYTES_CEILING + 1).to_string())
            .err()
            .unwrap();
        assert!(refused.to_string().contains(&ceiling), "{refused}");
        assert!(parse("0").is_err());
        assert!(parse("many").is_err());
    }

    #[test]
    fn code_secret_from_flag_or_file() {
        let cli = Cli::try_parse_from(["x", "--code-secret", SECRET]).unwrap();
        assert_eq!(cli.config.code_secret().unwrap().len(), 16);
        assert!(cli.config.code_scheme().is_ok());

        let file = std::env::temp_dir().join(format!("shortlink-secret-{}", std::process::id()));
        std::fs::write(&file, format!("{SECRET}\n")).unwrap();
        let path = file.to_str().unwrap();
        let cli = Cli::try_parse_from(["x", "--code-secret-file", path]).unwrap();
        assert_eq!(cli.config.code_secret().unwrap().len(), 16);
        let both = Cli::try_parse_from(["x", "--code-secret", SECRET, "--code-secret-file", path])
            .unwrap();
        assert!(both.config.code_secret().is_err());
        std::fs::remove_file(file).unwrap();

        let short = Cli::try_parse_from(["x", "--code-secret", "0011"]).unwrap();
        assert!(short.config.code_secret().is_err());
        // The secret never appears in debug output.
        let debug = format!(
            "{:?}",
            Cli::try_parse_from(["x", "--code-secret", SECRET])
                .unwrap()
                .config
        );
        assert!(!debug.contains(SECRET));
    }

    #[test]
    fn database_passwords_are_redacted() {
        assert_eq!(
            shortlink_config::redact::redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:****@h:5432/db"
        );
        assert_eq!(
            shortlink_config::redact::redact_url("sqlite://var/x.db"),
            "sqlite://var/x.db"
        );
    }
}

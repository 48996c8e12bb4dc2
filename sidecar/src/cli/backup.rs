//! `backup`: a consistent copy of a SQLite database while the sidecar runs (`VACUUM INTO`: one
//! read transaction, so the copy is a snapshot, and the running sidecar keeps writing). On
//! PostgreSQL, `pg_dump` does the same (docs/BACKUP.md).

use super::error::BoxError;
use shortlink_config::Config;
use shortlink_store::{Backend, CODE_SCHEME_SETTING};
use sqlx::Connection;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// The file to write (must not exist).
    #[arg(long)]
    pub to: PathBuf,
}

pub async fn run(config: &Config, args: BackupArgs) -> Result<(), BoxError> {
    if Backend::from_url(&config.database_url) != Some(Backend::Sqlite) {
        return Err(
            "backup copies SQLite databases; for PostgreSQL use pg_dump, for MariaDB/MySQL \
             mariadb-dump --single-transaction (see docs/BACKUP.md)"
                .into(),
        );
    }
    if args.to.exists() {
        return Err(format!("{} exists already", args.to.display()).into());
    }
    let target = args
        .to
        .to_str()
        .ok_or("the backup path must be valid UTF-8")?;
    // Migrated and checked like any start (a database without a recorded scheme gets one).
    let storage = crate::open_storage(config).await?;
    let settings = shortlink_store::ConnectOptions::from_config(config);
    let options = shortlink_store::sqlite_file::connect_options(
        &settings.url,
        settings.acquire_timeout,
        settings.sqlite_cache,
    )?;
    let mut connection = sqlx::SqliteConnection::connect_with(&options).await?;
    sqlx::query("VACUUM INTO ?1")
        .bind(target)
        .execute(&mut connection)
        .await?;
    connection.close().await?;
    let scheme = storage.setting(CODE_SCHEME_SETTING).await?;
    println!("backup written to {}", args.to.display());
    eprintln!(
        "code scheme {}: keep the code secret file with this backup; links restored without it \
         stop working",
        scheme.as_deref().unwrap_or("(not recorded yet)")
    );
    Ok(())
}

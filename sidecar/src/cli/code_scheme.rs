//! `code-scheme show|adopt`: the code scheme fingerprint recorded with the data
//! ([`shortlink_core::code_scheme`]), and the one deliberate way to change it.

use super::error::BoxError;
use shortlink_config::Config;
use shortlink_core::projection::marker::ProjectionMarker;
use shortlink_store::{self, LinkFilter, Storage, CODE_SCHEME_SETTING};
use shortlink_wire::keys::PROJECTION_MARKER;

#[derive(Debug, clap::Subcommand)]
pub enum CodeSchemeCommand {
    /// Print the fingerprint recorded in the database and the one configured now.
    Show,
    /// Record the configured code secret, length and check character as the database's code
    /// scheme. Refused while links with generated codes exist: every one of them would stop
    /// working (404 at nginx), unless `--break-existing-links`.
    Adopt {
        /// Adopt even though links with generated codes exist, knowing that all of them break.
        #[arg(long)]
        break_existing_links: bool,
    },
}

/// Links read per page while counting generated codes.
const PAGE: u32 = 10_000;

pub async fn run(config: &Config, command: CodeSchemeCommand) -> Result<(), BoxError> {
    let scheme = config.code_scheme()?;
    let storage = crate::open_storage(config).await?;
    let recorded = storage.setting(CODE_SCHEME_SETTING).await?;
    match command {
        CodeSchemeCommand::Show => {
            println!("recorded:   {}", recorded.as_deref().unwrap_or("(none)"));
            println!("configured: {}", scheme.fingerprint());
            Ok(())
        }
        CodeSchemeCommand::Adopt {
            break_existing_links,
        } => {
            if recorded.as_deref() == Some(scheme.fingerprint()) {
                println!("code scheme {} already recorded", scheme.fingerprint());
                return Ok(());
            }
            let generated = match recorded.as_deref() {
                Some(recorded) => count_generated(storage.as_ref(), recorded).await?,
                None => 0,
            };
            if generated > 0 && !break_existing_links {
                return Err(format!(
                    "{generated} links have codes generated under the recorded code scheme {}; \
                     under {} every one of them answers 404. Restore the original secret instead, \
                     or run again with --break-existing-links if they may break",
                    recorded.as_deref().unwrap_or_default(),
                    scheme.fingerprint()
                )
                .into());
            }
            storage
                .set_setting(
                    CODE_SCHEME_SETTING,
                    scheme.fingerprint(),
                    shortlink_store::now(),
                )
                .await?;
            // The marker names the old scheme: without it the module falls back until a serving
            // sidecar has refilled Redis and set it with the new one.
            let marker = ProjectionMarker::new(config)?;
            if let Err(error) = marker.clear().await {
                eprintln!(
                    "code-scheme: cannot remove {PROJECTION_MARKER} from Redis ({error}); remove it by \
                     hand (DEL {PROJECTION_MARKER}) or the sidecar refuses to start"
                );
            }
            if generated > 0 {
                eprintln!("code-scheme: {generated} links with generated codes no longer work");
            }
            println!("code scheme {} recorded", scheme.fingerprint());
            Ok(())
        }
    }
}

/// Links whose codes have the generated shape of the `fingerprint`'s scheme (length and check
/// character are in clear in it).
async fn count_generated(storage: &dyn Storage, fingerprint: &str) -> Result<u64, BoxError> {
    let mut parts = fingerprint.split('-').skip(1);
    let body: usize = parts
        .next()
        .and_then(|part| part.strip_prefix('L')?.parse().ok())
        .ok_or("unreadable recorded fingerprint")?;
    let check = parts.next() == Some("c1");
    let code_len = body + usize::from(check);
    let mut count = 0;
    let mut after: Option<String> = None;
    loop {
        let page = storage
            .scan_links(&LinkFilter::all_workspaces(), after.as_deref(), PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(count);
        };
        after = Some(last.code.clone());
        count += page
            .iter()
            .filter(|link| {
                link.code.len() == code_len && link.code.bytes().all(|b| b.is_ascii_alphanumeric())
            })
            .count() as u64;
    }
}

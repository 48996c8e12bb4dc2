//! `verify-import`: every link of the source, asked of our edge as a phone would ask it (`GET
//! /<code>` with the `Host` of its domain, redirects not followed), and compared with what the
//! old shortener answered: a redirect to its target. Run before switching DNS; a difference is a
//! link that would break. A link whose code no import keeps (see [`shortcode::parse_imported`])
//! is not asked: it is listed, with the reason, as the import listed it.
//!
//! Its requests carry `User-Agent: shortlink-verify-import/<version>`
//! ([`shortlink_wire::agent::VERIFY_IMPORT_AGENT`]): the visit consumer leaves them out of every link's
//! stats, so a verification adds no visit.

use super::source::{self, SourceArgs, SourceKind, SourceLink};
use crate::cli::error::BoxError;
use futures_util::stream::{self, StreamExt};
use serde::Serialize;
use shortlink_domains::http1;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// The source's export file, when it is read from one.
    pub file: Option<PathBuf>,
    /// Where the links come from (as given to `import`).
    #[arg(long, value_enum)]
    pub from: SourceKind,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Our edge (nginx with the module), `http://host:port`: asked with each link's domain as
    /// `Host`, so DNS need not point at it yet.
    #[arg(long, env = "SHORTLINK_VERIFY_EDGE")]
    pub edge: String,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Also write every difference as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Difference {
    code: String,
    domain: String,
    expected_status: u16,
    expected_location: String,
    status: Option<u16>,
    location: Option<String>,
    problem: String,
}

/// A link the import refuses, so not asked: its code cannot be stored as it is.
#[derive(Debug, Serialize)]
struct Refused {
    code: String,
    domain: String,
    problem: String,
}

#[derive(Debug, Default, Serialize)]
struct VerifyReport {
    checked: u64,
    same: u64,
    /// Links not asked: unreadable rows, expired or banned links (the old shortener no longer
    /// redirected them either), and `refused`.
    not_asked: u64,
    /// Of `not_asked`: links whose code the import refuses (over 64 characters, or a character
    /// outside `[A-Za-z0-9._~-]`). They will not answer here; the import reported them too.
    refused: Vec<Refused>,
    differences: Vec<Difference>,
}

pub async fn run(config: &shortlink_config::Config, mut args: VerifyArgs) -> Result<(), BoxError> {
    if args.from == SourceKind::Shortlink {
        return Err("verify-import checks another shortener's links (--from yourls, shlink, kutt, bitly or csv)".into());
    }
    let edge = edge_address(&args.edge).await?;
    args.source.file = args.file.clone();
    args.source.outbound = shortlink_core::outbound::Policy::imports(config);
    args.source.page_size = args.source.page_size.clamp(1, 1000);
    let default_domain = args.source.source_domain.clone().unwrap_or_default();
    let mut source = source::open(args.from, &args.source).await?;
    let mut report = VerifyReport::default();
    let now = chrono::Utc::now();
    while let Some(items) = source.next_page().await? {
        let mut links = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Ok(mut link) if !link.revoked && link.expires_at.is_none_or(|at| at > now) => {
                    if link.domain.is_empty() {
                        link.domain.clone_from(&default_domain);
                    }
                    if let Err(error) = shortcode::parse_imported(&link.code) {
                        let problem = format!("not asked: the import refuses it ({error})");
                        eprintln!("{} ({}): {problem}", link.code, link.domain);
                        report.not_asked += 1;
                        report.refused.push(Refused {
                            code: link.code,
                            domain: link.domain,
                            problem,
                        });
                        continue;
                    }
                    links.push(link);
                }
                _ => report.not_asked += 1,
            }
        }
        let answers: Vec<(SourceLink, Result<http1::Answer, String>)> = stream::iter(links)
            .map(|link| async move {
                let answer = ask(edge, &link).await;
                (link, answer)
            })
            .buffer_unordered(args.concurrency.max(1))
            .collect()
            .await;
        for (link, answer) in answers {
            report.checked += 1;
            match compare(&link, answer) {
                None => report.same += 1,
                Some(difference) => {
                    eprintln!(
                        "{} ({}): {}",
                        difference.code, difference.domain, difference.problem
                    );
                    report.differences.push(difference);
                }
            }
        }
    }
    let refused = match report.refused.len() {
        0 => String::new(),
        n => format!(", {n} of them refused by the import: they will not answer here"),
    };
    println!(
        "verify-import --from {}: {} links asked of {}: {} answer as before, {} differ ({} not asked{refused})",
        args.from.name(),
        report.checked,
        args.edge,
        report.same,
        report.differences.len(),
        report.not_asked
    );
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if !report.differences.is_empty() {
        return Err(format!(
            "{} links would not answer as before: do not switch DNS yet",
            report.differences.len()
        )
        .into());
    }
    Ok(())
}

async fn edge_address(edge: &str) -> Result<SocketAddr, BoxError> {
    let url = url::Url::parse(edge).map_err(|e| format!("--edge {edge:?}: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!("--edge {edge:?}: http:// only (the edge's plain port)").into());
    }
    let host = url.host_str().ok_or("--edge needs a host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let address = tokio::net::lookup_host((host, port)).await?.next();
    Ok(address.ok_or_else(|| format!("--edge {edge:?}: no address"))?)
}

/// `GET /<code>` as a phone asks it, but under our own agent (see the top). The code passed
/// [`shortcode::parse_imported`]: every character of it goes raw in a path.
async fn ask(edge: SocketAddr, link: &SourceLink) -> Result<http1::Answer, String> {
    let host = if link.domain.is_empty() {
        edge.to_string()
    } else {
        link.domain.clone()
    };
    let head = format!(
        "GET /{} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {}{}",
        link.code,
        shortlink_wire::agent::VERIFY_IMPORT_AGENT,
        env!("CARGO_PKG_VERSION")
    );
    http1::exchange(edge, None, &head, &[], Duration::from_secs(10)).await
}

/// `None` when the edge answers as the old shortener did.
fn compare(link: &SourceLink, answer: Result<http1::Answer, String>) -> Option<Difference> {
    let mut difference = Difference {
        code: link.code.clone(),
        domain: link.domain.clone(),
        expected_status: link.redirect,
        expected_location: link.target.clone(),
        status: None,
        location: None,
        problem: String::new(),
    };
    match answer {
        Err(error) => difference.problem = format!("no answer: {error}"),
        Ok(answer) => {
            difference.status = Some(answer.status);
            difference.location.clone_from(&answer.location);
            let same_place = answer
                .location
                .as_deref()
                .is_some_and(|location| same_url(location, &link.target));
            if answer.status == link.redirect && same_place {
                return None;
            }
            difference.problem = format!(
                "expected {} to {}, got {} to {}",
                link.redirect,
                link.target,
                answer.status,
                answer.location.as_deref().unwrap_or("(no Location)")
            );
        }
    }
    Some(difference)
}

/// The same address once both are parsed (our targets are stored normalised: a lowercased
/// host, a `/` path for an empty one).
fn same_url(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

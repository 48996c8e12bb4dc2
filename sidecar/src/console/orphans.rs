//! The Domains page's orphan visits (issue 70): per domain of the signed-in workspace, the
//! requests no link answered so far by kind, and the latest few, as `GET /api/v1/domains` and
//! `GET /api/v1/visits/orphan` give them to its keys.

use super::layout::when;
use maud::{html, Markup};
use shortlink_api::orphans::scope_of_slug;
use shortlink_api::AppState;
use shortlink_store::StorageResult;
use shortlink_visits::orphans::OrphanQuery;

/// The latest orphan visits the page lists.
const LATEST: usize = 20;

/// The section: counts per domain and kind, then the latest visits, recorded under the workspace.
pub async fn section(state: &AppState, workspace: &str) -> StorageResult<Markup> {
    let store = state.analytics.store.orphans();
    let scope = scope_of_slug(workspace);
    let counts = store.orphan_counts(&scope).await?;
    // The newest: the list is oldest first, so the page reads the last day's, newest last.
    let query = OrphanQuery {
        scope,
        kind: None,
        domain: None,
        from: Some(chrono::Utc::now() - chrono::Duration::days(1)),
        to: None,
        after: None,
        limit: 1000,
    };
    let recent = store.orphan_visits(&query).await?;
    let latest = &recent[recent.len().saturating_sub(LATEST)..];
    Ok(html! {
        h2 { "Orphan visits" }
        p.hint { "Requests on these domains that no link answered (the bare root, an unknown or "
            "mistyped code, a path no code has), and taps saved from the punctuation a text "
            "glued to a link (recovered). Counted since the start; also in the API at "
            code { "/api/v1/visits/orphan" } "." }
        div.wide { table.orphan-counts {
            thead { tr {
                th scope="col" { "Domain" } th.num scope="col" { "Bare root" }
                th.num scope="col" { "Unknown code" } th.num scope="col" { "Other path" }
                th.num scope="col" { "Recovered" }
            } }
            tbody {
                @for (domain, c) in &counts {
                    tr {
                        td { (domain) } td.num { (c.base_url) } td.num { (c.invalid_short_url) }
                        td.num { (c.regular_404) } td.num { (c.recovered) }
                    }
                }
                @if counts.is_empty() { tr { td colspan="5" { "No orphan visit yet." } } }
            }
        } }
        @if !latest.is_empty() {
            h3 { "Latest (last 24 hours)" }
            div.wide { table.orphan-latest {
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Domain" } th scope="col" { "Kind" }
                    th scope="col" { "Path" } th scope="col" { "Device" } th scope="col" { "Country" }
                } }
                tbody {
                    @for v in latest.iter().rev() {
                        tr {
                            td { (when(Some(v.at))) } td { (v.domain) } td { (kind_name(&v.kind)) }
                            td { code title=(v.path) { (decoded(&v.path)) } } td { (v.device) }
                            td { (v.country.as_deref().unwrap_or("")) }
                        }
                    }
                }
            } }
        }
    })
}

/// An orphan kind in the words of the counts table's columns (the API's names are `base_url`,
/// `invalid_short_url`, `regular_404`, `recovered`).
fn kind_name(kind: &str) -> &str {
    match kind {
        "base_url" => "Bare root",
        "invalid_short_url" => "Unknown code",
        "regular_404" => "Other path",
        "recovered" => "Recovered",
        other => other,
    }
}

/// A request path as the person typed or tapped it: percent escapes decoded (a phone sends
/// `%E3%80%82` for the `。` a text glued to the link), bytes that are not UTF-8 shown as `�`.
/// Only for display: the raw path is the cell's title.
pub(super) fn decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_are_shown_decoded() {
        assert_eq!(super::decoded("/ab3%E3%80%82"), "/ab3\u{3002}");
        assert_eq!(super::decoded("/50%25-off%zz%"), "/50%-off%zz%");
        assert_eq!(super::decoded("/%FF"), "/\u{fffd}");
    }
}

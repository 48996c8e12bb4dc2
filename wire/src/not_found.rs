//! Not-found redirects (issue 70): where a pool host sends, instead of today's 404 or 410, the
//! bare root, an unknown code and an expired or revoked link without an `expired_url` of its own.
//! Set per workspace and per domain; a domain's setting beats its workspace's, and one unset
//! falls through to the workspace's, then to today's answer.
//!
//! In Redis all settings live in one hash, [`KEY`] (`sl:nf`): field `w:<workspace>` or
//! `d:<workspace>/<host>`, value [`Redirects::encode`]. A domain's field names the workspace whose
//! setting it is (issue 77): a reader applies it only while nginx maps the host to that workspace,
//! so a domain moved to another workspace never answers with its former owner's URL, whichever
//! rows are still stored, and the module and the sidecar's fallback decide alike. One hash rather than a key per setting: each nginx
//! worker reads the whole of it in one `HGETALL` now and then and answers from its copy, so a
//! 404 never costs a Redis round trip; the sidecar rewrites the whole hash from SQL at each change,
//! never read-modify-write.

use crate::target::is_valid_target;

/// The hash of every not-found redirect setting.
pub const KEY: &str = "sl:nf";

/// Longest URL a setting may hold (the link target's bound).
pub const MAX_URL_BYTES: usize = crate::limits::TARGET_BYTES;

/// Fields a reader keeps at most: a hash grown past it (by a bug or a hand) costs a bounded copy.
pub const MAX_FIELDS: usize = 10_000;

/// The version line of a value.
const VERSION: &str = "1";

/// Which of today's answers a request would get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// The bare root of the host (`/`, or the location's prefix alone): today 404.
    Root,
    /// No such link, another workspace's code, a path no code can be, a wrong check character:
    /// today 404.
    Unknown,
    /// An expired or revoked link with no `expired_url` of its own: today 410.
    Expired,
}

/// One workspace's or one domain's settings; `None`: unset (falls through).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redirects {
    pub root: Option<String>,
    pub unknown: Option<String>,
    pub expired: Option<String>,
}

impl Redirects {
    pub fn get(&self, case: Case) -> Option<&str> {
        match case {
            Case::Root => self.root.as_deref(),
            Case::Unknown => self.unknown.as_deref(),
            Case::Expired => self.expired.as_deref(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.root.is_none() && self.unknown.is_none() && self.expired.is_none()
    }

    /// `1`, then the three URLs, each on a line of its own (empty: unset). A URL holds no line
    /// break ([`is_valid_target`]).
    pub fn encode(&self) -> String {
        let url = |u: &Option<String>| u.clone().unwrap_or_default();
        format!(
            "{VERSION}\n{}\n{}\n{}",
            url(&self.root),
            url(&self.unknown),
            url(&self.expired)
        )
    }

    /// A value [`Redirects::encode`] made. `None`: another version or a malformed value (the
    /// reader then keeps today's answers for that field's host or workspace).
    pub fn decode(value: &[u8]) -> Option<Redirects> {
        let mut lines = value.split(|&b| b == b'\n');
        if lines.next()? != VERSION.as_bytes() {
            return None;
        }
        let mut url = || -> Option<Option<String>> {
            let line = lines.next()?;
            if line.is_empty() {
                return Some(None);
            }
            if line.len() > MAX_URL_BYTES || !is_valid_target(line) {
                return None;
            }
            Some(Some(std::str::from_utf8(line).ok()?.to_owned()))
        };
        let redirects = Redirects {
            root: url()?,
            unknown: url()?,
            expired: url()?,
        };
        lines.next().is_none().then_some(redirects)
    }
}

/// The URL `case` is sent to: the domain's setting, else the workspace's, else none (today's
/// answer). The module and the fallback both decide by this.
pub fn choose<'a>(
    domain: Option<&'a Redirects>,
    workspace: Option<&'a Redirects>,
    case: Case,
) -> Option<&'a str> {
    domain
        .and_then(|d| d.get(case))
        .or_else(|| workspace.and_then(|w| w.get(case)))
}

/// What a field of [`KEY`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    /// A workspace's name.
    Workspace(&'a [u8]),
    /// A host (lower case, without port or final dot) while it is the named workspace's.
    Domain { workspace: &'a [u8], host: &'a [u8] },
}

impl Field<'_> {
    /// `None` for anything else, `d:<host>` of a sidecar from before issue 77 included (it
    /// named no workspace: left out, the host falls through to its workspace's setting).
    pub fn parse(field: &[u8]) -> Option<Field<'_>> {
        match field.split_at_checked(2)? {
            (b"w:", name) if !name.is_empty() => Some(Field::Workspace(name)),
            (b"d:", rest) => {
                let slash = rest.iter().position(|&b| b == b'/')?;
                let (workspace, host) = (&rest[..slash], &rest[slash + 1..]);
                (!workspace.is_empty() && !host.is_empty())
                    .then_some(Field::Domain { workspace, host })
            }
            _ => None,
        }
    }
}

/// The field of workspace `name`'s settings.
pub fn workspace_field(name: &str) -> String {
    format!("w:{name}")
}

/// The field of `host`'s settings (lower case, as nginx's `$host`) of the workspace `name`.
pub fn domain_field(name: &str, host: &str) -> String {
    format!(
        "d:{name}/{}",
        host.trim_end_matches('.').to_ascii_lowercase()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(url: &str) -> Option<String> {
        Some(url.to_owned())
    }

    #[test]
    fn values_round_trip_with_any_part_unset() {
        let all = Redirects {
            root: some("https://brand.example/"),
            unknown: some("https://brand.example/404?x=1|2"),
            expired: some("http://brand.example/over"),
        };
        for r in [
            all.clone(),
            Redirects::default(),
            Redirects {
                unknown: all.unknown.clone(),
                ..Default::default()
            },
        ] {
            assert_eq!(Redirects::decode(r.encode().as_bytes()), Some(r));
        }
        assert_eq!(
            Redirects::default().encode(),
            "1\n\n\n",
            "the format is the contract with the module"
        );
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            &b""[..],
            b"2\n\n\n",
            b"1\n\n",
            b"1\n\n\n\n",
            b"1\nftp://x/\n\n",
            b"1\nhttps://a b/\n\n",
            b"1\n/relative\n\n",
        ] {
            assert_eq!(Redirects::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_domains_setting_beats_its_workspaces_and_unset_falls_through() {
        let domain = Redirects {
            unknown: some("https://d/"),
            ..Default::default()
        };
        let workspace = Redirects {
            unknown: some("https://w/"),
            expired: some("https://w/expired"),
            ..Default::default()
        };
        let pick = |case| choose(Some(&domain), Some(&workspace), case);
        assert_eq!(pick(Case::Unknown), Some("https://d/"));
        assert_eq!(pick(Case::Expired), Some("https://w/expired"));
        assert_eq!(pick(Case::Root), None);
        assert_eq!(
            choose(None, Some(&workspace), Case::Unknown),
            Some("https://w/")
        );
        assert_eq!(choose(None, None, Case::Unknown), None);
    }

    #[test]
    fn fields_name_a_workspace_or_a_domain() {
        assert_eq!(workspace_field("brand-a"), "w:brand-a");
        assert_eq!(
            domain_field("brand-a", "Go.Brand.Example."),
            "d:brand-a/go.brand.example"
        );
        assert_eq!(
            Field::parse(b"w:brand-a"),
            Some(Field::Workspace(b"brand-a"))
        );
        assert_eq!(
            Field::parse(domain_field("brand-a", "go.example").as_bytes()),
            Some(Field::Domain {
                workspace: b"brand-a",
                host: b"go.example"
            })
        );
        // A domain's field of a sidecar from before issue 77 named no workspace: no field.
        for bad in [
            &b""[..],
            b"w:",
            b"x:abc",
            b"w",
            b"d:go.example",
            b"d:/go.example",
            b"d:a/",
        ] {
            assert_eq!(Field::parse(bad), None, "{bad:?}");
        }
    }
}

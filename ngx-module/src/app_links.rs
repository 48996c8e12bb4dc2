//! The apps of each workspace, claimed on its hosts: iOS universal links
//! (`/.well-known/apple-app-site-association`) and Android App Links
//! (`/.well-known/assetlinks.json`), both answered by the module from the configuration, so a
//! domain added to the pool serves them after the same reload that adds it. A host serves the
//! apps of its workspace (`shortlink_workspace`, the host map), never another's: brand A's app
//! must not claim, and so open, brand B's short links.
//!
//! A tap on a short link then opens the app when it is installed (the app gets the short URL and
//! resolves it itself), and the browser's redirect when it is not; which target each platform's
//! browser gets is a click-time rule on the device (docs/APP-LINKS.md).
//!
//! The bodies are rendered once, at configuration time, from values checked there: `nginx -t`
//! refuses a malformed workspace name, app ID, package or certificate fingerprint.

use std::fmt::Write;

use shortlink_wire::record::WorkspaceName;

use crate::request::workspace::HostWorkspace;

/// Where each file is asked for.
pub const APPLE_PATH: &[u8] = b"/.well-known/apple-app-site-association";
pub const ANDROID_PATH: &[u8] = b"/.well-known/assetlinks.json";

/// What names the workspace an app line belongs to, before the app: `workspace=brand-a`.
const WORKSPACE_ARG: &str = "workspace=";

/// Which of the two files a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppFile {
    Apple,
    Android,
}

impl AppFile {
    /// The file asked for at `raw_uri` (its query string ignored), if it is one of the two.
    pub fn asked(raw_uri: &[u8]) -> Option<AppFile> {
        let path = raw_uri.split(|&b| b == b'?').next().unwrap_or_default();
        match path {
            APPLE_PATH => Some(AppFile::Apple),
            ANDROID_PATH => Some(AppFile::Android),
            _ => None,
        }
    }
}

/// `shortlink_apple_app` and `shortlink_android_app` lines, by workspace: each workspace's hosts
/// claim its own apps only, so one brand's app never opens another brand's links. A line without
/// `workspace=` is the `default` workspace's (every host's before workspaces, and still every
/// host's without `shortlink_workspace`).
#[derive(Debug, Default)]
pub struct AppLinks {
    sets: Vec<AppSet>,
}

/// One workspace's apps and the two files they make.
#[derive(Debug)]
struct AppSet {
    workspace: WorkspaceName,
    apple: Vec<AppleApp>,
    android: Vec<AndroidApp>,
    apple_body: Option<Box<[u8]>>,
    android_body: Option<Box<[u8]>>,
}

#[derive(Debug)]
struct AppleApp {
    /// `<team ID>.<bundle ID>`.
    id: String,
    /// `/path/*`, or `NOT /path/*` for a path the app leaves to the browser.
    paths: Vec<String>,
}

#[derive(Debug)]
struct AndroidApp {
    package: String,
    /// Upper-case hex pairs joined by `:`, as `keytool` prints them.
    fingerprints: Vec<String>,
}

impl AppLinks {
    /// `shortlink_apple_app [workspace=<name>] <team>.<bundle> [<path>...]`: the paths default
    /// to every path.
    pub fn add_apple(&mut self, args: &[&str]) -> Result<(), String> {
        let (workspace, args) = workspace_of(args)?;
        let (id, paths) = args.split_first().ok_or("names no app ID")?;
        check_apple_id(id)?;
        let paths = match paths {
            [] => vec!["/*".to_owned()],
            paths => paths
                .iter()
                .map(|path| check_apple_path(path).map(|()| (*path).to_owned()))
                .collect::<Result<_, _>>()?,
        };
        let set = self.set_of(workspace);
        if set.apple.iter().any(|app| app.id == *id) {
            return Err(format!("the app \"{id}\" is given twice"));
        }
        set.apple.push(AppleApp {
            id: (*id).to_owned(),
            paths,
        });
        set.apple_body = Some(apple_association(&set.apple).into_bytes().into());
        Ok(())
    }

    /// `shortlink_android_app [workspace=<name>] <package> <sha256 fingerprint>...`.
    pub fn add_android(&mut self, args: &[&str]) -> Result<(), String> {
        let (workspace, args) = workspace_of(args)?;
        let (package, fingerprints) = args.split_first().ok_or("names no package")?;
        check_package(package)?;
        if fingerprints.is_empty() {
            return Err(format!(
                "the app \"{package}\" needs its signing certificate's SHA-256 fingerprint"
            ));
        }
        let fingerprints = fingerprints
            .iter()
            .map(|fingerprint| normalize_fingerprint(fingerprint))
            .collect::<Result<_, _>>()?;
        let set = self.set_of(workspace);
        if set.android.iter().any(|app| app.package == *package) {
            return Err(format!("the app \"{package}\" is given twice"));
        }
        set.android.push(AndroidApp {
            package: (*package).to_owned(),
            fingerprints,
        });
        set.android_body = Some(asset_links(&set.android).into_bytes().into());
        Ok(())
    }

    /// Whether no line names an app: then no request needs its host's workspace.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The `file` a host of `host`'s workspace serves, if that workspace names such apps. A
    /// host without a workspace (an empty or malformed `shortlink_workspace`) serves none.
    pub fn file(&self, host: HostWorkspace, file: AppFile) -> Option<&[u8]> {
        let workspace = match host {
            HostWorkspace::Unchecked | HostWorkspace::Default => WorkspaceName::DEFAULT,
            HostWorkspace::Named(name) => name,
            HostWorkspace::Nothing => return None,
        };
        let set = self.sets.iter().find(|set| set.workspace == workspace)?;
        match file {
            AppFile::Apple => set.apple_body.as_deref(),
            AppFile::Android => set.android_body.as_deref(),
        }
    }

    fn set_of(&mut self, workspace: WorkspaceName) -> &mut AppSet {
        let at = match self.sets.iter().position(|set| set.workspace == workspace) {
            Some(at) => at,
            None => {
                self.sets.push(AppSet {
                    workspace,
                    apple: Vec::new(),
                    android: Vec::new(),
                    apple_body: None,
                    android_body: None,
                });
                self.sets.len() - 1
            }
        };
        &mut self.sets[at]
    }
}

/// The workspace a line's leading `workspace=<name>` names (`default` without one), and the
/// arguments after it.
fn workspace_of<'a, 'b>(args: &'a [&'b str]) -> Result<(WorkspaceName, &'a [&'b str]), String> {
    let Some(name) = args.first().and_then(|arg| arg.strip_prefix(WORKSPACE_ARG)) else {
        return Ok((WorkspaceName::DEFAULT, args));
    };
    let workspace = WorkspaceName::parse(name.as_bytes()).ok_or_else(|| {
        format!(
            "\"{name}\" is not a workspace name: 1 to {} of a-z, 0-9 and '-', not starting with '-'",
            WorkspaceName::MAX_LEN
        )
    })?;
    Ok((workspace, &args[1..]))
}

/// Apple's format, both generations in one entry: `appIDs` and `components` (iOS 13 and later),
/// `appID` and `paths` (earlier), which each reads and the other ignores.
fn apple_association(apps: &[AppleApp]) -> String {
    let mut json = String::from(r#"{"applinks":{"apps":[],"details":["#);
    for (i, app) in apps.iter().enumerate() {
        let separator = if i == 0 { "" } else { "," };
        let _ = write!(
            json,
            r#"{separator}{{"appID":"{id}","appIDs":["{id}"],"paths":["#,
            id = app.id
        );
        for (j, path) in app.paths.iter().enumerate() {
            let separator = if j == 0 { "" } else { "," };
            let _ = write!(json, r#"{separator}"{}""#, escape(path));
        }
        json.push_str(r#"],"components":["#);
        for (j, path) in app.paths.iter().enumerate() {
            let separator = if j == 0 { "" } else { "," };
            match path.strip_prefix("NOT ") {
                Some(excluded) => {
                    let _ = write!(
                        json,
                        r#"{separator}{{"/":"{}","exclude":true}}"#,
                        escape(excluded)
                    );
                }
                None => {
                    let _ = write!(json, r#"{separator}{{"/":"{}"}}"#, escape(path));
                }
            }
        }
        json.push_str("]}");
    }
    json.push_str("]}}");
    json
}

/// Google's Digital Asset Links statement list: each app may handle every URL of the host it is
/// served from (the paths are in the app's own intent filters).
fn asset_links(apps: &[AndroidApp]) -> String {
    let mut json = String::from("[");
    for (i, app) in apps.iter().enumerate() {
        let separator = if i == 0 { "" } else { "," };
        let _ = write!(
            json,
            r#"{separator}{{"relation":["delegate_permission/common.handle_all_urls"],"target":{{"namespace":"android_app","package_name":"{}","sha256_cert_fingerprints":["#,
            app.package
        );
        for (j, fingerprint) in app.fingerprints.iter().enumerate() {
            let separator = if j == 0 { "" } else { "," };
            let _ = write!(json, r#"{separator}"{fingerprint}""#);
        }
        json.push_str("]}}");
    }
    json.push(']');
    json
}

/// A team ID (10 upper-case letters or digits), a dot, a bundle ID (letters, digits, `-`, `.`).
fn check_apple_id(id: &str) -> Result<(), String> {
    let valid = id.split_once('.').is_some_and(|(team, bundle)| {
        team.len() == 10
            && team
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            && !bundle.is_empty()
            && bundle.len() <= 155
            && bundle
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    });
    valid.then_some(()).ok_or_else(|| {
        format!("\"{id}\" is not an app ID: <team ID (10 letters or digits)>.<bundle ID>")
    })
}

/// `/…` or `NOT /…`, printable ASCII; `*` and `?` are Apple's wildcards.
fn check_apple_path(path: &str) -> Result<(), String> {
    let pattern = path.strip_prefix("NOT ").unwrap_or(path);
    let valid = pattern.starts_with('/')
        && pattern.len() <= 1024
        && pattern.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    valid
        .then_some(())
        .ok_or_else(|| format!("\"{path}\" is not a path pattern: \"/…\" or \"NOT /…\""))
}

/// A Java package name of two segments or more (`com.example.app`).
fn check_package(package: &str) -> Result<(), String> {
    let segments: Vec<&str> = package.split('.').collect();
    let valid = segments.len() >= 2
        && segments.iter().all(|segment| {
            segment.starts_with(|c: char| c.is_ascii_alphabetic())
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
    valid
        .then_some(())
        .ok_or_else(|| format!("\"{package}\" is not an Android package name"))
}

/// A SHA-256 fingerprint as `keytool` prints it (`14:6D:E9:…`), or as 64 hex digits; upper case
/// with colons, as the Digital Asset Links verifier compares it.
fn normalize_fingerprint(fingerprint: &str) -> Result<String, String> {
    let digits: Vec<u8> = fingerprint.bytes().filter(|&b| b != b':').collect();
    let colons_in_place = !fingerprint.contains(':')
        || fingerprint
            .bytes()
            .enumerate()
            .all(|(i, b)| (b == b':') == (i % 3 == 2));
    if digits.len() != 64 || !colons_in_place || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!(
            "\"{fingerprint}\" is not a SHA-256 certificate fingerprint (32 hex pairs)"
        ));
    }
    let pairs: Vec<String> = digits
        .chunks(2)
        .map(|pair| String::from_utf8_lossy(pair).to_ascii_uppercase())
        .collect();
    Ok(pairs.join(":"))
}

/// JSON string escaping for the two characters a checked path may hold that need it.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a `default` host gets at `raw_uri`.
    fn served<'a>(links: &'a AppLinks, raw_uri: &[u8]) -> Option<&'a [u8]> {
        links.file(HostWorkspace::Default, AppFile::asked(raw_uri)?)
    }

    const FINGERPRINT: &str =
        "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5";

    #[test]
    fn apple_file_has_both_generations_of_the_format() {
        let mut links = AppLinks::default();
        links
            .add_apple(&["ABCDE12345.com.example.shop", "/*", "NOT /admin/*"])
            .unwrap();
        links.add_apple(&["ABCDE12345.com.example.beta"]).unwrap();
        let body = served(&links, b"/.well-known/apple-app-site-association?x").unwrap();
        let json: serde_json::Value = serde_json::from_slice(body).unwrap();
        let details = &json["applinks"]["details"];
        assert_eq!(details[0]["appID"], "ABCDE12345.com.example.shop");
        assert_eq!(details[0]["appIDs"][0], "ABCDE12345.com.example.shop");
        assert_eq!(
            details[0]["paths"],
            serde_json::json!(["/*", "NOT /admin/*"])
        );
        assert_eq!(
            details[0]["components"],
            serde_json::json!([{"/": "/*"}, {"/": "/admin/*", "exclude": true}])
        );
        assert_eq!(details[1]["components"], serde_json::json!([{"/": "/*"}]));
        assert_eq!(json["applinks"]["apps"], serde_json::json!([]));
        assert_eq!(
            served(&links, ANDROID_PATH),
            None,
            "no Android app configured"
        );
    }

    #[test]
    fn android_file_is_a_statement_list() {
        let mut links = AppLinks::default();
        let lower = FINGERPRINT.replace(':', "").to_ascii_lowercase();
        links
            .add_android(&["com.example.shop", FINGERPRINT, &lower])
            .unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(served(&links, ANDROID_PATH).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{
                "relation": ["delegate_permission/common.handle_all_urls"],
                "target": {
                    "namespace": "android_app",
                    "package_name": "com.example.shop",
                    "sha256_cert_fingerprints": [FINGERPRINT, FINGERPRINT],
                }
            }])
        );
    }

    #[test]
    fn malformed_values_are_refused() {
        let mut links = AppLinks::default();
        for id in [
            "com.example.shop",
            "abcde12345.com.x",
            "ABCDE12345.",
            "ABCDE12345.a\"b",
        ] {
            assert!(links.add_apple(&[id]).is_err(), "{id}");
        }
        for path in ["admin/*", "NOT admin", "/\u{7f}"] {
            assert!(
                links.add_apple(&["ABCDE12345.com.x", path]).is_err(),
                "{path}"
            );
        }
        for package in ["shop", "com..shop", "com.1shop", "com.sh-op"] {
            assert!(
                links.add_android(&[package, FINGERPRINT]).is_err(),
                "{package}"
            );
        }
        for fingerprint in ["14:6D", &FINGERPRINT.replace("14", "1G"), "146:D"] {
            assert!(
                links.add_android(&["com.x", fingerprint]).is_err(),
                "{fingerprint}"
            );
        }
        assert!(links.add_android(&["com.x"]).is_err());
        links.add_apple(&["ABCDE12345.com.x"]).unwrap();
        assert!(links.add_apple(&["ABCDE12345.com.x"]).is_err(), "twice");
        assert!(!links.is_empty());
    }

    #[test]
    fn a_quote_in_a_path_stays_inside_its_string() {
        let mut links = AppLinks::default();
        links.add_apple(&["ABCDE12345.com.x", r#"/a"b\c"#]).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(served(&links, APPLE_PATH).unwrap()).unwrap();
        assert_eq!(json["applinks"]["details"][0]["paths"][0], r#"/a"b\c"#);
    }

    fn apple_ids(body: Option<&[u8]>) -> Vec<String> {
        let Some(body) = body else {
            return Vec::new();
        };
        let json: serde_json::Value = serde_json::from_slice(body).unwrap();
        (json["applinks"]["details"].as_array().unwrap().iter())
            .map(|app| app["appID"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn each_workspace_serves_its_own_apps_and_an_old_line_is_defaults() {
        let mut links = AppLinks::default();
        assert!(links.is_empty());
        // An apps.conf from before workspaces: lines without `workspace=`.
        links.add_apple(&["ABCDE12345.com.example.shop"]).unwrap();
        links
            .add_apple(&["workspace=brand-a", "AAAAA11111.com.brand-a.app", "/*"])
            .unwrap();
        links
            .add_android(&["workspace=brand-b", "com.brandb.app", FINGERPRINT])
            .unwrap();
        // The same app may be named by two workspaces; twice in one is refused.
        links
            .add_apple(&["workspace=brand-b", "AAAAA11111.com.brand-a.app"])
            .unwrap();
        assert!(links
            .add_apple(&["workspace=brand-a", "AAAAA11111.com.brand-a.app"])
            .is_err());
        let name = |name: &str| HostWorkspace::of_value(name.as_bytes());

        let apple = |host| apple_ids(links.file(host, AppFile::Apple));
        assert_eq!(
            apple(HostWorkspace::Default),
            ["ABCDE12345.com.example.shop"]
        );
        assert_eq!(apple(name("default")), ["ABCDE12345.com.example.shop"]);
        // Without `shortlink_workspace` every host is the default's, as before workspaces.
        assert_eq!(
            apple(HostWorkspace::Unchecked),
            ["ABCDE12345.com.example.shop"]
        );
        assert_eq!(apple(name("brand-a")), ["AAAAA11111.com.brand-a.app"]);
        assert_eq!(apple(name("brand-b")), ["AAAAA11111.com.brand-a.app"]);
        // A workspace that names no app, and a host with no workspace, serve nothing.
        assert_eq!(links.file(name("brand-c"), AppFile::Apple), None);
        assert_eq!(links.file(HostWorkspace::Nothing, AppFile::Apple), None);
        assert_eq!(links.file(name("brand-a"), AppFile::Android), None);
        assert_eq!(links.file(HostWorkspace::Default, AppFile::Android), None);
        let android: serde_json::Value =
            serde_json::from_slice(links.file(name("brand-b"), AppFile::Android).unwrap()).unwrap();
        assert_eq!(android[0]["target"]["package_name"], "com.brandb.app");
    }

    #[test]
    fn a_malformed_or_lone_workspace_is_refused() {
        let mut links = AppLinks::default();
        for workspace in [
            "workspace=",
            "workspace=Brand-A",
            "workspace=-a",
            "workspace=a b",
        ] {
            let error = links
                .add_apple(&[workspace, "ABCDE12345.com.x"])
                .unwrap_err();
            assert!(
                error.contains("not a workspace name"),
                "{workspace}: {error}"
            );
            assert!(links
                .add_android(&[workspace, "com.x", FINGERPRINT])
                .is_err());
        }
        assert!(links.add_apple(&["workspace=brand-a"]).is_err());
        assert!(links.add_android(&["workspace=brand-a"]).is_err());
        assert!(links.is_empty(), "nothing half-added");
    }

    #[test]
    fn only_the_two_paths_are_app_files() {
        assert_eq!(AppFile::asked(APPLE_PATH), Some(AppFile::Apple));
        assert_eq!(
            AppFile::asked(b"/.well-known/assetlinks.json?x=1"),
            Some(AppFile::Android)
        );
        for other in [&b"/.well-known/other.json"[..], b"/abc123", b"/", b""] {
            assert_eq!(AppFile::asked(other), None);
        }
    }
}

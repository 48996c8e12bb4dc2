//! The deployment's apps, claimed on every pool domain: iOS universal links
//! (`/.well-known/apple-app-site-association`) and Android App Links
//! (`/.well-known/assetlinks.json`), both answered by the module from the configuration, so a
//! domain added to the pool serves them after the same reload that adds it.
//!
//! A tap on a short link then opens the app when it is installed (the app gets the short URL and
//! resolves it itself), and the browser's redirect when it is not; which target each platform's
//! browser gets is a click-time rule on the device (docs/APP-LINKS.md).
//!
//! The bodies are rendered once, at configuration time, from values checked there: `nginx -t`
//! refuses a malformed app ID, package or certificate fingerprint.

use std::fmt::Write;

/// Where each file is asked for.
pub const APPLE_PATH: &[u8] = b"/.well-known/apple-app-site-association";
pub const ANDROID_PATH: &[u8] = b"/.well-known/assetlinks.json";

/// `shortlink_apple_app` and `shortlink_android_app`, and the two files they make.
#[derive(Debug, Default)]
pub struct AppLinks {
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
    /// `shortlink_apple_app <team>.<bundle> [<path>...]`: the paths default to every path.
    pub fn add_apple(&mut self, id: &str, paths: &[&str]) -> Result<(), String> {
        check_apple_id(id)?;
        let paths = match paths {
            [] => vec!["/*".to_owned()],
            paths => paths
                .iter()
                .map(|path| check_apple_path(path).map(|()| (*path).to_owned()))
                .collect::<Result<_, _>>()?,
        };
        if self.apple.iter().any(|app| app.id == id) {
            return Err(format!("the app \"{id}\" is given twice"));
        }
        self.apple.push(AppleApp {
            id: id.to_owned(),
            paths,
        });
        self.apple_body = Some(apple_association(&self.apple).into_bytes().into());
        Ok(())
    }

    /// `shortlink_android_app <package> <sha256 fingerprint>...`.
    pub fn add_android(&mut self, package: &str, fingerprints: &[&str]) -> Result<(), String> {
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
        if self.android.iter().any(|app| app.package == package) {
            return Err(format!("the app \"{package}\" is given twice"));
        }
        self.android.push(AndroidApp {
            package: package.to_owned(),
            fingerprints,
        });
        self.android_body = Some(asset_links(&self.android).into_bytes().into());
        Ok(())
    }

    /// The file asked for at `raw_uri` (its query string ignored), if this configuration has it.
    pub fn file(&self, raw_uri: &[u8]) -> Option<&[u8]> {
        let path = raw_uri.split(|&b| b == b'?').next().unwrap_or_default();
        match path {
            APPLE_PATH => self.apple_body.as_deref(),
            ANDROID_PATH => self.android_body.as_deref(),
            _ => None,
        }
    }
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

    const FINGERPRINT: &str =
        "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5";

    #[test]
    fn apple_file_has_both_generations_of_the_format() {
        let mut links = AppLinks::default();
        links
            .add_apple("ABCDE12345.com.example.shop", &["/*", "NOT /admin/*"])
            .unwrap();
        links.add_apple("ABCDE12345.com.example.beta", &[]).unwrap();
        let body = links
            .file(b"/.well-known/apple-app-site-association?x")
            .unwrap();
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
        assert_eq!(links.file(ANDROID_PATH), None, "no Android app configured");
    }

    #[test]
    fn android_file_is_a_statement_list() {
        let mut links = AppLinks::default();
        let lower = FINGERPRINT.replace(':', "").to_ascii_lowercase();
        links
            .add_android("com.example.shop", &[FINGERPRINT, &lower])
            .unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(links.file(ANDROID_PATH).unwrap()).unwrap();
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
            assert!(links.add_apple(id, &[]).is_err(), "{id}");
        }
        for path in ["admin/*", "NOT admin", "/\u{7f}"] {
            assert!(
                links.add_apple("ABCDE12345.com.x", &[path]).is_err(),
                "{path}"
            );
        }
        for package in ["shop", "com..shop", "com.1shop", "com.sh-op"] {
            assert!(
                links.add_android(package, &[FINGERPRINT]).is_err(),
                "{package}"
            );
        }
        for fingerprint in ["14:6D", &FINGERPRINT.replace("14", "1G"), "146:D"] {
            assert!(
                links.add_android("com.x", &[fingerprint]).is_err(),
                "{fingerprint}"
            );
        }
        assert!(links.add_android("com.x", &[]).is_err());
        links.add_apple("ABCDE12345.com.x", &[]).unwrap();
        assert!(links.add_apple("ABCDE12345.com.x", &[]).is_err(), "twice");
    }

    #[test]
    fn a_quote_in_a_path_stays_inside_its_string() {
        let mut links = AppLinks::default();
        links.add_apple("ABCDE12345.com.x", &[r#"/a"b\c"#]).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(links.file(APPLE_PATH).unwrap()).unwrap();
        assert_eq!(json["applinks"]["details"][0]["paths"][0], r#"/a"b\c"#);
    }
}

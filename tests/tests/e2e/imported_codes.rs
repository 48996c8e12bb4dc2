//! Imported codes (issue 40): a domain moved here from another shortener answers its old codes
//! as the old shortener did (docs/IMPORTED-DOMAINS.md), while every other domain still answers
//! them 404 without a lookup. Records are written straight to Redis in the wire format, as the
//! importer stores them; no sidecar runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use shortcode::CodeScheme;
use shortlink_e2e::{error_pages, http_client, nginx_conf, paths, CODE_SECRET, PROJECTION_MARKER};
use testkit::{free_port, port_open, temp_dir, wait_until, Lifeline, RedisServer};

/// A domain with none of the new settings: our codes only.
const PLAIN: &str = "plain.test";
/// A former YOURLS, Kutt or Bitly domain: codes as they were, case kept.
const OLD: &str = "old.test";
/// The example include, nginx/imported-domain.conf.template: a former Shlink domain in loose mode
/// with its trailing-slash option.
const LOOSE: &str = "loose.test";
/// As LOOSE, with every miss sent to a fallback that answers `$shortlink_code`: what the
/// sidecar's resolve endpoint would be asked for.
const ECHO: &str = "echo.test";
const ECHO_STATUS: u16 = 299;

struct Edge {
    port: u16,
    prefix: PathBuf,
    redis: RedisServer,
    scheme: CodeScheme,
    _process: Lifeline,
    _dir: tempfile::TempDir,
}

impl Edge {
    fn start() -> Self {
        let redis = RedisServer::start();
        let dir = temp_dir();
        let prefix = dir.path().join("nginx");
        std::fs::create_dir_all(prefix.join("tmp")).expect("create the nginx prefix");
        let module = prefix.join("ngx_shortlink.so");
        std::fs::copy(paths::module_so(), &module).expect("copy the module");
        std::fs::write(prefix.join("code-secret"), CODE_SECRET).expect("write the secret");
        std::fs::write(
            prefix.join("resolve-key.conf"),
            "proxy_set_header Authorization \"Bearer unused\";\n",
        )
        .expect("write resolve-key.conf");
        // The report locations' include (nothing reaches the sidecar here).
        std::fs::write(prefix.join("proxy-secret.conf"), "").expect("write proxy-secret.conf");
        let conf_dir = paths::workspace_dir().join("nginx");
        std::fs::write(prefix.join("error-pages.conf"), error_pages(&conf_dir))
            .expect("write error-pages.conf");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let p = prefix.display().to_string();
        let imported = render_example(
            &conf_dir,
            &[
                ("REDIRECT_LISTEN", &listen),
                ("IMPORTED_DOMAIN", LOOSE),
                ("TRUSTED_PROXY", "127.0.0.1"),
                ("PREFIX", &p),
            ],
        );
        std::fs::write(prefix.join("imported-domain.conf"), imported).expect("write the include");
        let conf = format!(
            r#"{head}    shortlink_redis {redis};
    shortlink_timeout 1s;
    shortlink_code_secret_file {p}/code-secret;
    shortlink_code_length 6;
    shortlink_cache size=1000 ttl=10s negative_ttl=1s;
    map $host $shortlink_home {{ default ""; }}
    map $host $shortlink_workspace {{ default default; }}
    # Nothing listens there: the example's @resolve is never reached in these tests.
    upstream shortlink_sidecar {{ server 127.0.0.1:{sidecar}; }}
    server {{
        listen {listen};
        server_name {PLAIN};
        location / {{ shortlink on; }}
        location = /shortlink_status {{ shortlink_status; }}
    }}
    server {{
        listen {listen};
        server_name {OLD};
        shortlink_imported_codes on;
        location / {{ shortlink on; }}
    }}
    server {{
        listen {listen};
        server_name {ECHO};
        shortlink_imported_codes on;
        shortlink_code_case lower;
        shortlink_trailing_slash on;
        location / {{
            shortlink on;
            shortlink_fallback @echo;
            shortlink_miss_fallback on;
        }}
        location @echo {{ return {ECHO_STATUS} "$shortlink_code"; }}
    }}
    include {p}/imported-domain.conf;
}}
"#,
            head = nginx_conf::conf_head(&module, &prefix, 1, 256),
            redis = redis.addr(),
            sidecar = free_port(),
        );
        std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        let process = nginx_conf::spawn_foreground(&paths::nginx_bin(), &prefix);
        let secret = shortcode::parse_hex_secret(CODE_SECRET).expect("the test secret is hex");
        let scheme = CodeScheme::new(&secret, 6, true).expect("the test scheme");
        let edge = Edge {
            port,
            prefix,
            redis,
            scheme,
            _process: process,
            _dir: dir,
        };
        assert!(
            wait_until(Duration::from_secs(10), || port_open(port)),
            "nginx did not start; error log:\n{}",
            edge.error_log()
        );
        // The marker names the module's scheme, so the check character is trusted once read.
        let marker = format!("1764000000000 {}", edge.scheme.fingerprint());
        edge.redis.cli(&["SET", PROJECTION_MARKER, &marker]);
        edge
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }

    fn store(&self, code: &str, target: &str) {
        let record = format!("1|L|302|0|0|{target}");
        assert!(shortlink_wire::record::decode(record.as_bytes()).is_ok());
        self.redis
            .set_bytes(&format!("sl:c:{code}"), record.as_bytes());
    }

    fn get(&self, host: &str, path: &str) -> (u16, String) {
        let response = http_client()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .header("Host", host)
            .send()
            .unwrap_or_else(|e| panic!("GET {path} on {host}: {e}"));
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().unwrap_or_default();
        (status, location.unwrap_or(body))
    }

    fn counters(&self) -> HashMap<String, u64> {
        let (status, body) = self.get(PLAIN, "/shortlink_status");
        assert_eq!(status, 200, "{body}");
        body.lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(' ')?;
                Some((name.to_owned(), value.parse().ok()?))
            })
            .collect()
    }

    /// One of our generated codes with upper and lower case in it.
    fn generated_mixed_case(&self) -> String {
        (1..)
            .map(|n| self.scheme.encode(n).unwrap())
            .find(|c| {
                c.bytes().any(|b| b.is_ascii_uppercase())
                    && c.bytes().any(|b| b.is_ascii_lowercase())
            })
            .unwrap()
    }

    /// A 7-character code of our generated shape whose check character is wrong, as a Bitly code
    /// has by chance 61 times in 62.
    fn bitly_like(&self) -> String {
        let mut code = self.generated_mixed_case().into_bytes();
        let last = code.len() - 1;
        code[last] = if code[last] == b'Q' { b'R' } else { b'Q' };
        let code = String::from_utf8(code).unwrap();
        assert_eq!(
            self.scheme.shape(code.as_bytes()),
            shortcode::Shape::BadCheck
        );
        code
    }

    /// Reads a code our shapes accept, so that the worker reads the marker and trusts its check
    /// character from then on.
    fn learn_scheme(&self) {
        self.store("warm-up", "https://example.com/warm-up");
        assert_eq!(self.get(PLAIN, "/warm-up").0, 302);
    }
}

/// The example include rendered as an operator would: every placeholder replaced.
fn render_example(conf_dir: &Path, vars: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(conf_dir.join("imported-domain.conf.template"))
        .expect("read the example include");
    for (name, value) in vars {
        text = text.replace(&format!("@{name}@"), value);
    }
    // `@NAME@` left over; `@resolve` and the like are nginx's named locations.
    let left: Vec<&str> = text
        .match_indices('@')
        .filter_map(|(at, _)| {
            let rest = &text[at + 1..];
            let name_len = rest
                .bytes()
                .take_while(|&b| b.is_ascii_uppercase() || b == b'_')
                .count();
            (name_len > 0 && rest[name_len..].starts_with('@')).then(|| &rest[..name_len])
        })
        .collect();
    assert!(left.is_empty(), "placeholders left: {left:?}");
    text
}

#[test]
fn an_imported_domain_answers_the_old_codes_and_other_domains_still_refuse_them() {
    let edge = Edge::start();
    edge.learn_scheme();
    let bitly = edge.bitly_like();
    let old_codes = ["1", "a2", "x.y~z", bitly.as_str()];
    for code in old_codes {
        edge.store(code, &format!("https://example.com/old/{code}"));
    }

    // Elsewhere they are no code (or fail the check character): 404 without a lookup, before
    // and after the imported domain has put them in the worker's cache.
    for round in ["cold cache", "after the imported domain"] {
        let before = edge.counters();
        for code in old_codes {
            assert_eq!(
                edge.get(PLAIN, &format!("/{code}")).0,
                404,
                "{code}, {round}"
            );
        }
        let after = edge.counters();
        assert_eq!(
            after["cache_misses"], before["cache_misses"],
            "{round}: {after:?}"
        );
        assert_eq!(
            after["cache_hits"], before["cache_hits"],
            "{round}: {after:?}"
        );
        assert_eq!(after["invalid"], before["invalid"] + 3, "{round}");
        assert_eq!(
            after["check_rejects"],
            before["check_rejects"] + 1,
            "{round}"
        );

        if round == "cold cache" {
            let before = edge.counters();
            for code in old_codes {
                let answer = edge.get(OLD, &format!("/{code}"));
                assert_eq!(answer, (302, format!("https://example.com/old/{code}")));
            }
            let after = edge.counters();
            assert_eq!(after["imported_lookups"], before["imported_lookups"] + 4);
            assert_eq!(after["cache_misses"], before["cache_misses"] + 4);
        }
    }

    // The imported domain answers them from the cache now, and keeps its case.
    let before = edge.counters();
    assert_eq!(edge.get(OLD, "/x.y~z").0, 302);
    assert_eq!(edge.counters()["cache_hits"], before["cache_hits"] + 1);
    assert_eq!(edge.get(OLD, "/X.y~z").0, 404);
    assert_eq!(edge.get(OLD, "/x.y~z/").0, 404, "no trailing slash there");

    // Our own codes work on the imported domain, and unknown old-looking codes are 404s.
    let ours = edge.generated_mixed_case();
    edge.store(&ours, "https://example.com/ours");
    assert_eq!(edge.get(OLD, &format!("/{ours}")).0, 302);
    assert_eq!(edge.get(OLD, "/zz").0, 404);
    assert_eq!(edge.get(OLD, "/a%2Eb").0, 404, "escapes stay refused");
    let imported = edge.counters()["imported_lookups"];
    assert_eq!(edge.get(OLD, &format!("/{}", "a".repeat(65))).0, 404);
    assert_eq!(
        edge.counters()["imported_lookups"],
        imported,
        "too long: no lookup"
    );
}

#[test]
fn a_lower_case_domain_folds_old_codes_and_keeps_ours() {
    let edge = Edge::start();
    edge.learn_scheme();
    edge.store("abc", "https://example.com/abc");
    let ours = edge.generated_mixed_case();
    edge.store(&ours, "https://example.com/ours");
    let bitly = edge.bitly_like();
    edge.store(&bitly.to_ascii_lowercase(), "https://example.com/folded");

    for path in ["/abc", "/AbC", "/ABC", "/abc/", "/AbC/?utm=x"] {
        assert_eq!(
            edge.get(LOOSE, path),
            (302, "https://example.com/abc".to_owned()),
            "{path}"
        );
    }
    // Our generated code is looked up as it is; its lower-case twin is another code.
    assert_eq!(
        edge.get(LOOSE, &format!("/{ours}")),
        (302, "https://example.com/ours".to_owned())
    );
    assert_eq!(edge.get(LOOSE, &format!("/{ours}/")).0, 302);
    // A generated-shape code that fails the check is an old code: folded.
    assert_eq!(
        edge.get(LOOSE, &format!("/{bitly}")),
        (302, "https://example.com/folded".to_owned())
    );
    // One slash only, and nothing after it.
    assert_eq!(edge.get(LOOSE, "/abc//").0, 404);
    assert_eq!(edge.get(LOOSE, "/abc/x").0, 404);

    // Exact-case domains do neither.
    assert_eq!(edge.get(OLD, "/AbC").0, 404);
    assert_eq!(edge.get(OLD, "/abc/").0, 404);
    assert_eq!(edge.get(PLAIN, "/abc/").0, 404);
}

#[test]
fn the_fallback_gets_the_code_the_module_looked_up() {
    let edge = Edge::start();
    edge.learn_scheme();
    let ours = edge.generated_mixed_case();
    let bitly = edge.bitly_like();
    let cases = [
        ("/AbC", "abc".to_owned()),
        ("/AbC/", "abc".to_owned()),
        ("/X.Y~Z/?q=1", "x.y~z".to_owned()),
        ("/1/", "1".to_owned()),
        (&*format!("/{ours}/"), ours.clone()),
        (&*format!("/{bitly}"), bitly.to_ascii_lowercase()),
    ];
    for (path, code) in cases {
        assert_eq!(edge.get(ECHO, path), (ECHO_STATUS, code), "{path}");
    }
}

/// `nginx -t` on a configuration with `directive` in a `shortlink on` location.
fn test_config(directive: &str) -> (bool, String) {
    let dir = temp_dir();
    let p = dir.path().display();
    let module = paths::module_so();
    let conf = format!(
        r#"load_module {module};
pid {p}/nginx.pid;
error_log {p}/error.log;
events {{ }}
http {{
    access_log off;
    shortlink_redis 127.0.0.1:6379;
    shortlink_code_check off;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            shortlink on;
            {directive}
        }}
    }}
}}
"#,
        module = module.display(),
        port = free_port(),
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    // Where nginx logs before it has read the configuration.
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let output = Command::new(paths::nginx_bin())
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .arg("-t")
        .output()
        .expect("run nginx -t");
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), text)
}

#[test]
fn nginx_t_refuses_bad_values_with_a_clear_message() {
    for good in [
        "shortlink_imported_codes on;",
        "shortlink_imported_codes off;",
        "shortlink_code_case exact;",
        "shortlink_code_case lower;",
        "shortlink_trailing_slash on;",
        "shortlink_imported_codes on; shortlink_code_case lower; shortlink_trailing_slash on;",
    ] {
        let (ok, text) = test_config(good);
        assert!(ok, "{good}: {text}");
    }
    for (bad, message) in [
        (
            "shortlink_imported_codes yes;",
            r#""shortlink_imported_codes" invalid value "yes", it must be "on" or "off""#,
        ),
        (
            "shortlink_code_case upper;",
            r#""shortlink_code_case" invalid value "upper", it must be "exact" or "lower""#,
        ),
        (
            "shortlink_trailing_slash strip;",
            r#""shortlink_trailing_slash" invalid value "strip", it must be "on" or "off""#,
        ),
        (
            "shortlink_code_case lower; shortlink_code_case exact;",
            r#""shortlink_code_case" is duplicate"#,
        ),
        (
            "shortlink_code_case;",
            r#"invalid number of arguments in "shortlink_code_case" directive"#,
        ),
    ] {
        let (ok, text) = test_config(bad);
        assert!(!ok, "{bad} was accepted");
        assert!(text.contains(message), "{bad}: {text}");
    }
}

/// Punctuation glued to a link (issue 70) on a domain whose codes may end in `.`: the exact code
/// always wins; only its miss makes the module try the code without its trailing run (a second
/// lookup, then the cache); the fallback gets the exact code and applies the same rule.
#[test]
fn an_imported_code_ending_in_a_dot_is_itself_and_glued_punctuation_is_dropped() {
    let edge = Edge::start();
    edge.learn_scheme();
    let target = |name: &str| format!("https://example.com/{name}");
    edge.store("promo.", &target("dot"));
    edge.store("promo", &target("plain"));
    edge.store("x.y", &target("xy"));

    let before = edge.counters();
    for round in ["cold cache", "cached"] {
        for (path, name) in [
            ("/promo.", "dot"),
            ("/promo..", "plain"),
            ("/promo.%E3%80%82", "plain"),
            ("/x.y.", "xy"),
            ("/x.y%2E%e3%80%82", "xy"),
        ] {
            assert_eq!(edge.get(OLD, path), (302, target(name)), "{path}, {round}");
        }
        assert_eq!(edge.get(OLD, "/nothing.").0, 404, "{round}");
        assert_eq!(edge.get(OLD, "/%E3%80%82").0, 404, "{round}");
    }
    // Where no code ends in `.`, the path is stripped before any lookup.
    assert_eq!(edge.get(PLAIN, "/promo."), (302, target("plain")));
    let after = edge.counters();
    assert_eq!(after["recovered"], before["recovered"] + 2 * 4 + 1);

    // What the fallback is asked for: the exact code when it could be one, else the stripped one.
    assert_eq!(
        edge.get(ECHO, "/missing."),
        (ECHO_STATUS, "missing.".to_owned())
    );
    assert_eq!(
        edge.get(ECHO, "/missing%E3%80%82"),
        (ECHO_STATUS, "missing".to_owned())
    );
}

#[test]
fn a_quarantined_imported_code_answers_the_warning_page() {
    let edge = Edge::start();
    edge.learn_scheme();
    edge.store("x.q~1", "https://example.com/old/one");
    assert_eq!(edge.get(OLD, "/x.q~1").0, 302);
    // As the sidecar writes a quarantine (issue 79): the record's state, nothing else.
    let quarantined = shortlink_wire::record::Record::Quarantined(None).encode();
    edge.redis.set_bytes("sl:c:x.q~1", &quarantined);
    let page = String::from_utf8(shortlink_wire::record::quarantine_page().to_vec()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || edge
        .get(OLD, "/x.q~1")
        == (451, page.clone())));
    assert_eq!(edge.get(PLAIN, "/x.q~1").0, 404, "still no code elsewhere");
}

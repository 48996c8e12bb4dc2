//! Hostile input through nginx (public redirect server) and through the API (internal API server):
//! a table of requests, each with the answer it must get, then proof that none of them changed the
//! database or Redis (both dumped before and after and compared byte for byte).

use serde_json::{json, Value};
use shortlink_e2e::{raw_http, System, API_KEY};
use std::process::Command;
use std::time::Duration;
use testkit::RedisServer;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Which server a case is sent to.
#[derive(Debug, Clone, Copy)]
enum Server {
    Redirect,
    Api,
}

struct Case {
    name: String,
    server: Server,
    request: Vec<u8>,
    /// Expected status.
    status: u16,
    /// Expected `error.code` of the API's JSON body (API cases the sidecar answers).
    error: Option<&'static str>,
}

/// Builds the table; `code` is a live generated code, `forwarding` one that forwards the query.
struct Table {
    cases: Vec<Case>,
}

impl Table {
    fn add(&mut self, name: impl Into<String>, server: Server, request: Vec<u8>, status: u16) {
        self.cases.push(Case {
            name: name.into(),
            server,
            request,
            status,
            error: None,
        });
    }

    fn api(&mut self, name: impl Into<String>, request: Vec<u8>, status: u16, error: &'static str) {
        self.cases.push(Case {
            name: name.into(),
            server: Server::Api,
            request,
            status,
            error: Some(error),
        });
    }

    /// GET `path` (raw bytes) on the redirect server, Host s1.test unless `headers` has one.
    fn get(&mut self, name: &str, path: &[u8], headers: &str, status: u16) {
        self.add(name, Server::Redirect, get(path, headers), status);
    }

    /// POST /api/v1/links with a JSON body, expecting a JSON error.
    fn create(&mut self, name: &str, body: serde_json::Value, status: u16, error: &'static str) {
        let body = body.to_string().into_bytes();
        self.api(
            name,
            api_request("POST", "/api/v1/links", AUTH, JSON, &body),
            status,
            error,
        );
    }
}

const AUTH: &str =
    "Authorization: Bearer slk_e2e_test_key_0123456789abcdefghijklmnopqrstuvwxyz\r\n";
const JSON: &str = "Content-Type: application/json\r\n";

fn get(path: &[u8], headers: &str) -> Vec<u8> {
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(path);
    request.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.to_ascii_lowercase().contains("host:") {
        request.extend_from_slice(b"Host: s1.test\r\n");
    }
    request.extend_from_slice(headers.as_bytes());
    request.extend_from_slice(b"Connection: close\r\n\r\n");
    request
}

fn api_request(method: &str, path: &str, auth: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: api.internal\r\n{auth}{content_type}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

fn api_get(path: &str) -> Vec<u8> {
    api_request("GET", path, AUTH, "", b"")
}

/// Every key with its type, value and absolute expiry: what the module could read.
fn redis_dump(redis: &RedisServer) -> String {
    let mut keys: Vec<String> = redis
        .cli_raw(&["--scan"])
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    keys.sort();
    let mut dump = String::new();
    // Hostile 404s on a pool host are orphan visits, by design ("Orphan visits" in
    // docs/ARCHITECTURE.md): the stream may carry those; that no visit was queued is
    // checked on the module's counters instead.
    for key in keys.into_iter().filter(|key| key != "sl:events") {
        let kind = redis.cli(&["TYPE", &key]);
        let value = match kind.as_str() {
            "string" => redis.cli(&["GET", &key]),
            "stream" => redis.cli(&["XRANGE", &key, "-", "+"]),
            other => format!("<{other}>"),
        };
        let expiry = redis.cli(&["EXPIRETIME", &key]);
        dump.push_str(&format!("{key} {kind} {expiry} {value}\n"));
    }
    dump
}

fn sqlite_dump(system: &System) -> String {
    let output = Command::new("sqlite3")
        .arg(system.database_path())
        .arg(".dump")
        .output()
        .expect("run sqlite3 (apt-get install sqlite3)");
    assert!(output.status.success(), "sqlite3 .dump failed");
    let dump = String::from_utf8(output.stdout).expect("the dump is text");
    // The orphan visits the hostile 404s are (and their agents), as in `redis_dump`; and
    // SQLite's search index, which its indexer fills from the links (compared here) whenever the
    // writer has been idle for half a second (migration 85).
    let recorded = [
        "INSERT INTO orphan_",
        "INSERT INTO user_agents",
        "INSERT INTO link_search",
    ];
    (dump.lines())
        .filter(|line| !recorded.iter().any(|prefix| line.starts_with(prefix)))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Creates an API key with the sidecar CLI, revokes it, and returns it.
fn revoked_key(system: &System) -> String {
    let output = system.sidecar_cli(&["keys", "create", "--name", "hostile-revoked"]);
    assert!(output.status.success(), "keys create: {output:?}");
    let key = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let id = stderr
        .split_whitespace()
        .skip_while(|word| *word != "key")
        .nth(1)
        .unwrap_or_else(|| panic!("no key id in {stderr:?}"))
        .to_owned();
    let output = system.sidecar_cli(&["keys", "revoke", &id]);
    assert!(output.status.success(), "keys revoke: {output:?}");
    key
}

#[test]
fn hostile_inputs_get_clear_answers_and_change_nothing() {
    let system = System::start();
    let api = system.api();

    // Accepted, but neutralised: an IDN homograph host is stored as punycode (what a person sees
    // in the admin list and what the Location header carries), SQL metacharacters are plain data.
    let (status, body) = api.post("/links", &json!({"url": "https://\u{0430}pple.com/login"}));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["url"], "https://xn--pple-43d.com/login");
    let homograph = body["code"].as_str().unwrap().to_owned();
    let record = system.redis.cli_raw(&["GET", &format!("sl:c:{homograph}")]);
    assert_eq!(record, "1|L|302|0|0|https://xn--pple-43d.com/login");
    let (status, body) = api.post(
        "/links",
        &json!({"url": "https://example.com/q?id=1'%20OR%20'1'='1;--", "code": "sql-test_1"}),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.get("/links/sql-test_1");
    assert_eq!(status, 200, "{body}");
    let code = system.create(json!({"url": "https://example.com/hostile"}));
    let forwarding = system.create(json!({"url": "https://example.com/f", "forward_query": true}));
    let revoked = revoked_key(&system);

    let redis_before = redis_dump(&system.redis);
    let sql_before = sqlite_dump(&system);
    let answered_before = system.nginx.counters();
    let mut t = Table { cases: Vec::new() };

    // ---- public redirect server ----
    let long_uri = format!("/{}", "a".repeat(10_000));
    t.get("over-long URI (10 kB)", long_uri.as_bytes(), "", 414);
    let big_header = format!("X-Junk: {}\r\n", "a".repeat(9_000));
    t.get(
        "over-long header (9 kB)",
        format!("/{code}").as_bytes(),
        &big_header,
        400,
    );
    let many = (0..6)
        .map(|i| format!("X-Junk-{i}: {}\r\n", "b".repeat(7_000)))
        .collect::<String>();
    t.get("headers over 4 x 8 kB in total", b"/x", &many, 400);
    let first = code.as_bytes()[0];
    let encoded = format!("/%{first:02X}{}", &code[1..]);
    t.get("percent-encoded code", encoded.as_bytes(), "", 404);
    let double = format!("/%25{first:02X}{}", &code[1..]);
    t.get("double-encoded code", double.as_bytes(), "", 404);
    t.get("encoded slash", format!("/%2F{code}").as_bytes(), "", 404);
    t.get(
        "`..` above the root",
        format!("/../{code}").as_bytes(),
        "",
        400,
    );
    t.get(
        "`..` inside the path",
        format!("/x/../{code}").as_bytes(),
        "",
        404,
    );
    t.get(
        "encoded `..` above the root",
        format!("/%2e%2e/{code}").as_bytes(),
        "",
        400,
    );
    t.get(
        "`//` before the code",
        format!("//{code}").as_bytes(),
        "",
        404,
    );
    t.get("trailing slash", format!("/{code}/").as_bytes(), "", 404);
    t.get("path parameter", format!("/{code};x=1").as_bytes(), "", 404);
    t.get("backslash", b"/\\evil.example", "", 404);
    t.get(
        "encoded NUL after the code",
        format!("/{code}%00").as_bytes(),
        "",
        400,
    );
    let mut nul = format!("/{code}").into_bytes();
    nul.push(0);
    t.get("raw NUL in the path", &nul, "", 400);
    t.get("raw control byte in the path", b"/ab\x01cd", "", 400);
    t.get("raw DEL in the path", b"/abc\x7fd", "", 400);
    t.get("invalid UTF-8 in the path", b"/\xff\xfe\xfd", "", 404);
    let mut tail = format!("/{code}").into_bytes();
    tail.extend_from_slice(b"\xc3");
    t.get("code + truncated UTF-8", &tail, "", 404);
    t.get(
        "fullwidth homoglyph code",
        "/ａｂｃｄｅｆｇ".as_bytes(),
        "",
        404,
    );
    t.get(
        "65-character alias",
        format!("/{}", "a".repeat(65)).as_bytes(),
        "",
        404,
    );
    t.get("dot in the code", b"/index.php", "", 404);
    t.get(
        "encoded CR/LF after the code",
        format!("/{code}%0d%0aSet-Cookie:%20x=1").as_bytes(),
        "",
        404,
    );
    let mut crlf = format!("/{forwarding}?a=1\rSet-Cookie: x=1").into_bytes();
    crlf.push(b'\n');
    t.get("raw CR in a forwarded query", &crlf, "", 400);
    t.get(
        "Host outside the pool",
        format!("/{code}").as_bytes(),
        "Host: evil.example\r\n",
        404,
    );
    t.get(
        "absolute-form URI on another host",
        format!("http://evil.example/{code}").as_bytes(),
        "",
        404,
    );
    t.get("Host with a slash", b"/x", "Host: s1.test/evil\r\n", 400);
    t.get("Host with NUL", b"/x", "Host: s1.test\0evil\r\n", 400);
    t.get(
        "two Host headers",
        b"/x",
        "Host: s1.test\r\nHost: evil.example\r\n",
        400,
    );
    t.add(
        "HTTP/1.1 without Host",
        Server::Redirect,
        format!("GET /{code} HTTP/1.1\r\nConnection: close\r\n\r\n").into_bytes(),
        400,
    );
    t.add(
        "Content-Length and Transfer-Encoding (smuggling)",
        Server::Redirect,
        format!(
            "POST /{code} HTTP/1.1\r\nHost: s1.test\r\nContent-Length: 4\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        )
        .into_bytes(),
        400,
    );
    t.add(
        "TRACE",
        Server::Redirect,
        format!("TRACE /{code} HTTP/1.1\r\nHost: s1.test\r\nConnection: close\r\n\r\n")
            .into_bytes(),
        405,
    );
    t.get("the API on the public server", b"/api/v1/links", AUTH, 404);
    t.get(
        "the status page on the public server",
        b"/shortlink_status",
        "",
        404,
    );
    t.add(
        "not HTTP at all",
        Server::Redirect,
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n".to_vec(),
        400,
    );

    // ---- internal API server: keys ----
    let body = json!({"url": "https://example.com/new"})
        .to_string()
        .into_bytes();
    t.api(
        "no API key",
        api_request("POST", "/api/v1/links", "", JSON, &body),
        401,
        "missing_api_key",
    );
    t.api(
        "Basic instead of Bearer",
        api_request(
            "POST",
            "/api/v1/links",
            "Authorization: Basic YWRtaW46YWRtaW4=\r\n",
            JSON,
            &body,
        ),
        401,
        "missing_api_key",
    );
    let forged = format!("Authorization: Bearer slk_{}\r\n", "0".repeat(64));
    t.api(
        "forged API key",
        api_request("POST", "/api/v1/links", &forged, JSON, &body),
        401,
        "invalid_api_key",
    );
    let revoked_auth = format!("Authorization: Bearer {revoked}\r\n");
    t.api(
        "revoked API key",
        api_request("POST", "/api/v1/links", &revoked_auth, JSON, &body),
        401,
        "revoked_api_key",
    );
    t.api(
        "SQL in the API key",
        api_request(
            "POST",
            "/api/v1/links",
            "Authorization: Bearer ' OR '1'='1\r\n",
            JSON,
            &body,
        ),
        401,
        "invalid_api_key",
    );
    let long_key = format!("Authorization: Bearer {}\r\n", "k".repeat(4000));
    t.api(
        "4 kB API key",
        api_request("POST", "/api/v1/links", &long_key, JSON, &body),
        401,
        "invalid_api_key",
    );
    let prefix_key = format!(
        "Authorization: Bearer {}\r\n",
        &API_KEY[..API_KEY.len() - 1]
    );
    t.api(
        "the valid key minus its last character",
        api_request("POST", "/api/v1/links", &prefix_key, JSON, &body),
        401,
        "invalid_api_key",
    );

    // ---- internal API server: targets ----
    t.create(
        "javascript: target",
        json!({"url": "javascript:alert(document.cookie)"}),
        422,
        "unsupported_scheme",
    );
    t.create(
        "JavaScript: in mixed case",
        json!({"url": "JaVaScRiPt:alert(1)"}),
        422,
        "unsupported_scheme",
    );
    t.create(
        "data: target",
        json!({"url": "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="}),
        422,
        "unsupported_scheme",
    );
    t.create(
        "file: target",
        json!({"url": "file:///etc/passwd"}),
        422,
        "unsupported_scheme",
    );
    t.create(
        "scheme-relative target",
        json!({"url": "//evil.example/"}),
        422,
        "invalid_url",
    );
    t.create(
        "lenient http:host",
        json!({"url": "http:evil.example"}),
        422,
        "invalid_url",
    );
    t.create(
        "backslashes after the scheme",
        json!({"url": "https:\\\\evil.example"}),
        422,
        "invalid_url",
    );
    t.create(
        "CR/LF in the target (header injection)",
        json!({"url": "https://a.example/\r\nSet-Cookie: x=1"}),
        422,
        "invalid_url",
    );
    t.create(
        "NUL in the target",
        json!({"url": "https://a.example/\u{0}x"}),
        422,
        "invalid_url",
    );
    t.create(
        "tab in the host",
        json!({"url": "https://exa\tmple.com/"}),
        422,
        "invalid_url",
    );
    t.create(
        "credentials in the target",
        json!({"url": "https://s1.test@evil.example/"}),
        422,
        "invalid_url",
    );
    t.create(
        "target on our own domain",
        json!({"url": "https://s1.test/x"}),
        422,
        "own_domain",
    );
    t.create(
        "own domain, upper case, trailing dot",
        json!({"url": "http://S2.TEST./x"}),
        422,
        "own_domain",
    );
    t.create(
        "target of 6000 bytes",
        json!({"url": format!("https://a.example/{}", "x".repeat(6000))}),
        422,
        "url_too_long",
    );
    t.create(
        "target that is a number",
        json!({"url": 42}),
        422,
        "invalid_body",
    );
    t.create("no url", json!({"code": "abcde-f"}), 422, "invalid_body");
    t.create(
        "unknown field",
        json!({"url": "https://a.example/", "admin": true}),
        422,
        "invalid_body",
    );

    // ---- internal API server: aliases and other fields ----
    t.create(
        "SQL in an alias",
        json!({"url": "https://a.example/", "code": "x'; DROP TABLE links;--"}),
        422,
        "invalid_code",
    );
    t.create(
        "path traversal alias",
        json!({"url": "https://a.example/", "code": "../../etc"}),
        422,
        "invalid_code",
    );
    t.create(
        "alias with NUL",
        json!({"url": "https://a.example/", "code": "abc\u{0}def"}),
        422,
        "invalid_code",
    );
    t.create(
        "Cyrillic alias",
        json!({"url": "https://a.example/", "code": "\u{0430}pple"}),
        422,
        "invalid_code",
    );
    t.create(
        "alias of the generated shape",
        json!({"url": "https://a.example/", "code": code}),
        422,
        "invalid_code",
    );
    t.create(
        "alias already taken",
        json!({"url": "https://a.example/", "code": "sql-test_1"}),
        409,
        "code_taken",
    );
    t.create(
        "redirect 200",
        json!({"url": "https://a.example/", "redirect": 200}),
        422,
        "invalid_redirect",
    );
    t.create(
        "expiry in the past",
        json!({"url": "https://a.example/", "expires_at": "2001-01-01T00:00:00Z"}),
        422,
        "invalid_expiry",
    );
    t.create(
        "expiry that is not a time",
        json!({"url": "https://a.example/", "expires_at": "'; DROP TABLE links;--"}),
        422,
        "invalid_body",
    );

    // ---- internal API server: bodies ----
    t.api(
        "malformed JSON",
        api_request("POST", "/api/v1/links", AUTH, JSON, b"{\"url\":"),
        400,
        "malformed_json",
    );
    t.api(
        "invalid UTF-8 in JSON",
        api_request(
            "POST",
            "/api/v1/links",
            AUTH,
            JSON,
            b"{\"url\":\"https://a.example/\xff\"}",
        ),
        400,
        "malformed_json",
    );
    for (name, nested) in [
        (
            "JSON nested 5000 deep in url (refused at the first wrong type)",
            format!("{{\"url\":{}1{}}}", "[".repeat(5000), "]".repeat(5000)),
        ),
        (
            "JSON array nested 5000 deep",
            format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
        ),
        (
            "JSON object nested 3000 deep",
            format!("{}1{}", "{\"a\":".repeat(3000), "}".repeat(3000)),
        ),
    ] {
        let request = api_request("POST", "/api/v1/links", AUTH, JSON, nested.as_bytes());
        t.api(name, request, 422, "invalid_body");
    }
    t.api(
        "text/plain body",
        api_request(
            "POST",
            "/api/v1/links",
            AUTH,
            "Content-Type: text/plain\r\n",
            &body,
        ),
        415,
        "unsupported_media_type",
    );
    t.api(
        "no content type",
        api_request("POST", "/api/v1/links", AUTH, "", &body),
        415,
        "unsupported_media_type",
    );
    t.api(
        "form-encoded body",
        api_request(
            "POST",
            "/api/v1/links",
            AUTH,
            "Content-Type: application/x-www-form-urlencoded\r\n",
            b"url=https%3A%2F%2Fa.example%2F",
        ),
        415,
        "unsupported_media_type",
    );
    t.api(
        "PATCH to a javascript: target",
        api_request(
            "PATCH",
            &format!("/api/v1/links/{code}"),
            AUTH,
            JSON,
            br#"{"url":"javascript:alert(1)"}"#,
        ),
        422,
        "unsupported_scheme",
    );
    t.api(
        "PATCH with no field",
        api_request("PATCH", &format!("/api/v1/links/{code}"), AUTH, JSON, b"{}"),
        422,
        "empty_patch",
    );
    // ---- internal API server: click-time rules (issue 34) ----
    let long_url = format!("https://t.example/{}", "a".repeat(4000));
    let many_rules = vec![json!({"if": {}, "then": {"url": long_url}}); 16];
    for (name, rules, status, error) in [
        (
            "rule with an unknown condition",
            json!([{"if": {"colour": ["red"]}, "then": {"url": "https://t.example/"}}]),
            422,
            "invalid_rules",
        ),
        (
            "rule with a CIDR that has host bits",
            json!([{"if": {"ip": ["10.0.0.1/8"]}, "then": {"url": "https://t.example/"}}]),
            422,
            "invalid_rules",
        ),
        (
            "split whose weights sum to zero",
            json!([{"if": {}, "split": {"variants": [{"weight": 0, "url": "https://a.example/"}, {"weight": 0, "url": "https://b.example/"}]}}]),
            422,
            "invalid_rules",
        ),
        (
            "rule to a javascript: target",
            json!([{"if": {"device": ["ios"]}, "then": {"url": "javascript:alert(1)"}}]),
            422,
            "unsupported_scheme",
        ),
        (
            "seventeen rules",
            Value::Array(vec![
                json!({"if": {}, "then": {"url": "https://t.example/"}});
                17
            ]),
            422,
            "invalid_rules",
        ),
        (
            "rules over the record's size",
            Value::Array(many_rules),
            422,
            "record_too_large",
        ),
        (
            "rule in an unknown time zone",
            json!([{"if": {"weekly": {"days": ["mon"], "hours": [9], "zone": "../../etc/passwd"}}, "then": {"url": "https://t.example/"}}]),
            422,
            "invalid_rules",
        ),
    ] {
        let create =
            serde_json::to_vec(&json!({"url": "https://a.example/", "rules": rules})).unwrap();
        t.api(
            format!("create: {name}"),
            api_request("POST", "/api/v1/links", AUTH, JSON, &create),
            status,
            error,
        );
        let patch = serde_json::to_vec(&json!({ "rules": rules })).unwrap();
        t.api(
            format!("PATCH: {name}"),
            api_request(
                "PATCH",
                &format!("/api/v1/links/{code}"),
                AUTH,
                JSON,
                &patch,
            ),
            status,
            error,
        );
    }
    t.api(
        "rules nested a thousand deep",
        api_request(
            "POST",
            "/api/v1/links",
            AUTH,
            JSON,
            format!(
                r#"{{"url":"https://a.example/","rules":{}{}}}"#,
                "[".repeat(1000),
                "]".repeat(1000)
            )
            .as_bytes(),
        ),
        400,
        "malformed_json",
    );
    t.api(
        "PUT on the collection",
        api_request("PUT", "/api/v1/links", AUTH, JSON, &body),
        405,
        "method_not_allowed",
    );

    // ---- internal API server: paths and queries ----
    t.api(
        "SQL in a link path",
        api_get("/api/v1/links/x'%20OR%20'1'='1"),
        404,
        "not_found",
    );
    t.add(
        "encoded NUL in a link path",
        Server::Api,
        api_get("/api/v1/links/abc%00"),
        400,
    );
    t.api(
        "DELETE of an SQL path",
        api_request(
            "DELETE",
            "/api/v1/links/%27%3B%20DROP%20TABLE%20links%3B--",
            AUTH,
            "",
            b"",
        ),
        404,
        "not_found",
    );
    t.api(
        "SQL in limit",
        api_get("/api/v1/links?limit=1%20OR%201=1"),
        400,
        "invalid_query",
    );
    t.api(
        "negative limit",
        api_get("/api/v1/links?limit=-1"),
        400,
        "invalid_query",
    );
    t.api(
        "limit 0",
        api_get("/api/v1/links?limit=0"),
        400,
        "invalid_query",
    );
    t.api(
        "limit of a million",
        api_get("/api/v1/links?limit=1000000"),
        400,
        "invalid_query",
    );
    t.api(
        "SQL in cursor",
        api_get("/api/v1/links?cursor=%27%20OR%201%3D1--"),
        400,
        "invalid_cursor",
    );
    t.api(
        "resolve without a key",
        api_request("GET", &format!("/api/v1/resolve/{code}"), "", "", b""),
        401,
        "missing_api_key",
    );
    t.add(
        "forged X-Shortlink-Pool cannot lift the own-domain rule",
        Server::Api,
        api_request(
            "POST",
            "/api/v1/links",
            &format!("{AUTH}X-Shortlink-Pool: nothing.example\r\n"),
            JSON,
            br#"{"url":"https://s1.test/loop"}"#,
        ),
        422,
    );

    // Oversized batches: only once the batch endpoint exists (issue 5).
    let probe = raw_http(
        system.nginx.api_port,
        &api_request("POST", "/api/v1/links/batch", AUTH, JSON, b"not json"),
        TIMEOUT,
    );
    if probe.status == 404 || probe.status == 405 {
        println!(
            "skipped: POST /api/v1/links/batch does not exist yet ({})",
            probe.status
        );
    } else {
        let items: Vec<_> = (0..20_000)
            .map(|i| json!({"url": format!("https://a.example/{i}")}))
            .collect();
        let batch = json!({"links": items}).to_string();
        let response = raw_http(
            system.nginx.api_port,
            &api_request("POST", "/api/v1/links/batch", AUTH, JSON, batch.as_bytes()),
            TIMEOUT,
        );
        assert!(
            response.status == 413 || response.status == 422,
            "oversized batch: {} {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        );
        println!("oversized batch: {}", response.status);
    }

    // Last: the sidecar answers 413 before reading the body, and the upstream keep-alive
    // connection it leaves behind can fail the next proxied POST with 502 (see
    // `an_early_rejection_does_not_poison_the_next_request`).
    let huge = format!("{{\"url\":\"https://a.example/{}\"}}", "x".repeat(1 << 20));
    t.api(
        "1 MiB JSON body",
        api_request("POST", "/api/v1/links", AUTH, JSON, huge.as_bytes()),
        413,
        "payload_too_large",
    );

    let mut failures = Vec::new();
    for case in &t.cases {
        let port = match case.server {
            Server::Redirect => system.nginx.redirect_port,
            Server::Api => system.nginx.api_port,
        };
        let response = raw_http(port, &case.request, TIMEOUT);
        let error = response
            .json()
            .and_then(|body| body["error"]["code"].as_str().map(str::to_owned));
        let ok = response.status == case.status
            && case.error.is_none_or(|want| error.as_deref() == Some(want));
        if !ok {
            failures.push(format!(
                "{}: want {} {:?}, got {} {:?} {}",
                case.name,
                case.status,
                case.error,
                response.status,
                error,
                String::from_utf8_lossy(&response.body[..response.body.len().min(200)])
            ));
        }
    }
    // The public server answered every hostile request without asking the sidecar's API.
    assert!(
        failures.is_empty(),
        "{} of {} hostile inputs got the wrong answer:\n{}\nnginx error log:\n{}",
        failures.len(),
        t.cases.len(),
        failures.join("\n"),
        system.nginx.error_log()
    );

    assert_eq!(redis_dump(&system.redis), redis_before, "Redis changed");
    let answered = system.nginx.counters();
    for visit_kind in ["redirects", "gone"] {
        assert_eq!(
            answered[visit_kind], answered_before[visit_kind],
            "no hostile request is a visit ({visit_kind})"
        );
    }
    assert_eq!(sqlite_dump(&system), sql_before, "the database changed");
    let worker_crashes = system.nginx.error_log_lines("exited on signal");
    assert!(worker_crashes.is_empty(), "{worker_crashes:?}");
    println!(
        "hostile inputs checked: {} ({} redirect server, {} API), database and Redis unchanged",
        t.cases.len(),
        t.cases
            .iter()
            .filter(|c| matches!(c.server, Server::Redirect))
            .count(),
        t.cases
            .iter()
            .filter(|c| matches!(c.server, Server::Api))
            .count(),
    );
}

/// The sidecar refuses an oversized body (413) before reading it; nginx must not then reuse that
/// upstream connection for the next request (it did, and 6 of 20 followers got 502, until the
/// sidecar closed such connections: docs/SECURITY.md, "Findings").
#[test]
fn an_early_rejection_does_not_poison_the_next_request() {
    let system = System::start();
    let huge = format!("{{\"url\":\"https://a.example/{}\"}}", "x".repeat(1 << 20));
    let small = json!({"url": "https://example.com/after-413"}).to_string();
    let mut bad_gateways = 0;
    let rounds = 20;
    for _ in 0..rounds {
        let response = raw_http(
            system.nginx.api_port,
            &api_request("POST", "/api/v1/links", AUTH, JSON, huge.as_bytes()),
            TIMEOUT,
        );
        assert_eq!(response.status, 413);
        let response = raw_http(
            system.nginx.api_port,
            &api_request("POST", "/api/v1/links", AUTH, JSON, small.as_bytes()),
            TIMEOUT,
        );
        if response.status == 502 {
            bad_gateways += 1;
        } else {
            assert_eq!(response.status, 201);
        }
    }
    println!("502 after an early 413: {bad_gateways} of {rounds}");
    assert_eq!(bad_gateways, 0);
}

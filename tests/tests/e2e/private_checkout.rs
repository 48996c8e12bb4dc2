//! A checkout nginx's workers cannot read (issue 24). Started as root, nginx's master reads the
//! configuration and then runs its workers as `nobody`, who cannot enter a directory of mode 0700
//! (root's home, `mktemp -d`). Nothing a worker does at request time may need a file: the error pages
//! are part of the configuration, request bodies and proxied responses stay in memory. As another
//! user every file is the workers' own, and the same checks still hold.

use serde_json::{json, Value};
use shortlink_e2e::{
    error_pages, http_client, paths, run_as_nobody, NginxOptions, System, API_KEY,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of the checkout's `nginx/` and `scripts/` inside a fresh directory of mode 0700.
fn private_checkout() -> (tempfile::TempDir, std::path::PathBuf) {
    let private = testkit::temp_dir();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let checkout = private.path().join("checkout");
    for dir in ["nginx", "scripts"] {
        copy_dir(&paths::workspace_dir().join(dir), &checkout.join(dir));
    }
    (private, checkout)
}

fn page(checkout: &Path, status: u16) -> String {
    std::fs::read_to_string(checkout.join(format!("nginx/errors/{status}.html"))).unwrap()
}

fn assert_page(response: reqwest::blocking::Response, status: u16, checkout: &Path) {
    assert_eq!(response.status(), status);
    assert_eq!(
        response.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    assert_eq!(
        response.text().unwrap(),
        page(checkout, status),
        "{status} page"
    );
}

#[test]
fn a_checkout_the_workers_cannot_read_answers_with_its_own_pages_and_large_bodies() {
    let (_private, checkout) = private_checkout();
    // A page longer than one nginx string (4 KiB), with quotes and backslashes, served whole.
    let gone = checkout.join("nginx/errors/410.html");
    let mut text = std::fs::read_to_string(&gone).unwrap();
    text.push_str(&format!("<!-- it's \\n \\ {} -->\n", "x".repeat(6_000)));
    std::fs::write(&gone, text).unwrap();
    let mut system = System::start_with(NginxOptions {
        conf_dir: Some(checkout.join("nginx")),
        fallback: "off",
        cache: "off",
        ..NginxOptions::default()
    });

    // The premise: under a root master the workers are someone else, who can read neither the
    // checkout nor the prefix.
    let error_page_file = checkout.join("nginx/errors/404.html");
    let prefix_conf = system.nginx.prefix.join("nginx.conf");
    match run_as_nobody(
        "cat",
        &[error_page_file.as_os_str(), prefix_conf.as_os_str()],
    ) {
        Some(output) => {
            assert!(!output.status.success(), "nobody can read the checkout");
            let master = system.nginx.pid_file_pid().expect("nginx.pid").to_string();
            let workers = Command::new("ps")
                .args(["-o", "user=", "--ppid", &master])
                .output()
                .unwrap();
            let users = String::from_utf8_lossy(&workers.stdout);
            assert_eq!(users.trim(), "nobody", "the worker's user");
        }
        None => eprintln!("not root: the workers run as this user; checking the answers only"),
    }

    // 404: an unknown alias (asked of Redis) and a forged check character (refused before).
    assert_page(
        system.nginx.get("s1.test", "/no-such-alias"),
        404,
        &checkout,
    );
    let code = system.create(json!({"url": "https://example.com/private"}));
    let mut forged = code.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'a' { b'b' } else { b'a' };
    let forged = String::from_utf8(forged).unwrap();
    assert_page(
        system.nginx.get("s1.test", &format!("/{forged}")),
        404,
        &checkout,
    );
    let head = system
        .nginx
        .request(reqwest::Method::HEAD, "s1.test", "/no-such-alias");
    assert_eq!(head.status(), 404);

    // 410: a revoked link.
    let revoked = system.create(json!({"url": "https://example.com/revoked"}));
    let (status, body) = system.api().delete(&format!("/links/{revoked}"));
    assert!((200..300).contains(&status), "revoke: {status} {body}");
    assert_page(
        system.nginx.get("s1.test", &format!("/{revoked}")),
        410,
        &checkout,
    );

    // Request bodies above nginx's default 16 KiB buffer, with a length and chunked.
    let api = format!("http://127.0.0.1:{}/api/v1", system.nginx.api_port);
    let padded = format!(
        "{{\"url\":\"https://example.com/padded\"}}{}",
        " ".repeat(40_000)
    );
    for chunked in [false, true] {
        let body = if chunked {
            reqwest::blocking::Body::new(std::io::Cursor::new(padded.clone().into_bytes()))
        } else {
            reqwest::blocking::Body::from(padded.clone())
        };
        let response = http_client()
            .post(format!("{api}/links"))
            .bearer_auth(API_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap();
        let status = response.status();
        assert_eq!(
            status,
            201,
            "chunked {chunked}: {}",
            response.text().unwrap()
        );
    }

    // A response far above the proxy buffers (4 MB): 996 links of 4,000-character URLs in one page.
    let long = "a".repeat(4_000);
    let items: Vec<Value> = (0..996)
        .map(|i| json!({"url": format!("https://example.com/{i}/{long}")}))
        .collect();
    let response = http_client()
        .post(format!("{api}/links/batch"))
        .bearer_auth(API_KEY)
        .json(&items)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let results = response.text().unwrap();
    assert_eq!(
        results.matches("\"status\":201").count(),
        996,
        "{results:.500}"
    );
    // A client that reads the headers and then pauses is what makes nginx spool a buffered
    // response to a temporary file (the pause is the stimulus, not a wait for anything).
    let mut stream = TcpStream::connect(("127.0.0.1", system.nginx.api_port)).unwrap();
    write!(
        stream,
        "GET /api/v1/links?limit=1000 HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {API_KEY}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = vec![0u8; 4096];
    let first = stream.read(&mut reply).unwrap();
    reply.truncate(first);
    std::thread::sleep(Duration::from_millis(300));
    stream.read_to_end(&mut reply).unwrap();
    let text = String::from_utf8(reply).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.len() > 1_000_000, "{} bytes", body.len());
    let page: Value = serde_json::from_str(body).expect("the whole list, as JSON");
    assert_eq!(page["links"].as_array().map(Vec::len), Some(1000));

    // 503: Redis down and no fallback.
    system.redis.kill();
    assert_page(
        system.nginx.get("s1.test", &format!("/{code}")),
        503,
        &checkout,
    );

    let log = system.nginx.error_log();
    for needle in ["Permission denied", "temporary file"] {
        assert!(!log.contains(needle), "{needle} in the error log:\n{log}");
    }
}

/// `scripts/render-nginx` (what `scripts/run` uses) writes the same error pages as the test harness
/// and the fallback's key include of mode 0600, and refuses a page or key nginx would misread.
#[test]
fn render_nginx_writes_the_pages_the_harness_writes() {
    let (private, checkout) = private_checkout();
    let template = [
        "nginx.conf.template",
        "domains.conf.template",
        "home.conf.template",
        "redirect.conf.template",
        "to-https.conf.template",
        "tls-domain.conf.template",
    ]
    .map(|name| std::fs::read_to_string(checkout.join("nginx").join(name)).unwrap())
    .concat();
    // Every `@NAME@` placeholder (named locations such as `@resolve` are lower case).
    let mut names: Vec<&str> = template
        .match_indices('@')
        .filter_map(|(at, _)| {
            let rest = &template[at + 1..];
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_uppercase() || *b == b'_')
                .count();
            (len > 0 && rest[len..].starts_with('@')).then(|| &rest[..len])
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let prefix = private.path().join("prefix");
    std::fs::create_dir(&prefix).unwrap();
    let key_file = private.path().join("resolve-key");
    let key = "slk_0123456789abcdef";
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    let render = || {
        Command::new(checkout.join("scripts/render-nginx"))
            .arg(&prefix)
            .arg(format!("RESOLVE_KEY_FILE={}", key_file.display()))
            .args(names.iter().map(|name| format!("{name}=x")))
            .output()
            .unwrap()
    };
    // Renders, and finds the error pages included as the checkout's nginx/errors has them.
    let rendered_pages_are_the_checkouts = || {
        let output = render();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let written = std::fs::read(prefix.join("error-pages.conf")).unwrap();
        assert_eq!(written, error_pages(&checkout.join("nginx")));
    };

    rendered_pages_are_the_checkouts();
    // The fallback's key: only in its own include, mode 0600.
    let key_conf = prefix.join("resolve-key.conf");
    assert_eq!(
        std::fs::read_to_string(&key_conf).unwrap(),
        format!("proxy_set_header Authorization \"Bearer {key}\";\n")
    );
    assert_eq!(
        std::fs::metadata(&key_conf).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let conf = std::fs::read_to_string(prefix.join("nginx.conf")).unwrap();
    let locations = std::fs::read_to_string(prefix.join("redirect.conf")).unwrap();
    assert!(!conf.contains(key) && !locations.contains(key));
    assert!(locations.contains("resolve-key.conf"));

    // A page above one nginx string (4 KiB), with quotes and backslashes, survives the trip.
    let big = format!("<p>it's \\ {}</p>\n", "x".repeat(9_000));
    std::fs::write(checkout.join("nginx/errors/410.html"), &big).unwrap();
    rendered_pages_are_the_checkouts();

    // Anything but a key would be configuration.
    std::fs::write(&key_file, "k\"; deny all; #").unwrap();
    let output = render();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not hold an API key"));
    std::fs::write(&key_file, key).unwrap();

    std::fs::write(checkout.join("nginx/errors/404.html"), "<p>$5 off</p>").unwrap();
    let output = render();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("404.html") && stderr.contains("&#36;"),
        "{stderr}"
    );
}

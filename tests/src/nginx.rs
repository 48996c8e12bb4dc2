//! nginx with the shortlink module, configured from the project's templates.

use crate::{paths, CODE_SECRET, POOL};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testkit::{free_port, port_open, wait_until, Lifeline, Signal};

/// What a test may vary in the rendered configuration.
#[derive(Debug, Clone)]
pub struct NginxOptions {
    /// `shortlink_fallback` argument: `@resolve` (the sidecar) or `off` (503).
    pub fallback: &'static str,
    /// `shortlink_cache` arguments, or `off`.
    pub cache: &'static str,
    pub redis_timeout: &'static str,
    pub workers: u32,
    /// `shortlink_events_buffer`: visit events a worker keeps while Redis is unreachable.
    pub events_buffer: u32,
    /// `shortlink_redis` address instead of the system's Redis (e.g. a fault-injecting proxy).
    pub redis_addr: Option<String>,
    /// `shortlink_redis_cluster` seeds (space-separated) instead of `shortlink_redis`.
    pub redis_cluster: Option<String>,
    /// Let nginx daemonize (its master then has no living parent), as binary upgrades need: nginx
    /// ignores USR2 while the parent that started it is alive. A lifeline-held `sh` stops whichever
    /// master `nginx.pid` names when the test ends; signal the master with [`Nginx::signal_master`].
    pub daemon: bool,
    /// Where the templates and error pages come from instead of the workspace's `nginx/` (e.g. a
    /// copy in a directory nginx's workers cannot read).
    pub conf_dir: Option<PathBuf>,
    /// The module's code secret (hex) instead of the sidecar's [`CODE_SECRET`].
    pub code_secret: Option<&'static str>,
    /// Certificates in certbot's layout (`<dir>/<domain>/{fullchain,privkey}.pem`): every pool
    /// domain gets an HTTPS server, as `scripts/render-nginx TLS_CERTS=<dir>` writes it.
    pub tls_certs: Option<PathBuf>,
    /// The pool instead of [`POOL`].
    pub pool: Option<Vec<String>>,
    /// `$shortlink_public_base` (the issuing list, weights and all) instead of
    /// `http://<first pool domain>`.
    pub public_base: Option<String>,
    /// `PLAIN_HTTP`: `redirect` (plain HTTP answers codes) or `to-https`.
    pub plain_http: &'static str,
    /// Where the plain HTTP server answers ACME HTTP-01 challenges from (default: in the prefix).
    pub acme_webroot: Option<PathBuf>,
}

impl Default for NginxOptions {
    fn default() -> Self {
        NginxOptions {
            fallback: "@resolve",
            cache: "size=1000 ttl=10s negative_ttl=1s",
            redis_timeout: "300ms",
            events_buffer: 10_000,
            // One worker: the status counters and the cache are per worker.
            workers: 1,
            redis_addr: None,
            redis_cluster: None,
            daemon: false,
            conf_dir: None,
            code_secret: None,
            tls_certs: None,
            pool: None,
            public_base: None,
            plain_http: "redirect",
            acme_webroot: None,
        }
    }
}

pub struct Nginx {
    pub redirect_port: u16,
    /// The HTTPS listener of the redirect server.
    pub tls_port: u16,
    pub api_port: u16,
    pub prefix: PathBuf,
    pub process: Lifeline,
    bin: PathBuf,
}

impl Nginx {
    /// nginx with the project's configuration in `dir`, in front of the sidecar listening on
    /// `sidecar_port` (benchmarks put it in front of a sidecar of their own).
    pub fn start(
        dir: &tempfile::TempDir,
        redis: &str,
        sidecar_port: u16,
        resolve_key: &str,
        options: NginxOptions,
    ) -> Self {
        let prefix = dir.path().join("nginx");
        std::fs::create_dir_all(prefix.join("tmp")).expect("create the nginx prefix");
        // A private copy: a rebuilt module must never replace a file a running nginx has mapped.
        let module = prefix.join("ngx_shortlink.so");
        std::fs::copy(paths::module_so(), &module).expect("copy the module");
        let secret = prefix.join("code-secret");
        write_private(
            &secret,
            options.code_secret.unwrap_or(CODE_SECRET).as_bytes(),
        );
        // The fallback's key in an include of its own, as scripts/render-nginx writes it.
        write_private(
            &prefix.join("resolve-key.conf"),
            format!("proxy_set_header Authorization \"Bearer {resolve_key}\";\n").as_bytes(),
        );

        let redirect_port = free_port();
        let api_port = free_port();
        let tls_port = free_port();
        let pool = options
            .pool
            .clone()
            .unwrap_or_else(|| POOL.map(str::to_owned).to_vec());
        let acme_webroot = options
            .acme_webroot
            .clone()
            .unwrap_or_else(|| prefix.join("acme"));
        let tls_domains = match &options.tls_certs {
            Some(certs) => tls_domains(certs, &pool, &prefix),
            None => "# (no HTTPS domain yet)".to_owned(),
        };
        let conf_dir = options
            .conf_dir
            .clone()
            .unwrap_or_else(|| paths::workspace_dir().join("nginx"));
        let vars: Vec<(&str, String)> = vec![
            ("MODULE", module.display().to_string()),
            ("WORKERS", options.workers.to_string()),
            ("PREFIX", prefix.display().to_string()),
            (
                "REDIS",
                options
                    .redis_addr
                    .clone()
                    .unwrap_or_else(|| redis.to_owned()),
            ),
            ("REDIS_TIMEOUT", options.redis_timeout.to_owned()),
            ("SECRET_FILE", secret.display().to_string()),
            ("CODE_LENGTH", "6".to_owned()),
            ("SIDECAR", format!("127.0.0.1:{sidecar_port}")),
            ("REDIRECT_LISTEN", format!("127.0.0.1:{redirect_port}")),
            ("API_LISTEN", format!("127.0.0.1:{api_port}")),
            ("CACHE", options.cache.to_owned()),
            ("FALLBACK", options.fallback.to_owned()),
            ("POOL", pool.join(" ")),
            (
                "PUBLIC_BASE",
                options
                    .public_base
                    .clone()
                    .unwrap_or_else(|| format!("http://{}", pool[0])),
            ),
            ("TLS_LISTEN", format!("127.0.0.1:{tls_port}")),
            ("PLAIN_HTTP", options.plain_http.to_owned()),
            ("HTTPS_ORIGIN", format!("https://$host:{tls_port}")),
            ("ACME_WEBROOT", acme_webroot.display().to_string()),
            ("TLS_DOMAINS", tls_domains),
            ("TRUSTED_PROXY", "127.0.0.1".to_owned()),
            ("EVENTS_BUFFER", options.events_buffer.to_string()),
        ];
        let mut conf = render(&conf_dir, "nginx.conf.template", &vars);
        if let Some(seeds) = &options.redis_cluster {
            let addr = vars.iter().find(|(name, _)| *name == "REDIS").map(|v| &v.1);
            let one = format!("shortlink_redis {};", addr.expect("REDIS is rendered"));
            assert!(conf.contains(&one), "no \"{one}\" in the template");
            conf = conf.replace(&one, &format!("shortlink_redis_cluster {seeds};"));
        }
        std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        std::fs::write(
            prefix.join("domains.conf"),
            render(&conf_dir, "domains.conf.template", &vars),
        )
        .expect("write domains.conf");
        std::fs::write(
            prefix.join("home.conf"),
            render(&conf_dir, "home.conf.template", &vars),
        )
        .expect("write home.conf");
        for include in ["redirect", "to-https", "tls-domain"] {
            std::fs::write(
                prefix.join(format!("{include}.conf")),
                render(&conf_dir, &format!("{include}.conf.template"), &vars),
            )
            .expect("write an include");
        }
        std::fs::write(prefix.join("error-pages.conf"), error_pages(&conf_dir))
            .expect("write error-pages.conf");

        let bin = paths::nginx_bin();
        let process = if options.daemon {
            // `sleep & wait` so the TERM trap runs at once; the master named in nginx.pid at that
            // moment (after any upgrade) is stopped.
            const KEEPER: &str = r#"trap 'kill -TERM "$(cat "$1/nginx.pid")"; exit 0' TERM
"$2" -p "$1" -c "$1/nginx.conf" || exit 1
while :; do sleep 1 & wait $!; done"#;
            Lifeline::builder("sh", prefix.join("stderr.log"))
                .args(["-c", KEEPER, "nginx-keeper"])
                .arg(&prefix)
                .arg(&bin)
                .spawn()
        } else {
            Lifeline::builder(&bin, prefix.join("stderr.log"))
                .arg("-p")
                .arg(&prefix)
                .arg("-c")
                .arg(prefix.join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .spawn()
        };
        let nginx = Nginx {
            redirect_port,
            tls_port,
            api_port,
            prefix,
            process,
            bin,
        };
        assert!(
            wait_until(Duration::from_secs(10), || {
                port_open(redirect_port) && port_open(api_port) && port_open(tls_port)
            }),
            "nginx did not start; error log:\n{}",
            nginx.error_log()
        );
        nginx
    }

    /// The master's pid as nginx wrote it to `nginx.pid` (changes with a binary upgrade).
    pub fn pid_file_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.prefix.join("nginx.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Sends `signal` (a `kill -s` name) to the master named in `nginx.pid`.
    pub fn signal_master(&self, signal: &str) {
        let pid = self.pid_file_pid().expect("nginx.pid names the master");
        let status = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} {pid}");
    }

    /// Lines of the error log matching `needle` (e.g. "exited on signal").
    pub fn error_log_lines(&self, needle: &str) -> Vec<String> {
        self.error_log()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    pub fn error_log(&self) -> String {
        let log = std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default();
        format!("{}{log}", self.process.log_text())
    }

    pub fn domains_file(&self) -> PathBuf {
        self.prefix.join("domains.conf")
    }

    /// `nginx -t` on the current configuration: (success, output).
    pub fn test_config(&self) -> (bool, String) {
        self.run(&["-t"])
    }

    /// Graceful reload (SIGHUP to the master); returns once the new configuration is checked.
    pub fn reload(&self) {
        let (ok, output) = self.test_config();
        assert!(ok, "the configuration does not pass nginx -t:\n{output}");
        self.process.signal(Signal::Hup);
    }

    fn run(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new(&self.bin)
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(self.prefix.join("nginx.conf"))
            .args(args)
            .output()
            .expect("run nginx");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// The module's counters from the status location.
    pub fn counters(&self) -> HashMap<String, u64> {
        let url = format!("http://127.0.0.1:{}/shortlink_status", self.api_port);
        let body = crate::http_client()
            .get(url)
            .send()
            .and_then(|response| response.text())
            .expect("read the status location");
        parse_counters(&body)
    }

    /// A request to the public redirect server, as if sent to `host`.
    pub fn get(&self, host: &str, path: &str) -> reqwest::blocking::Response {
        self.request(reqwest::Method::GET, host, path)
    }

    pub fn request(
        &self,
        method: reqwest::Method,
        host: &str,
        path: &str,
    ) -> reqwest::blocking::Response {
        let url = format!("http://127.0.0.1:{}{path}", self.redirect_port);
        crate::http_client()
            .request(method, url)
            .header("Host", host)
            .send()
            .unwrap_or_else(|e| panic!("GET {path} on {host}: {e}"))
    }
}

/// domains.conf's HTTPS server line for each of `pool`, as `scripts/render-nginx` writes them.
pub fn tls_domains(certs: &Path, pool: &[String], prefix: &Path) -> String {
    let (certs, prefix) = (certs.display(), prefix.display());
    pool.iter()
        .map(|domain| {
            format!(
                "server {{ server_name {domain}; ssl_certificate {certs}/{domain}/fullchain.pem; \
                 ssl_certificate_key {certs}/{domain}/privkey.pem; include {prefix}/tls-domain.conf; }}\n"
            )
        })
        .collect()
}

/// `name value` lines; anything else is ignored.
pub fn parse_counters(body: &str) -> HashMap<String, u64> {
    body.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once([' ', ':'])?;
            Some((name.trim().to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

fn render(conf_dir: &Path, template: &str, vars: &[(&str, String)]) -> String {
    let path = conf_dir.join(template);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    for (name, value) in vars {
        text = text.replace(&format!("@{name}@"), value);
    }
    assert!(
        !has_placeholder(&text),
        "unrendered placeholder left in {template}"
    );
    text
}

/// `@NAME@` with NAME in capitals: the templates' placeholders (nginx's named locations are lower case).
fn has_placeholder(text: &str) -> bool {
    text.match_indices('@').any(|(at, _)| {
        let name_len = text[at + 1..]
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || *b == b'_')
            .count();
        name_len > 0 && text[at + 1 + name_len..].starts_with('@')
    })
}

/// Writes a secret readable by its owner only (mode 0600 from the start, never briefly wider).
fn write_private(path: &Path, contents: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(contents))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The statuses with a page of their own, `errors/<status>.html`.
pub const ERROR_STATUSES: [u16; 3] = [404, 410, 503];

/// `error-pages.conf` as `scripts/render-nginx` writes it, byte for byte: each page inside the
/// configuration (read by nginx's master, never by a worker), cut into 2,000-byte pieces because a
/// quoted nginx string holds at most 4 KiB. The static home page (`home.html`) comes last, in an
/// internal location that `/` rewrites to.
pub fn error_pages(conf_dir: &Path) -> Vec<u8> {
    let mut out = b"# Rendered by scripts/render-nginx from nginx/errors/*.html: edit those and render again.\n"
        .to_vec();
    for status in ERROR_STATUSES {
        out.extend(format!("error_page {status} @shortlink_{status};\n").bytes());
    }
    for status in ERROR_STATUSES {
        let name = status.to_string();
        let location = format!("@shortlink_{status}");
        page_location(&mut out, conf_dir, &name, status, &location);
    }
    page_location(&mut out, conf_dir, "home", 200, "= /.shortlink-home");
    out
}

fn page_location(out: &mut Vec<u8>, conf_dir: &Path, name: &str, status: u16, location: &str) {
    let path = conf_dir.join("errors").join(format!("{name}.html"));
    let page = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(
        !page.contains(&b'$'),
        "{} contains $, which nginx would read as a variable",
        path.display()
    );
    out.extend(
        format!("location {location} {{\n    default_type \"text/html; charset=utf-8\";\n").bytes(),
    );
    if !location.starts_with('@') {
        out.extend(b"    internal;\n");
    }
    let mut names = String::new();
    for (i, piece) in page.chunks(2000).enumerate() {
        out.extend(format!("    set $shortlink_page_{name}_{i} '").bytes());
        for &byte in piece {
            if byte == b'\\' || byte == b'\'' {
                out.push(b'\\');
            }
            out.push(byte);
        }
        out.extend(b"';\n");
        names.push_str(&format!("$shortlink_page_{name}_{i}"));
    }
    out.extend(format!("    return {status} \"{names}\";\n}}\n").bytes());
}

/// A copy of the project's nginx templates (`nginx/`) in `dir`, with `line` added after the
/// first line containing `after` (in whichever template has it, at its indentation): for
/// [`NginxOptions::conf_dir`], to run a test under a setting the templates leave at its default.
pub fn templates_with(dir: &Path, after: &str, line: &str) {
    let src = crate::paths::workspace_dir().join("nginx");
    copy_dir(&src, dir);
    let mut templates: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the template copy")
        .map(|entry| entry.expect("a template").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "template"))
        .collect();
    templates.sort();
    for path in templates {
        let text = std::fs::read_to_string(&path).expect("read a template");
        let Some(at) = text.find(after) else { continue };
        let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let indent: String = text[start..].chars().take_while(|c| *c == ' ').collect();
        let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
        let text = format!("{}\n{indent}{line}{}", &text[..end], &text[end..]);
        std::fs::write(&path, text).expect("write a template");
        return;
    }
    panic!("no template has {after:?}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the template copy");
    for entry in std::fs::read_dir(from).expect("read nginx/") {
        let entry = entry.expect("a template");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a template");
        }
    }
}

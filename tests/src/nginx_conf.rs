//! nginx on a configuration a test writes itself (a Redis cluster's edge, the imported-domain
//! example), beside the project's own in [`crate::Nginx`]: the lines every such file starts
//! with, and nginx run in the foreground on it.

use std::path::Path;
use testkit::Lifeline;

/// The start of an nginx.conf under `prefix`: the module at `module` loaded, `workers` workers
/// of `connections` connections each, no access log, every temporary file under `prefix/tmp`.
/// The caller writes the rest of the `http` block and closes it.
pub fn conf_head(module: &Path, prefix: &Path, workers: u32, connections: u32) -> String {
    let p = prefix.display();
    format!(
        r#"load_module {module};
worker_processes {workers};
pid {p}/nginx.pid;
error_log {p}/error.log notice;
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    client_body_temp_path {p}/tmp/client_body;
    proxy_temp_path {p}/tmp/proxy;
    fastcgi_temp_path {p}/tmp/fastcgi;
    uwsgi_temp_path {p}/tmp/uwsgi;
    scgi_temp_path {p}/tmp/scgi;
"#,
        module = module.display(),
    )
}

/// nginx `bin` in the foreground on `prefix/nginx.conf`, its stderr in `prefix/stderr.log`.
pub fn spawn_foreground(bin: &Path, prefix: &Path) -> Lifeline {
    Lifeline::builder(bin, prefix.join("stderr.log"))
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .spawn()
}

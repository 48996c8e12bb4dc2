//! What runs on every request but is built above this crate: hyper's connection loop (axum's
//! `serve`, generic over the listener and the service) and the log subscriber, which formats
//! each request's `request` span. Both are instantiated where they are named, so they are named
//! here, in a crate the quick profile optimises, and not in the binary's crate, which it compiles
//! at `opt-level = 0` (`Cargo.toml`, docs/BUILDING.md): console, CLI and wiring, none of it hot.

use axum::Router;
use std::future::Future;
use std::pin::Pin;
use tokio::net::TcpListener;

/// Serves `router` on `listener` until `shutdown` completes, then finishes the requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Logs to stderr (stdout carries only the "listening on" line and CLI output), filtered by
/// `RUST_LOG` (default `info`).
pub fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

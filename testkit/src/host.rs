//! What every server here needs of the host: free loopback ports, a scratch directory, and a
//! wait that polls instead of sleeping.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A port that was free a moment ago on 127.0.0.1. Prefer binding port 0 yourself when the server
/// can take a listener; use this only for servers that must be told a port number.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind an ephemeral port on 127.0.0.1")
}

/// `N` distinct ports that were free a moment ago on 127.0.0.1: bound together while drawn, so no
/// two are the same (drawn one by one, two may be, and one configuration would then listen twice
/// on a port). For a server that must be told several port numbers.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port on 127.0.0.1"))
        .collect();
    std::array::from_fn(|i| {
        listeners[i]
            .local_addr()
            .expect("a bound listener has an address")
            .port()
    })
}

/// A fresh temporary directory, removed on drop.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shortlink-test-")
        .tempdir()
        .expect("create a temporary directory")
}

/// Polls `ready` until it holds or `timeout` passes; returns whether it held. Polling, not a fixed
/// sleep: the wait is as short as the server allows.
pub fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

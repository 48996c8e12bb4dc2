//! A loopback TCP proxy to a server (Redis) that a test makes misbehave: it holds every byte (a
//! stuck server: connections stay open, nothing comes back), or it lets one chosen command reach
//! the server and then cuts that connection before the reply comes back (a server that did the
//! command and whose answer was lost: Redis restarting mid-command, a connection reset).
//!
//! Two threads per connection copy the bytes, each way; they stop when either side closes or the
//! proxy is dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    stuck: AtomicBool,
    closed: AtomicBool,
    /// The bytes of the next command whose reply is cut (see [`Proxy::cut_reply_to`]).
    cut_next: Mutex<Option<Vec<u8>>>,
    cuts: AtomicU64,
}

impl Proxy {
    /// A proxy on a free loopback port to `127.0.0.1:<upstream>`, forwarding.
    pub fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || accept(&listener, upstream, &accepting));
        Proxy { port, shared }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// While `stuck`, nothing is read either way: bytes pile up unanswered.
    pub fn set_stuck(&self, stuck: bool) {
        self.shared.stuck.store(stuck, Ordering::Relaxed);
    }

    /// The next bytes a client sends that contain `needle` (one command, in practice) go to the
    /// server, and once the server answers, the connection is cut both ways and the answer
    /// dropped: the server did the command; the client never learns it. Once.
    pub fn cut_reply_to(&self, needle: &[u8]) {
        assert!(
            !needle.is_empty(),
            "the command to cut is named by some bytes"
        );
        *self.shared.cut_next.lock().expect("the proxy's state") = Some(needle.to_vec());
    }

    /// Connections cut by [`Proxy::cut_reply_to`] so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
    }
}

fn accept(listener: &TcpListener, upstream: u16, shared: &Arc<Shared>) {
    while !shared.closed.load(Ordering::Relaxed) {
        let Ok((client, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        client.set_nonblocking(false).expect("a blocking stream");
        let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
            continue;
        };
        let cut = Arc::new(AtomicBool::new(false));
        let (client2, server2) = (
            client.try_clone().expect("a stream's clone"),
            server.try_clone().expect("a stream's clone"),
        );
        let (up, down) = (Arc::clone(shared), Arc::clone(shared));
        let cut2 = Arc::clone(&cut);
        std::thread::spawn(move || pump(client2, server2, &up, Direction::Up(&cut2)));
        std::thread::spawn(move || pump(server, client, &down, Direction::Down(&cut)));
    }
}

/// Which way a pump copies, with the connection's "cut the next reply" flag.
enum Direction<'a> {
    /// Client to server: arms the flag when the command to cut goes by.
    Up(&'a AtomicBool),
    /// Server to client: drops what comes back once the flag is armed, and cuts.
    Down(&'a AtomicBool),
}

fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, direction: Direction<'_>) {
    from.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("a read timeout");
    let mut buf = [0u8; 16 * 1024];
    while !shared.closed.load(Ordering::Relaxed) {
        if shared.stuck.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        match direction {
            // Armed before the command goes on, so its reply cannot slip past.
            Direction::Up(cut) if shared.takes_cut(&buf[..n]) => cut.store(true, Ordering::SeqCst),
            Direction::Down(cut) if cut.load(Ordering::SeqCst) => {
                shared.cuts.fetch_add(1, Ordering::Relaxed);
                let _ = from.shutdown(Shutdown::Both);
                break;
            }
            _ => {}
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

impl Shared {
    /// Whether `sent` holds the command to cut (which is then no longer armed).
    fn takes_cut(&self, sent: &[u8]) -> bool {
        let mut armed = self.cut_next.lock().expect("the proxy's state");
        let hit = armed
            .as_deref()
            .is_some_and(|needle| sent.windows(needle.len()).any(|w| w == needle));
        if hit {
            *armed = None;
        }
        hit
    }
}

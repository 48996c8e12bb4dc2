//! This sidecar's side of the send jobs: who it is when it holds a lease, and the jobs compose
//! hands it to start at once. Held in the application state; a leaf, so the state does not
//! reach into the runner that reads the state.

use shortlink_core::sync::LockOrRecover;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::mpsc;

/// This sidecar's side of the send jobs.
pub struct Sends {
    /// Who holds a lease: this process, apart from every other (a restarted sidecar is another).
    pub owner: String,
    /// `--gateway-lease`.
    pub lease: Duration,
    /// Compose queued more messages: the jobs waiting for them look at once.
    pub queued: tokio::sync::Notify,
    wake: mpsc::UnboundedSender<String>,
    woken: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Sends {
    pub fn new(lease: Duration) -> Self {
        let mut bytes = [0u8; 8];
        // Without randomness, the time keeps two processes apart just as well.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = (shortlink_store::now()
                .timestamp_nanos_opt()
                .unwrap_or_default())
            .to_be_bytes();
        }
        let host = hostname();
        let (wake, woken) = mpsc::unbounded_channel();
        Sends {
            owner: format!("{host}-{:016x}", u64::from_be_bytes(bytes)),
            lease,
            queued: tokio::sync::Notify::new(),
            wake,
            woken: Mutex::new(Some(woken)),
        }
    }

    /// When a lease taken or renewed at `now` runs out.
    pub fn lease_from(&self, now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        now + chrono::Duration::from_std(self.lease).unwrap_or(chrono::Duration::seconds(30))
    }

    /// Starts job `id`, opened by this sidecar, now (one id per compose request, never per
    /// message). Without a runner (a command that serves nothing) its lease runs out and a
    /// serving sidecar takes it over.
    pub fn wake(&self, id: &str) {
        let _ = self.wake.send(id.to_owned());
    }

    /// The jobs to wake, for the one runner of this process: `None` once taken.
    pub(super) fn take_woken(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.woken.lock_or_recover().take()
    }
}

/// The host name, cut to keep `claimed_by` short (a label for operators, not the identity).
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = (name.trim().chars())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    if name.is_empty() {
        "sidecar".into()
    } else {
        name
    }
}

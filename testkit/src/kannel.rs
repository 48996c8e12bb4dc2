//! A private Kannel (Debian's `kannel` 1.4.5: bearerbox and smsbox) per test, with one SMSC: an
//! HTTP SMSC of Kannel's `generic` kind, which a test plays itself (see [`Kannel::start`]).
//!
//! Kannel sends every message as `GET <smsc>/mt?to=…&from=…&text=…&dlrmask=…` to the SMSC and reads
//! only the answer's body: `OK id=<id>` accepted (a report of type 8 follows on the sender's
//! `dlr-url` when its mask asks), `ERR …` refused (type 16, the body as its text); anything else is
//! refused too. The SMSC reports later by calling [`Kannel::smsc_report_url`] with the id it gave
//! (types 1 delivered, 2 failed, 4 buffered). What Kannel does with each was observed in a lab on
//! this machine (docs/DELIVERIES.md has the exchange).

use crate::process::Lifeline;
use crate::{free_ports, port_open, temp_dir, wait_until};
use std::path::Path;
use std::time::Duration;

/// The user a test sends with (`/cgi-bin/sendsms?username=…&password=…`).
pub const SEND_USER: &str = "shortlink";
pub const SEND_PASSWORD: &str = "kannel-test-secret";

/// bearerbox and smsbox on free loopback ports, stopped on drop (smsbox first).
pub struct Kannel {
    sendsms_port: u16,
    smsc_port: u16,
    // Dropped in this order: smsbox, then bearerbox, then the directory.
    smsbox: Option<Lifeline>,
    bearerbox: Option<Lifeline>,
    dir: tempfile::TempDir,
}

impl Kannel {
    /// Starts Kannel with its SMSC at `http://127.0.0.1:<smsc_double_port>/mt`; returns once
    /// smsbox takes messages. Stop it only once its queue is empty: bearerbox 1.4.5 stopped with
    /// messages queued can abort (`mutex_lock_real: Mutex failure`), losing them.
    pub fn start(smsc_double_port: u16) -> Self {
        let dir = temp_dir();
        let [admin, smsbox, sendsms, smsc] = free_ports();
        let config = config(dir.path(), smsc_double_port, [admin, smsbox, sendsms, smsc]);
        let file = dir.path().join("kannel.conf");
        std::fs::write(&file, config).expect("write kannel.conf");
        let bearerbox = Lifeline::builder("/usr/sbin/bearerbox", dir.path().join("bearerbox.out"))
            .args(["-v", "1"])
            .arg(&file)
            .spawn();
        assert!(
            wait_until(Duration::from_secs(20), || port_open(smsbox)),
            "bearerbox did not listen for smsbox on {smsbox}:\n{}",
            bearerbox.log_text()
        );
        let smsbox_process = Lifeline::builder("/usr/sbin/smsbox", dir.path().join("smsbox.out"))
            .args(["-v", "1"])
            .arg(&file)
            .spawn();
        assert!(
            wait_until(Duration::from_secs(20), || port_open(sendsms)),
            "smsbox did not listen on {sendsms}:\n{}",
            smsbox_process.log_text()
        );
        Kannel {
            sendsms_port: sendsms,
            smsc_port: smsc,
            smsbox: Some(smsbox_process),
            bearerbox: Some(bearerbox),
            dir,
        }
    }

    /// `http://127.0.0.1:<port>/cgi-bin/sendsms`: a sender's `GET` with `username`, `password`,
    /// `from`, `to`, `text`, and `dlr-mask` + `dlr-url` for reports.
    pub fn sendsms_url(&self) -> String {
        format!("http://127.0.0.1:{}/cgi-bin/sendsms", self.sendsms_port)
    }

    /// Where the SMSC reports on a message it accepted: `GET` with `dlr-mid` (the id its `OK`
    /// gave), `dlr-mask` (1, 2 or 4), `dlr-err` and `text` (the receipt, as `%A` on the sender's
    /// `dlr-url`). Kannel answers 200 `Sent`, or 400 for an id it does not know.
    pub fn smsc_report_url(&self) -> String {
        format!("http://127.0.0.1:{}/dlr", self.smsc_port)
    }

    /// What bearerbox and smsbox logged, for a failing test's message.
    pub fn logs(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.path().join(name));
        format!(
            "bearerbox:\n{}\nsmsbox:\n{}",
            read("bearerbox.log").unwrap_or_default(),
            read("smsbox.log").unwrap_or_default()
        )
    }
}

impl Drop for Kannel {
    fn drop(&mut self) {
        // smsbox first: bearerbox stopped under a connected smsbox logs errors for nothing.
        self.smsbox.take();
        self.bearerbox.take();
    }
}

/// One file for both boxes. The SMSC's answer is read by its body alone (`generic-status-*` are
/// what Kannel answers the SMSC's reports with).
fn config(dir: &Path, double: u16, [admin, smsbox, sendsms, smsc]: [u16; 4]) -> String {
    let logs = dir.display();
    format!(
        r#"group = core
admin-port = {admin}
admin-interface = 127.0.0.1
admin-password = admin-{admin}
admin-allow-ip = "127.0.0.1"
smsbox-port = {smsbox}
smsbox-interface = 127.0.0.1
box-allow-ip = "127.0.0.1"
dlr-storage = internal
log-file = "{logs}/bearerbox.log"
log-level = 1

group = smsc
smsc = http
system-type = generic
smsc-id = double
port = {smsc}
connect-allow-ip = "127.0.0.1"
send-url = "http://127.0.0.1:{double}/mt?to=%p&from=%P&text=%b&dlrmask=%d"
status-success-regex = "^OK"
status-permfail-regex = "^ERR"
status-tempfail-regex = "^RETRY"
generic-foreign-id-regex = "^OK id=([A-Za-z0-9._-]+)"
generic-status-sent = 200
generic-status-error = 400

group = smsbox
bearerbox-host = 127.0.0.1
sendsms-port = {sendsms}
sendsms-interface = 127.0.0.1
log-file = "{logs}/smsbox.log"
log-level = 1
# As deploy/kannel/kannel.conf: a failed dlr-url fetch is queued and tried again (there every
# 30 s; here every second, for the tests).
http-request-retry = 20
http-queue-delay = 1

group = sendsms-user
username = {SEND_USER}
password = {SEND_PASSWORD}

group = sms-service
keyword-regex = .*
catch-all = yes
max-messages = 0
text = "ok"
"#
    )
}

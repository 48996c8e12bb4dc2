//! An SMSC for a test's [`Kannel`](crate::Kannel): Kannel's `generic` HTTP SMSC, played on a
//! loopback port. Each message Kannel hands it gets a verdict from the test's rule, by its text:
//! delivered or failed (accepted, then reported as an SMSC reports, `stat:DELIVRD` or
//! `stat:UNDELIV err:…`), or rejected at submission (`ERR …`, as a carrier that filters URLs
//! does). Plain `std` (threads and sockets), as the rest of the kit.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the SMSC does with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted, then reported delivered (`stat:DELIVRD err:000`).
    Deliver,
    /// Accepted, then reported failed (`stat:UNDELIV`) with this SMSC error code (`005`).
    Fail(&'static str),
    /// Refused at submission: Kannel reports type 16 with this text.
    Reject(&'static str),
}

/// A message as Kannel handed it over, and what became of it.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub to: String,
    pub from: String,
    pub text: String,
    /// The sender's `dlr-mask`, as Kannel passes it on (`-1` for none).
    pub dlr_mask: i32,
    pub verdict: Verdict,
    /// Whether Kannel took the SMSC's report (answered 200), for the accepted ones.
    pub reported: bool,
}

type Rule = dyn Fn(&str) -> Verdict + Send + Sync;

struct Shared {
    rule: Box<Rule>,
    /// Kannel's SMSC report URL, known once Kannel runs (it is told this SMSC's port first).
    report_url: OnceLock<String>,
    submitted: Mutex<Vec<Submitted>>,
    next_id: AtomicU64,
    stopping: AtomicBool,
}

/// The SMSC, listening until dropped.
pub struct SmscDouble {
    port: u16,
    shared: Arc<Shared>,
}

impl SmscDouble {
    /// Listens on a free loopback port; `rule` judges each message by its text.
    pub fn start(rule: impl Fn(&str) -> Verdict + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the SMSC double");
        let port = listener.local_addr().expect("a bound address").port();
        let shared = Arc::new(Shared {
            rule: Box::new(rule),
            report_url: OnceLock::new(),
            submitted: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accepting.stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&accepting);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        SmscDouble { port, shared }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where to report accepted messages: [`crate::Kannel::smsc_report_url`].
    pub fn report_to(&self, url: String) {
        self.shared
            .report_url
            .set(url)
            .expect("the report URL is set once");
    }

    /// Every message handed over so far, in order of arrival.
    pub fn submitted(&self) -> Vec<Submitted> {
        lock(&self.shared.submitted).clone()
    }
}

impl Drop for SmscDouble {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees it must stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Answers one keep-alive connection's requests: each a message to judge.
fn serve(stream: TcpStream, shared: &Arc<Shared>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut writer = stream;
    while let Some(target) = read_request(&mut reader) {
        let query = query_of(&target);
        let field = |name: &str| query.get(name).cloned().unwrap_or_default();
        let text = field("text");
        let verdict = (shared.rule)(&text);
        let answer = match &verdict {
            Verdict::Reject(reason) => format!("ERR {reason}"),
            Verdict::Deliver | Verdict::Fail(_) => {
                format!(
                    "OK id=F{:06}",
                    shared.next_id.fetch_add(1, Ordering::Relaxed)
                )
            }
        };
        let submitted = Submitted {
            to: field("to"),
            from: field("from"),
            text,
            dlr_mask: field("dlrmask").parse().unwrap_or(-1),
            verdict: verdict.clone(),
            reported: false,
        };
        let index = {
            let mut all = lock(&shared.submitted);
            all.push(submitted);
            all.len() - 1
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
        if let Some(id) = answer.strip_prefix("OK id=") {
            let (shared, id) = (Arc::clone(shared), id.to_owned());
            std::thread::spawn(move || report(&shared, index, &id, &verdict));
        }
    }
}

/// Reports on an accepted message, as an SMSC does once the handset answered. Kannel learns the
/// message's id from the `OK` only once it has read it, so an "unknown" answer is tried again.
fn report(shared: &Shared, index: usize, id: &str, verdict: &Verdict) {
    let Some(url) = shared.report_url.get() else {
        return;
    };
    let (mask, stat, err) = match verdict {
        Verdict::Deliver => (1, "DELIVRD", "000"),
        Verdict::Fail(err) => (2, "UNDELIV", *err),
        Verdict::Reject(_) => return,
    };
    let now = smsc_date(SystemTime::now());
    let delivered = if mask == 1 { "001" } else { "000" };
    let receipt = format!(
        "id:{id} sub:001 dlvrd:{delivered} submit date:{now} done date:{now} stat:{stat} err:{err} text:"
    );
    let target = format!(
        "{url}?dlr-mid={id}&dlr-mask={mask}&dlr-err={err}&text={}",
        encode(&receipt)
    );
    let taken = crate::wait_until(Duration::from_secs(20), || {
        get(&target).is_some_and(|status| status == 200)
    });
    lock(&shared.submitted)[index].reported = taken;
}

/// Reads one request's line and headers (a GET has no body); its target.
fn read_request(reader: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let target = line.split_whitespace().nth(1)?.to_owned();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        if header == "\r\n" || header == "\n" {
            return Some(target);
        }
    }
}

/// `GET` over HTTP/1.0 (one request a connection); the status.
fn get(target: &str) -> Option<u16> {
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/')?);
    let mut stream = TcpStream::connect(authority).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

fn query_of(target: &str) -> HashMap<String, String> {
    let query = target.split_once('?').map_or("", |(_, query)| query);
    (query.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (decode(name), decode(value)))
        .collect()
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space); invalid escapes kept as is.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// `YYMMDDhhmm` in UTC, as SMSC receipts date a message.
fn smsc_date(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{:02}{month:02}{day:02}{:02}{:02}",
        year % 100,
        rest / 3_600,
        rest % 3_600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_forms_and_dates_receipts() {
        assert_eq!(decode("a+b%2Fc%zz%4"), "a b/c%zz%4");
        assert_eq!(encode("stat:DELIVRD err:000"), "stat%3ADELIVRD%20err%3A000");
        let day = UNIX_EPOCH + Duration::from_secs(1_795_788_600); // 2026-11-27 14:10 UTC
        assert_eq!(smsc_date(day), "2611271410");
    }
}

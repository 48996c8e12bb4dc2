//! The kit's Kannel and SMSC: a message sent through Kannel's `sendsms` reaches the SMSC, and the
//! SMSC's verdict comes back on the sender's `dlr-url` as the report types Kannel documents
//! (8 accepted by the SMSC, then 1 delivered or 2 failed; 16 rejected).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;
use testkit::kannel::{SEND_PASSWORD, SEND_USER};
use testkit::{wait_until, Kannel, SmscDouble, Verdict};

/// A `dlr-url` receiver: each request's target, as it arrives.
fn receiver() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, targets) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    // The headers, up to the blank line (Kannel's report is a GET: no body).
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header.trim_end().is_empty() {
                            break;
                        }
                    }
                    let _ = sender.send(target);
                    let ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                    if writer.write_all(ok.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, targets)
}

fn send(kannel: &Kannel, to: &str, text: &str, dlr_url: &str) -> String {
    let url = format!(
        "{}?username={SEND_USER}&password={SEND_PASSWORD}&from=12345&to={to}&text={text}&dlr-mask=31&dlr-url={dlr_url}",
        kannel.sendsms_url()
    );
    let output = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", &url])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn reports_travel_from_the_smsc_through_kannel() {
    let smsc = SmscDouble::start(|text| {
        if text.contains("blocked.example") {
            Verdict::Reject("88 destination blocked")
        } else if text.contains("absent.example") {
            Verdict::Fail("005")
        } else {
            Verdict::Deliver
        }
    });
    let kannel = Kannel::start(smsc.port());
    smsc.report_to(kannel.smsc_report_url());
    let (port, targets) = receiver();
    for (to, domain) in [("1", "ok"), ("2", "absent"), ("3", "blocked")] {
        // Kannel substitutes %d (the report type) and %A (the SMSC's answer) in the dlr-url.
        let dlr_url = format!(
            "http%3A%2F%2F127.0.0.1%3A{port}%2Fdlr%3Fto%3D{to}%26type%3D%25d%26answer%3D%25A"
        );
        let answer = send(
            &kannel,
            &format!("%2B4474000000{to}"),
            &format!("see+https%3A%2F%2F{domain}.example%2Fx"),
            &dlr_url,
        );
        assert!(
            answer.starts_with("0: Accepted"),
            "{answer}\n{}",
            kannel.logs()
        );
    }
    // Five reports: 8 then 1, 8 then 2, and 16.
    let mut reports: Vec<String> = (0..5)
        .map(|_| {
            targets
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("a report\n{}", kannel.logs()))
        })
        .collect();
    reports.sort();
    let kinds: Vec<(&str, &str)> = reports
        .iter()
        .map(|target| {
            let to = target
                .split("to=")
                .nth(1)
                .unwrap()
                .split('&')
                .next()
                .unwrap();
            let kind = target
                .split("type=")
                .nth(1)
                .unwrap()
                .split('&')
                .next()
                .unwrap();
            (to, kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [("1", "1"), ("1", "8"), ("2", "2"), ("2", "8"), ("3", "16")],
        "{reports:#?}"
    );
    let failed = reports
        .iter()
        .find(|target| target.contains("to=2&type=2"))
        .unwrap();
    assert!(
        failed.contains("stat%3AUNDELIV") && failed.contains("err%3A005"),
        "{failed}"
    );
    let rejected = reports
        .iter()
        .find(|target| target.contains("type=16"))
        .unwrap();
    assert!(
        rejected.contains("NACK%2FERR+88+destination+blocked"),
        "{rejected}"
    );
    let submitted = smsc.submitted();
    assert_eq!(submitted.len(), 3);
    assert!(submitted.iter().all(|message| message.dlr_mask == 31));
    // Kannel took each accepted message's report (it may pass one on before answering the SMSC).
    let accepted_reported = || {
        (smsc.submitted().iter())
            .filter(|message| !matches!(message.verdict, Verdict::Reject(_)))
            .all(|message| message.reported)
    };
    assert!(wait_until(Duration::from_secs(20), accepted_reported));
}

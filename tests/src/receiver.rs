//! A click-webhook receiver for the end-to-end tests: an HTTP/1.1 server on a free loopback port
//! that keeps every event of every delivery and answers 204.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The receiver's URL (`http://127.0.0.1:<port>/clicks`) and the events it has been sent.
pub fn events() -> (String, Arc<Mutex<Vec<Value>>>) {
    fn serve(stream: TcpStream, events: &Mutex<Vec<Value>>) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = stream;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let mut length = 0;
            loop {
                line.clear();
                reader.read_line(&mut line)?;
                let Some((name, value)) = line.trim_end().split_once(':') else {
                    break;
                };
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let sent = body["events"].as_array().cloned().unwrap_or_default();
            events.lock().unwrap().extend(sent);
            write!(
                writer,
                "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
            )?;
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/clicks", listener.local_addr().unwrap());
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&events);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (url, events)
}

//! One HTTP/1.1 exchange, for the canary probe (a request to the edge as if sent to a short
//! domain, plain TCP: the edge is probed on its internal address) and the state-change webhook
//! (plain or TLS).

use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest answer read: a redirect or a webhook acknowledgement is a few hundred bytes.
const MAX_ANSWER: u64 = 64 * 1024;

pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
}

/// Sends `head` (request line and headers, without the blank line) and `body`, over TLS with
/// `tls` (a verifying client and the server's name); reads the status and `Location` of the
/// answer.
pub async fn exchange(
    to: SocketAddr,
    tls: Option<(&tokio_rustls::TlsConnector, ServerName<'static>)>,
    head: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<Answer, String> {
    let mut request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    tokio::time::timeout(timeout, async {
        let tcp = TcpStream::connect(to).await.map_err(|e| e.to_string())?;
        let answer = match tls {
            None => over(tcp, &request).await?,
            Some((connector, name)) => {
                let stream = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                over(stream, &request).await?
            }
        };
        parse(&answer).ok_or_else(|| "not an HTTP answer".to_owned())
    })
    .await
    .map_err(|_| format!("no answer from {to} in {timeout:?}"))?
}

async fn over(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    match stream.take(MAX_ANSWER).read_to_end(&mut answer).await {
        Ok(_) => Ok(answer),
        // Many TLS servers close without close_notify after `Connection: close`; what they sent
        // before is the whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => Ok(answer),
        Err(e) => Err(e.to_string()),
    }
}

fn parse(answer: &[u8]) -> Option<Answer> {
    let text = String::from_utf8_lossy(answer);
    let head = text.split("\r\n\r\n").next()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let location = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    Some(Answer { status, location })
}

/// `http(s)://host:port/path` as (address to connect to, `Host` value, path). Names are resolved
/// by the system resolver.
pub async fn split_url(url: &url::Url) -> Result<(SocketAddr, String, String), String> {
    let default_port = match url.scheme() {
        "http" => 80,
        "https" => 443,
        _ => return Err("only http:// and https:// are supported".into()),
    };
    let host = url.host_str().ok_or("no host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(default_port);
    // Address literals as they are: `[::1]` (how a URL writes one) is no name to resolve.
    let to = match url.host() {
        Some(url::Host::Ipv4(ip)) => SocketAddr::from((ip, port)),
        Some(url::Host::Ipv6(ip)) => SocketAddr::from((ip, port)),
        _ => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("the host has no address")?,
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    Ok((to, format!("{host}:{port}"), path))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_status_and_location() {
        let a = super::parse(b"HTTP/1.1 302 Found\r\nlocation: https://x.example/\r\n\r\nbody")
            .unwrap();
        assert_eq!(
            (a.status, a.location.as_deref()),
            (302, Some("https://x.example/"))
        );
        assert!(super::parse(b"garbage").is_none());
    }

    #[tokio::test]
    async fn splits_urls_with_address_literals() {
        let url = url::Url::parse("https://[::1]:8443/hook?x=1").unwrap();
        let (to, host, path) = super::split_url(&url).await.unwrap();
        assert_eq!(
            (to.to_string(), host.as_str(), path.as_str()),
            ("[::1]:8443".to_owned(), "[::1]:8443", "/hook?x=1")
        );
        let url = url::Url::parse("http://127.0.0.1/").unwrap();
        let (to, host, _) = super::split_url(&url).await.unwrap();
        assert_eq!(
            (to.to_string(), host.as_str()),
            ("127.0.0.1:80".to_owned(), "127.0.0.1:80")
        );
        let ftp = url::Url::parse("ftp://127.0.0.1/").unwrap();
        assert!(super::split_url(&ftp).await.is_err());
    }
}

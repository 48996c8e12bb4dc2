//! The one DNS question the health job asks: the A records of a name, over UDP, of a configured
//! resolver (RFC 1035). Small enough to own; a full resolver library would bring its own config
//! discovery, which the job must not use (it asks the resolver the operator names).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::UdpSocket;

/// The A records of `name`, as `resolver` answers them. Errors are short texts for the domain's
/// reasons.
pub async fn resolve_a(
    resolver: SocketAddr,
    name: &str,
    timeout: Duration,
) -> Result<Vec<Ipv4Addr>, String> {
    let id: u16 = rand_id();
    let query = encode_query(id, name)?;
    let bind: SocketAddr = if resolver.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let socket = UdpSocket::bind(bind).await.map_err(|e| e.to_string())?;
    socket.connect(resolver).await.map_err(|e| e.to_string())?;
    socket.send(&query).await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 1500];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let n = tokio::time::timeout_at(deadline, socket.recv(&mut buf))
            .await
            .map_err(|_| format!("no answer from {resolver} in {timeout:?}"))?
            .map_err(|e| e.to_string())?;
        // A stray datagram (another query's late answer) is skipped, not trusted.
        if let Some(answer) = parse_answer(id, &buf[..n])? {
            return Ok(answer);
        }
    }
}

fn rand_id() -> u16 {
    let mut bytes = [0u8; 2];
    getrandom::fill(&mut bytes).unwrap_or_default();
    u16::from_be_bytes(bytes)
}

pub fn encode_query(id: u16, name: &str) -> Result<Vec<u8>, String> {
    let mut q = Vec::with_capacity(32 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    // Recursion desired; one question.
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!("{name:?} is not a host name"));
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&[0, 1, 0, 1]); // A, IN
    Ok(q)
}

/// `None` for a datagram that is not the answer to query `id`.
pub fn parse_answer(id: u16, msg: &[u8]) -> Result<Option<Vec<Ipv4Addr>>, String> {
    let bad = || "malformed DNS answer".to_owned();
    if msg.len() < 12 || msg[0..2] != id.to_be_bytes() || msg[2] & 0x80 == 0 {
        return Ok(None);
    }
    match msg[3] & 0x0f {
        0 => {}
        3 => return Err("the name does not exist (NXDOMAIN)".into()),
        rcode => return Err(format!("the resolver answered rcode {rcode}")),
    }
    let count = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]) as usize;
    let (questions, answers) = (count(4), count(6));
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(msg, at).ok_or_else(bad)? + 4;
    }
    let mut found = Vec::new();
    for _ in 0..answers {
        at = skip_name(msg, at).ok_or_else(bad)?;
        let header = msg.get(at..at + 10).ok_or_else(bad)?;
        let (kind, class) = (
            u16::from_be_bytes([header[0], header[1]]),
            u16::from_be_bytes([header[2], header[3]]),
        );
        let len = u16::from_be_bytes([header[8], header[9]]) as usize;
        let data = msg.get(at + 10..at + 10 + len).ok_or_else(bad)?;
        if kind == 1 && class == 1 && len == 4 {
            found.push(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at += 10 + len;
    }
    Ok(Some(found))
}

/// The offset after the (possibly compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)? as usize;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + l,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_records_after_a_compressed_name() {
        let mut msg = encode_query(7, "s1.example").unwrap();
        msg[2] |= 0x80; // a response
        msg[7] = 2; // two answers
        for ip in [[127, 0, 0, 1], [10, 0, 0, 2]] {
            msg.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            msg.extend_from_slice(&ip);
        }
        assert_eq!(
            parse_answer(7, &msg).unwrap().unwrap(),
            [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)]
        );
        assert_eq!(parse_answer(8, &msg).unwrap(), None);
        msg[3] = 3;
        assert!(parse_answer(7, &msg).unwrap_err().contains("NXDOMAIN"));
        assert!(encode_query(1, "a..b").is_err());
    }
}

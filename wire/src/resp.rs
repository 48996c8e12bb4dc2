//! RESP2: just enough of the Redis protocol to send commands and read their replies.
//!
//! The reader reports how many bytes a complete reply took, so that several pipelined replies
//! can sit in one receive buffer and be taken off its front one at a time; an incomplete reply
//! is "not yet", never an error.

use std::fmt;

/// One reply from Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    /// `$-1` (missing key) and `*-1` (null array) alike.
    Null,
    Array(Vec<Frame>),
}

/// The byte stream is not RESP: the connection cannot be trusted any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    UnknownType(u8),
    BadInteger,
    BadLength,
    MissingCrlf,
    TooLarge,
    TooDeep,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::UnknownType(b) => write!(f, "unknown reply type byte 0x{b:02x}"),
            ProtocolError::BadInteger => f.write_str("malformed integer"),
            ProtocolError::BadLength => f.write_str("malformed length"),
            ProtocolError::MissingCrlf => f.write_str("missing CRLF"),
            ProtocolError::TooLarge => f.write_str("reply larger than allowed"),
            ProtocolError::TooDeep => f.write_str("reply nested too deeply"),
        }
    }
}

/// Largest bulk string accepted: link records are short, and a huge value is garbage that
/// would otherwise make a worker buffer it whole.
pub const MAX_BULK_LEN: usize = 1 << 20;
/// Largest array accepted (replies to the commands this module sends are tiny).
pub const MAX_ARRAY_LEN: usize = 1 << 16;
/// Nesting limit, so a hostile peer cannot recurse us off the stack.
pub const MAX_DEPTH: usize = 8;

/// Reads one complete reply from the front of `buf`.
///
/// `Ok(None)`: `buf` holds only part of a reply so far; call again with more bytes.
/// `Ok(Some((frame, n)))`: the reply took the first `n` bytes of `buf`.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(frame) => Ok(Some((frame, pos))),
        None => Ok(None),
    }
}

/// A reply's type byte and first line at `pos` (`pos` moved past both); `Ok(None)` until both
/// are in `buf`.
#[inline]
fn head<'b>(
    buf: &'b [u8],
    pos: &mut usize,
    depth: usize,
) -> Result<Option<(u8, &'b [u8])>, ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError::TooDeep);
    }
    let Some(&kind) = buf.get(*pos) else {
        return Ok(None);
    };
    *pos += 1;
    Ok(line(buf, pos)?.map(|line| (kind, line)))
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Frame>, ProtocolError> {
    let Some((kind, line)) = head(buf, pos, depth)? else {
        return Ok(None);
    };
    match kind {
        b'+' => Ok(Some(Frame::Simple(line.to_vec()))),
        b'-' => Ok(Some(Frame::Error(line.to_vec()))),
        b':' => Ok(Some(Frame::Integer(integer(line)?))),
        b'$' => {
            let Some(len) = length(line, MAX_BULK_LEN)? else {
                return Ok(Some(Frame::Null));
            };
            let end = *pos + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            let data = buf[*pos..end].to_vec();
            *pos = end + 2;
            Ok(Some(Frame::Bulk(data)))
        }
        b'*' => {
            let Some(len) = length(line, MAX_ARRAY_LEN)? else {
                return Ok(Some(Frame::Null));
            };
            // Capacity grows with the items actually received, not with the announced length,
            // past the first few (a lookup's reply, two, is one allocation and no growth).
            let mut items = Vec::with_capacity(len.min(4));
            for _ in 0..len {
                match parse_at(buf, pos, depth + 1)? {
                    Some(item) => items.push(item),
                    None => return Ok(None),
                }
            }
            Ok(Some(Frame::Array(items)))
        }
        other => Err(ProtocolError::UnknownType(other)),
    }
}

/// Like [`parse`], but only measures the reply at the front of `buf`: `Ok(Some((n, is_error)))`
/// when it is complete. Allocates nothing; for replies nobody reads (visit events).
pub fn skip(buf: &[u8]) -> Result<Option<(usize, bool)>, ProtocolError> {
    let mut pos = 0;
    match skip_at(buf, &mut pos, 0)? {
        Some(()) => Ok(Some((pos, buf.first() == Some(&b'-')))),
        None => Ok(None),
    }
}

fn skip_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<()>, ProtocolError> {
    let Some((kind, line)) = head(buf, pos, depth)? else {
        return Ok(None);
    };
    match kind {
        b'+' | b'-' => Ok(Some(())),
        b':' => integer(line).map(|_| Some(())),
        b'$' => {
            let Some(len) = length(line, MAX_BULK_LEN)? else {
                return Ok(Some(()));
            };
            let end = *pos + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            *pos = end + 2;
            Ok(Some(()))
        }
        b'*' => {
            let Some(len) = length(line, MAX_ARRAY_LEN)? else {
                return Ok(Some(()));
            };
            for _ in 0..len {
                if skip_at(buf, pos, depth + 1)?.is_none() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        }
        other => Err(ProtocolError::UnknownType(other)),
    }
}

/// The bytes up to the next CRLF, moving `pos` past it.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, ProtocolError> {
    let rest = &buf[*pos..];
    let Some(cr) = rest.iter().position(|&b| b == b'\r') else {
        // Type lines are short: a long run without CR is not RESP.
        return if rest.len() > MAX_LINE_LEN {
            Err(ProtocolError::TooLarge)
        } else {
            Ok(None)
        };
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => {
            *pos += cr + 2;
            Ok(Some(&rest[..cr]))
        }
        Some(_) => Err(ProtocolError::MissingCrlf),
    }
}

/// Simple strings and errors from Redis are short status lines.
const MAX_LINE_LEN: usize = 64 * 1024;

fn integer(line: &[u8]) -> Result<i64, ProtocolError> {
    let (negative, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(ProtocolError::BadInteger);
    }
    // One pass, in a u64: 19 digits cannot overflow it, the i64 conversion catches the rest.
    let mut magnitude = 0u64;
    for &d in digits {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return Err(ProtocolError::BadInteger);
        }
        magnitude = magnitude * 10 + u64::from(digit);
    }
    let magnitude = i64::try_from(magnitude).map_err(|_| ProtocolError::BadInteger)?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// A bulk or array length: `None` for the `-1` null marker.
fn length(line: &[u8], max: usize) -> Result<Option<usize>, ProtocolError> {
    match integer(line).map_err(|_| ProtocolError::BadLength)? {
        -1 => Ok(None),
        n if n < 0 => Err(ProtocolError::BadLength),
        n if n as u64 > max as u64 => Err(ProtocolError::TooLarge),
        n => Ok(Some(n as usize)),
    }
}

/// Appends a command as a RESP array of bulk strings. Each argument is given as parts that are
/// concatenated, so `GET sl:c:<code>` is written without first building the key.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[&[u8]]]) {
    push_header(out, b'*', args.len());
    for parts in args {
        push_header(out, b'$', parts.iter().map(|p| p.len()).sum());
        for part in *parts {
            out.extend_from_slice(part);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A command whose arguments are fixed but for the tail of one key, encoded once:
/// `MGET sl:c:<code> sl:meta:projection`, every uncached lookup's, is then written as four copies
/// and a length instead of [`encode_command`]'s header and copy per part (about 400 instructions
/// a lookup, callgrind, issue 82).
#[derive(Debug, Clone)]
pub struct KeyedCommand {
    /// The array's header and the arguments before the key.
    head: Vec<u8>,
    key_prefix: Vec<u8>,
    /// The key's CRLF and the arguments after it.
    tail: Vec<u8>,
}

impl KeyedCommand {
    pub fn new(before: &[&[u8]], key_prefix: &[u8], after: &[&[u8]]) -> Self {
        let mut head = Vec::new();
        push_header(&mut head, b'*', before.len() + 1 + after.len());
        for arg in before {
            encode_bulk(&mut head, arg);
        }
        let mut tail = b"\r\n".to_vec();
        for arg in after {
            encode_bulk(&mut tail, arg);
        }
        Self {
            head,
            key_prefix: key_prefix.to_vec(),
            tail,
        }
    }

    /// Appends the command with the key `<key_prefix><key_tail>`: what [`encode_command`] writes
    /// for the same arguments.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>, key_tail: &[u8]) {
        let key_len = self.key_prefix.len() + key_tail.len();
        // The key's header is at most `$`, 20 digits and CRLF.
        out.reserve(self.head.len() + 23 + key_len + self.tail.len());
        out.extend_from_slice(&self.head);
        push_header(out, b'$', key_len);
        out.extend_from_slice(&self.key_prefix);
        out.extend_from_slice(key_tail);
        out.extend_from_slice(&self.tail);
    }
}

fn encode_bulk(out: &mut Vec<u8>, arg: &[u8]) {
    push_header(out, b'$', arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Appends `<kind><n>\r\n`, the header of an array or bulk string. Lengths below 1000 (nearly
/// all of them) are written as one small copy without a division loop.
#[inline]
pub fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    let digit = |d: usize| b'0' + (d % 10) as u8;
    match n {
        0..=9 => out.extend_from_slice(&[kind, digit(n), b'\r', b'\n']),
        10..=99 => out.extend_from_slice(&[kind, digit(n / 10), digit(n), b'\r', b'\n']),
        100..=999 => {
            out.extend_from_slice(&[kind, digit(n / 100), digit(n / 10), digit(n), b'\r', b'\n'])
        }
        _ => {
            out.push(kind);
            // usize::MAX has 20 digits.
            let mut digits = [0u8; 20];
            let mut i = digits.len();
            let mut n = n;
            loop {
                i -= 1;
                digits[i] = digit(n);
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            out.extend_from_slice(&digits[i..]);
            out.extend_from_slice(b"\r\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_command_is_the_command_of_its_arguments() {
        let marker: &[u8] = b"sl:meta:projection";
        let command = KeyedCommand::new(&[b"MGET"], b"sl:c:", &[marker]);
        let long = vec![b'x'; 1000];
        for code in [&b""[..], b"a", b"abc1234", &long] {
            let mut keyed = b"+earlier".to_vec();
            command.write(&mut keyed, code);
            let mut parts = b"+earlier".to_vec();
            encode_command(&mut parts, &[&[b"MGET"], &[b"sl:c:", code], &[marker]]);
            assert_eq!(keyed, parts);
        }
        let bare = KeyedCommand::new(&[], b"", &[]);
        let mut out = Vec::new();
        bare.write(&mut out, b"GETKEY");
        assert_eq!(out, b"*1\r\n$6\r\nGETKEY\r\n");
    }

    fn full(bytes: &[u8]) -> Frame {
        let (frame, n) = parse(bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len(), "whole input consumed");
        frame
    }

    #[test]
    fn scalar_replies() {
        assert_eq!(full(b"+OK\r\n"), Frame::Simple(b"OK".to_vec()));
        assert_eq!(full(b"-ERR bad\r\n"), Frame::Error(b"ERR bad".to_vec()));
        assert_eq!(full(b":42\r\n"), Frame::Integer(42));
        assert_eq!(full(b":-7\r\n"), Frame::Integer(-7));
        assert_eq!(full(b"$3\r\nabc\r\n"), Frame::Bulk(b"abc".to_vec()));
        assert_eq!(full(b"$0\r\n\r\n"), Frame::Bulk(Vec::new()));
    }

    #[test]
    fn nil_bulk_and_nil_array() {
        assert_eq!(full(b"$-1\r\n"), Frame::Null);
        assert_eq!(full(b"*-1\r\n"), Frame::Null);
    }

    #[test]
    fn bulk_may_contain_crlf() {
        assert_eq!(full(b"$4\r\na\r\nb\r\n"), Frame::Bulk(b"a\r\nb".to_vec()));
    }

    #[test]
    fn arrays_nest() {
        let frame = full(b"*3\r\n$1\r\na\r\n*1\r\n:1\r\n$-1\r\n");
        assert_eq!(
            frame,
            Frame::Array(vec![
                Frame::Bulk(b"a".to_vec()),
                Frame::Array(vec![Frame::Integer(1)]),
                Frame::Null,
            ])
        );
        assert_eq!(full(b"*0\r\n"), Frame::Array(Vec::new()));
    }

    #[test]
    fn every_strict_prefix_is_incomplete() {
        let reply = b"*2\r\n$5\r\nhello\r\n:12\r\n";
        for cut in 0..reply.len() {
            assert_eq!(parse(&reply[..cut]), Ok(None), "prefix of {cut} bytes");
        }
        assert!(parse(reply).unwrap().is_some());
    }

    #[test]
    fn pipelined_replies_are_taken_one_at_a_time() {
        let buf = b"$-1\r\n+OK\r\n$2\r\nhi\r\n:5";
        let (a, n1) = parse(buf).unwrap().unwrap();
        let (b, n2) = parse(&buf[n1..]).unwrap().unwrap();
        let (c, n3) = parse(&buf[n1 + n2..]).unwrap().unwrap();
        assert_eq!(
            (a, b, c),
            (
                Frame::Null,
                Frame::Simple(b"OK".to_vec()),
                Frame::Bulk(b"hi".to_vec())
            )
        );
        assert_eq!(parse(&buf[n1 + n2 + n3..]), Ok(None));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        assert_eq!(parse(b"hello\r\n"), Err(ProtocolError::UnknownType(b'h')));
        assert_eq!(parse(b":12x\r\n"), Err(ProtocolError::BadInteger));
        assert_eq!(parse(b":\r\n"), Err(ProtocolError::BadInteger));
        assert_eq!(parse(b"$abc\r\n"), Err(ProtocolError::BadLength));
        assert_eq!(parse(b"$-2\r\n"), Err(ProtocolError::BadLength));
        assert_eq!(parse(b"$3\r\nabcXY"), Err(ProtocolError::MissingCrlf));
        assert_eq!(parse(b"+OK\rX"), Err(ProtocolError::MissingCrlf));
        assert_eq!(
            parse(b":99999999999999999999\r\n"),
            Err(ProtocolError::BadInteger)
        );
    }

    #[test]
    fn limits_are_enforced() {
        let huge = format!("${}\r\n", MAX_BULK_LEN + 1);
        assert_eq!(parse(huge.as_bytes()), Err(ProtocolError::TooLarge));
        let deep = "*1\r\n".repeat(MAX_DEPTH + 2);
        assert_eq!(parse(deep.as_bytes()), Err(ProtocolError::TooDeep));
        assert_eq!(
            parse(&vec![b'+'; MAX_LINE_LEN + 2]),
            Err(ProtocolError::TooLarge)
        );
    }

    #[test]
    fn skip_measures_like_parse() {
        let replies: [&[u8]; 7] = [
            b"+OK\r\n",
            b"-ERR x\r\n",
            b":5\r\n",
            b"$15\r\n1700000000000-0\r\n",
            b"$-1\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"$4\r\na\r\nb\r\n",
        ];
        for reply in replies {
            let (_, n) = parse(reply).unwrap().unwrap();
            assert_eq!(skip(reply), Ok(Some((n, reply[0] == b'-'))), "{reply:?}");
            for cut in 0..reply.len() {
                assert_eq!(skip(&reply[..cut]), Ok(None));
            }
        }
        assert_eq!(skip(b"hello\r\n"), Err(ProtocolError::UnknownType(b'h')));
        assert_eq!(skip(b"$3\r\nabcXY"), Err(ProtocolError::MissingCrlf));
    }

    #[test]
    fn encodes_commands_from_parts() {
        let mut out = Vec::new();
        encode_command(&mut out, &[&[b"GET"], &[b"sl:c:", b"abc1234"]]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$12\r\nsl:c:abc1234\r\n");
        out.clear();
        encode_command(&mut out, &[&[b"PING"], &[]]);
        assert_eq!(out, b"*2\r\n$4\r\nPING\r\n$0\r\n\r\n");
        for n in [0, 9, 10, 99, 100, 999, 1000, 65_536, usize::MAX] {
            out.clear();
            push_header(&mut out, b'$', n);
            assert_eq!(out, format!("${n}\r\n").as_bytes());
        }
    }
}

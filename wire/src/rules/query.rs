//! The query-parameter condition: `name` present, or `name=value`, compared after percent- and
//! `+`-decoding, byte by byte and without allocating.

/// Whether `query` (raw, without `?`) has a parameter `name` (with `value`, if given).
pub fn has(query: &[u8], name: &[u8], value: Option<&[u8]>) -> bool {
    query.split(|&b| b == b'&').any(|pair| {
        let (pair_name, pair_value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &b""[..]),
        };
        decoded_eq(pair_name, name) && value.is_none_or(|value| decoded_eq(pair_value, value))
    })
}

/// Whether `raw` decodes to exactly `expected`. A malformed escape stands for itself.
fn decoded_eq(raw: &[u8], expected: &[u8]) -> bool {
    let mut raw = raw.iter().copied();
    let mut expected = expected.iter().copied();
    loop {
        let byte = match raw.next() {
            None => return expected.next().is_none(),
            Some(b'+') => b' ',
            Some(b'%') => {
                let mut lookahead = raw.clone();
                match (
                    lookahead.next().and_then(hex),
                    lookahead.next().and_then(hex),
                ) {
                    (Some(high), Some(low)) => {
                        raw = lookahead;
                        high << 4 | low
                    }
                    _ => b'%',
                }
            }
            Some(byte) => byte,
        };
        if expected.next() != Some(byte) {
            return false;
        }
    }
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

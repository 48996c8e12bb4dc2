//! `Accept-Language` (RFC 9110 §12.5.4) read for one question: is the client's preferred language
//! one of a rule's? Preferred means the highest q-value, the first listed among equals; `*` and
//! q=0 never count. A rule's tag holds for a client tag it equals or is a prefix of at a subtag
//! boundary (`pt` for `pt-BR`), ignoring case.

/// Whether the preferred language of `header` matches one of `tags` (lower case).
pub fn preferred_matches<'t>(header: &[u8], mut tags: impl Iterator<Item = &'t [u8]>) -> bool {
    match preferred(header) {
        Some(preferred) => tags.any(|tag| matches(tag, preferred)),
        None => false,
    }
}

/// The language range with the highest q-value, the first of equals; `None` when there is none.
/// Each item is cut at its first `;` (the range before, the parameters after), so the usual
/// `en-US,en;q=0.9` is read in one short pass.
fn preferred(header: &[u8]) -> Option<&[u8]> {
    let mut best: Option<(&[u8], u16)> = None;
    for item in header.split(|&b| b == b',') {
        let (range, params) = match item.iter().position(|&b| b == b';') {
            Some(semicolon) => (&item[..semicolon], Some(&item[semicolon + 1..])),
            None => (item, None),
        };
        let range = trim(range);
        if range.is_empty() || range == b"*" {
            continue;
        }
        // A malformed q-value makes the range unusable, not the header.
        let Some(q) = params.map_or(Some(1000), q_param) else {
            continue;
        };
        if q > 0 && best.is_none_or(|(_, best_q)| q > best_q) {
            best = Some((range, q));
        }
    }
    best.map(|(range, _)| range)
}

/// The q-value of an item's parameters (`q=0.8`, the first `q` if several); 1 without one.
fn q_param(params: &[u8]) -> Option<u16> {
    for param in params.split(|&b| b == b';') {
        let param = trim(param);
        if let Some(value) = param
            .strip_prefix(b"q=")
            .or_else(|| param.strip_prefix(b"Q="))
        {
            return qvalue(value);
        }
    }
    Some(1000)
}

/// A q-value in thousandths: `0`, `0.5`, `1`, `1.000` (at most three decimals).
fn qvalue(value: &[u8]) -> Option<u16> {
    let (whole, fraction) = match value.iter().position(|&b| b == b'.') {
        Some(dot) => (&value[..dot], &value[dot + 1..]),
        None => (value, &b""[..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + fraction.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match whole {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn matches(tag: &[u8], client: &[u8]) -> bool {
    client.len() >= tag.len()
        && client[..tag.len()].eq_ignore_ascii_case(tag)
        && (client.len() == tag.len() || client[tag.len()] == b'-')
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |end| end + 1);
    &bytes[start..end]
}

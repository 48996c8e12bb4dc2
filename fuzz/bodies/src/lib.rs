//! Fuzz target bodies, shared by the libFuzzer binaries (`fuzz/fuzz_targets/`) and by the stable
//! corpus replay (`tests/corpus.rs`, run by `cargo test --workspace`). Each body feeds the input to
//! a parser and checks properties that must hold for every input, not only "does not panic".

use shortcode::{CodeScheme, Shape};
#[cfg(feature = "url-validator")]
use shortlink_model::validate::{normalize_hosts, UrlPolicy};
#[cfg(feature = "url-validator")]
use std::sync::OnceLock;

const SECRET: &[u8] = b"shortlink fuzzing secret, 32 bytes";

/// The code scheme: `shape`, `decode`, `encode` and `parse_alias` on arbitrary bytes.
///
/// Byte 0 picks the body length (4..=10) and whether the check character is on; the rest is the
/// candidate code, and its first 8 bytes also serve as a sequence number.
pub fn code_scheme(data: &[u8]) {
    let Some((&config, rest)) = data.split_first() else {
        return;
    };
    let body_len = 4 + config % 7;
    let check = config & 0x80 == 0;
    let scheme = CodeScheme::new(SECRET, body_len, check).expect("a valid scheme");

    let shape = scheme.shape(rest);
    if let Ok(text) = std::str::from_utf8(rest) {
        let decoded = scheme.decode(text);
        assert_eq!(decoded.is_some(), shape == Shape::Generated, "{text:?}");
        if let Some(sequence) = decoded {
            assert!(sequence < scheme.capacity());
            assert_eq!(scheme.encode(sequence).unwrap(), text, "decode then encode");
        }
        if shortcode::parse_alias(&scheme, text).is_ok() {
            assert_eq!(shape, Shape::Alias, "an accepted alias {text:?}");
            assert!(!scheme.has_generated_shape(rest));
        }
    } else {
        assert_eq!(shape, Shape::Invalid, "non-UTF-8 is never a code");
    }

    let mut number = [0u8; 8];
    let n = rest.len().min(8);
    number[..n].copy_from_slice(&rest[..n]);
    let sequence = u64::from_le_bytes(number) % scheme.capacity();
    let code = scheme.encode(sequence).expect("in range");
    assert_eq!(code.len(), scheme.code_len());
    assert_eq!(scheme.shape(code.as_bytes()), Shape::Generated);
    assert_eq!(scheme.decode(&code), Some(sequence), "encode then decode");
}

#[cfg(feature = "url-validator")]
fn policy() -> &'static (UrlPolicy, Vec<String>) {
    static POLICY: OnceLock<(UrlPolicy, Vec<String>)> = OnceLock::new();
    POLICY.get_or_init(|| {
        let policy = UrlPolicy::new(2000, &[], &["blocked.example".to_owned()]).unwrap();
        let own = normalize_hosts(&["s1.test", "s2.test"]).unwrap();
        (policy, own)
    })
}

/// The sidecar's target URL policy (feature `url-validator`): whatever it accepts is safe to put in
/// a `Location` header and a Redis record, and validating the normalised form gives it back
/// unchanged.
#[cfg(feature = "url-validator")]
pub fn url_validator(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let (policy, own) = policy();
    let Ok(target) = policy.check(raw, own) else {
        return;
    };
    let stored = target.as_str();
    assert!(stored.len() <= policy.max_len());
    assert!(
        stored.bytes().all(|b| b.is_ascii_graphic()),
        "control, space or non-ASCII byte in {stored:?} from {raw:?}"
    );
    assert!(stored.starts_with("http://") || stored.starts_with("https://"));
    // Fixpoint: the stored form validates to itself (the record and the API agree on it).
    match policy.check(stored, own) {
        Ok(again) => assert_eq!(again.as_str(), stored, "normalising {raw:?} twice"),
        Err(e) => panic!("the normalised {stored:?} of {raw:?} is refused: {e}"),
    }
}

/// The analytics consumer's stream entry parser, and the `Accept-Language` reduction.
///
/// The input is split at 0xFF bytes: the first piece is the entry id, then key, value, key, ...
/// The whole input is also read as a module's batch (an entry's `v` value, any format).
pub fn visit_event(data: &[u8]) {
    use shortlink_visit_enrich::{split_entry, VisitEvent};
    let mut pieces = data.split(|&b| b == 0xff);
    let id = String::from_utf8_lossy(pieces.next().unwrap_or_default()).into_owned();
    let rest: Vec<&[u8]> = pieces.collect();
    let fields = rest
        .chunks(2)
        .map(|pair| (pair[0], pair.get(1).copied().unwrap_or_default()));
    if let Ok(event) = VisitEvent::from_fields(id.clone(), fields) {
        assert_eq!(event.id, id);
        assert_within_limits(&event);
    }
    let batch = [(shortlink_wire::event::BATCH_FIELD, data)];
    for event in split_entry("1-0", &batch).iter().flatten() {
        assert_within_limits(event);
    }
    let text = String::from_utf8_lossy(data);
    if let Some(tag) = shortlink_visit_enrich::language(&text) {
        assert!(!tag.is_empty() && tag.len() <= shortlink_visit_enrich::MAX_LANGUAGE_LEN);
        assert!(tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
    }
}

/// What the consumer keeps of any visit, whoever wrote its entry: a code's shape (an orphan
/// visit's path may be longer, up to its own limit), a time, and each text within its cap.
fn assert_within_limits(event: &shortlink_visit_enrich::VisitEvent) {
    use shortlink_wire::event::{MAX_CODE, MAX_HOST, MAX_LANG, MAX_PATH, MAX_REFERER, MAX_UA};
    let max_code = if event.orphan.is_some() {
        MAX_PATH
    } else {
        MAX_CODE
    };
    assert!(!event.code.is_empty() && event.code.len() <= max_code);
    assert!(event.orphan.is_some() || event.code.bytes().all(|b| b.is_ascii_graphic()));
    assert!(event.time_ms >= 0);
    let within = |text: &Option<String>, max: usize| text.as_ref().is_none_or(|t| t.len() <= max);
    assert!(within(&event.user_agent, MAX_UA));
    assert!(within(&event.referrer, MAX_REFERER));
    assert!(within(&event.host, MAX_HOST));
    assert!(within(&event.accept_language, MAX_LANG));
}

/// The nginx module's pure parsers, from `shortlink-wire`: the RESP reader, the link-record decoder
/// and the code-in-path rule.
///
/// Byte 0 picks the parser; the rest is its input.
pub fn module_parsers(data: &[u8]) {
    use shortlink_wire::path::{extract, Route, TrailingSlash};
    use shortlink_wire::{record, resp};

    let Some((&which, input)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            // A complete reply's length never exceeds the buffer, and skip agrees with parse.
            let parsed = resp::parse(input);
            if let Ok(Some((_, n))) = &parsed {
                assert!(*n <= input.len());
            }
            if let (Ok(Some((_, n))), Ok(Some((m, _)))) = (&parsed, resp::skip(input)) {
                assert_eq!(*n, m, "parse and skip disagree");
            }
        }
        1 => {
            if let Ok(record::Link::Live { status, target, .. }) = record::decode(input) {
                assert!(shortlink_wire::status::REDIRECT_STATUSES.contains(&status));
                assert!(!target.iter().any(|&b| b == b'\r' || b == b'\n'));
            }
        }
        _ => {
            for route in [Route::LastSegment, Route::Prefix(b"/s/".to_vec())] {
                for slash in [TrailingSlash::Refused, TrailingSlash::Ignored] {
                    if let Some(code) = extract(input, &route, slash) {
                        assert!(!code.is_empty());
                        assert!(!code.iter().any(|&b| matches!(b, b'/' | b'%' | b'?')));
                    }
                }
            }
        }
    }
}

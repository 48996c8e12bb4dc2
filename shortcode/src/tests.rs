use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fn scheme(len: u8) -> CodeScheme {
    CodeScheme::new(SECRET, len, true).unwrap()
}

#[test]
fn default_codes_are_seven_base62_characters() {
    let scheme = scheme(DEFAULT_BODY_LEN);
    let code = scheme.encode(0).unwrap();
    assert_eq!(code.len(), 7);
    assert!(code.bytes().all(|c| ALPHABET.contains(&c)));
    assert_eq!(scheme.shape(code.as_bytes()), Shape::Generated);
}

#[test]
fn rejects_short_secrets_and_bad_lengths() {
    assert_eq!(
        CodeScheme::new(b"short", 6, true).unwrap_err(),
        SchemeError::SecretTooShort { len: 5 }
    );
    assert!(CodeScheme::new(SECRET, 3, true).is_err());
    assert!(CodeScheme::new(SECRET, 11, true).is_err());
}

#[test]
fn sequence_beyond_capacity_is_refused() {
    let scheme = scheme(4);
    assert_eq!(scheme.capacity(), 62u64.pow(4));
    assert!(scheme.encode(scheme.capacity() - 1).is_ok());
    assert!(scheme.encode(scheme.capacity()).is_err());
}

#[test]
fn largest_body_length_round_trips_at_the_edges() {
    let scheme = scheme(MAX_BODY_LEN);
    for sequence in [0, 1, scheme.capacity() / 2, scheme.capacity() - 1] {
        let code = scheme.encode(sequence).unwrap();
        assert_eq!(scheme.decode(&code), Some(sequence));
    }
}

#[test]
fn different_secrets_give_different_codes() {
    let other = CodeScheme::new(b"another secret, 32 bytes long!!!", 6, true).unwrap();
    let ours = scheme(6);
    let same = (0..1000)
        .filter(|&n| ours.encode(n).unwrap() == other.encode(n).unwrap())
        .count();
    assert!(same < 5, "{same} of 1000 codes agree across secrets");
}

#[test]
fn consecutive_sequences_do_not_look_consecutive() {
    let scheme = scheme(6);
    let codes: Vec<String> = (0..1000).map(|n| scheme.encode(n).unwrap()).collect();
    // Neighbours sharing a 4-character prefix would betray a counter.
    let shared_prefix = codes
        .windows(2)
        .filter(|pair| pair[0][..4] == pair[1][..4])
        .count();
    assert!(
        shared_prefix < 3,
        "{shared_prefix} neighbours share a prefix"
    );
}

#[test]
fn shapes_are_classified() {
    let scheme = scheme(6);
    assert_eq!(scheme.shape(b"my-campaign"), Shape::Alias);
    assert_eq!(scheme.shape(b"ab"), Shape::Invalid);
    assert_eq!(scheme.shape(b"abc/def"), Shape::Invalid);
    assert_eq!(scheme.shape(&[b'a'; 65]), Shape::Invalid);
    assert_eq!(scheme.shape(b"abc%20d"), Shape::Invalid);
    let mut code = scheme.encode(42).unwrap().into_bytes();
    let last = code.len() - 1;
    code[last] = if code[last] == b'0' { b'1' } else { b'0' };
    assert_eq!(scheme.shape(&code), Shape::BadCheck);
}

#[test]
fn without_check_every_body_shape_is_generated() {
    let scheme = CodeScheme::new(SECRET, 6, false).unwrap();
    let code = scheme.encode(7).unwrap();
    assert_eq!(code.len(), 6);
    assert_eq!(scheme.shape(b"zzzzzz"), Shape::Generated);
    assert_eq!(scheme.decode(&code), Some(7));
}

#[test]
fn aliases_are_validated() {
    let scheme = scheme(6);
    assert_eq!(parse_alias(&scheme, "summer-sale"), Ok(()));
    assert_eq!(parse_alias(&scheme, "abc"), Ok(()));
    assert_eq!(parse_alias(&scheme, "Promo_2026"), Ok(()));
    assert_eq!(
        parse_alias(&scheme, "ab"),
        Err(AliasError::Length { len: 2 })
    );
    assert_eq!(
        parse_alias(&scheme, &"x".repeat(65)),
        Err(AliasError::Length { len: 65 })
    );
    assert_eq!(
        parse_alias(&scheme, "bad code"),
        Err(AliasError::Charset { position: 4 })
    );
    assert_eq!(
        parse_alias(&scheme, "café-au-lait"),
        Err(AliasError::Charset { position: 4 })
    );
    assert_eq!(
        parse_alias(&scheme, "Summer1"),
        Err(AliasError::ReservedShape { code_len: 7 })
    );
    assert_eq!(parse_alias(&scheme, "Summer_"), Ok(()));
}

#[test]
fn generated_codes_are_never_valid_aliases() {
    let scheme = scheme(6);
    for n in 0..200 {
        let code = scheme.encode(n).unwrap();
        assert!(parse_alias(&scheme, &code).is_err());
    }
}

#[test]
fn hex_secrets_parse() {
    assert_eq!(
        parse_hex_secret("00112233445566778899aabbccddeeff\n").unwrap(),
        (0u8..16).map(|i| i * 0x11).collect::<Vec<_>>()
    );
    assert!(parse_hex_secret("0011").is_err());
    assert!(parse_hex_secret("zz112233445566778899aabbccddeeff").is_err());
    assert!(parse_hex_secret("00112233445566778899aabbccddeeff0").is_err());
}

proptest! {
    #[test]
    fn encode_decode_round_trip(len in MIN_BODY_LEN..=MAX_BODY_LEN, key in any::<[u8; 16]>(), seed in any::<u64>()) {
        let scheme = CodeScheme::new(&key, len, true).unwrap();
        let sequence = seed % scheme.capacity();
        let code = scheme.encode(sequence).unwrap();
        prop_assert_eq!(code.len(), scheme.code_len());
        prop_assert_eq!(scheme.shape(code.as_bytes()), Shape::Generated);
        prop_assert_eq!(scheme.decode(&code), Some(sequence));
    }

    /// Distinct inputs over a sampled window give distinct codes: the permutation is injective there,
    /// and being a map of a finite set onto itself, a bijection.
    #[test]
    fn permutation_is_injective_on_sampled_ranges(len in MIN_BODY_LEN..=MAX_BODY_LEN, key in any::<[u8; 16]>(), start in any::<u64>()) {
        let scheme = CodeScheme::new(&key, len, true).unwrap();
        let start = start % (scheme.capacity() - 2000);
        let codes: HashSet<String> = (start..start + 2000).map(|n| scheme.encode(n).unwrap()).collect();
        prop_assert_eq!(codes.len(), 2000);
    }

    /// A random probe of the generated shape passes the check with probability 1/62.
    #[test]
    fn check_character_rejects_random_probes(key in any::<[u8; 16]>(), probes in proptest::collection::vec(proptest::collection::vec(0usize..62, 7), 4000)) {
        let scheme = CodeScheme::new(&key, 6, true).unwrap();
        let accepted = probes
            .iter()
            .map(|digits| digits.iter().map(|&d| ALPHABET[d]).collect::<Vec<u8>>())
            .filter(|probe| scheme.shape(probe) == Shape::Generated)
            .count();
        // Expected 4000/62 ≈ 64.5, sd ≈ 8; 61/62 rejection means at most ~1.6% accepted.
        prop_assert!(accepted < 110, "{} of 4000 random probes accepted", accepted);
    }
}

#[test]
fn fingerprints_name_what_differs_and_never_the_secret() {
    let secret = [7u8; 32];
    let a = CodeScheme::new(&secret, 6, true).unwrap();
    let fp = a.fingerprint();
    assert!(fp.starts_with("v1-L6-c1-"), "{fp}");
    assert_eq!(fp.len(), "v1-L6-c1-".len() + 16);
    assert!(!fp.contains(&"07".repeat(8)));
    assert_eq!(CodeScheme::new(&secret, 6, true).unwrap().fingerprint(), fp);
    assert!(fingerprint_difference(fp, fp).is_empty());

    let other_secret = CodeScheme::new(&[8u8; 32], 6, true).unwrap();
    assert_eq!(
        fingerprint_difference(fp, other_secret.fingerprint()),
        ["code secret"]
    );
    let longer = CodeScheme::new(&secret, 7, true).unwrap();
    assert_eq!(
        fingerprint_difference(fp, longer.fingerprint()),
        ["code length (L6 / L7)"]
    );
    let unchecked = CodeScheme::new(&secret, 6, false).unwrap();
    assert_eq!(
        fingerprint_difference(fp, unchecked.fingerprint()),
        ["check character (c1 / c0)"]
    );
}

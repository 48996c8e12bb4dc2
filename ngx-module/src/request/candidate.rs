//! What a location looks up for the code in its path when its domain carries another shortener's
//! codes (`shortlink_imported_codes`, `shortlink_code_case`): decided without a lookup, like the
//! shape check it extends.

use shortcode::{CodeScheme, Shape};

/// `shortlink_code_case`: whether codes keep their case on this location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CodeCase {
    /// The code is looked up as it is in the path.
    #[default]
    Exact,
    /// Codes were case-insensitive on the old system (Shlink's "loose" mode, stored lower case):
    /// the code is looked up lower-cased, except one of our own generated codes.
    Lower,
}

/// Whether a `lower` location looks `code` up lower-cased: it has an upper-case letter, and it is
/// not one of our generated codes (generated shape with a valid check character), which are
/// stored in mixed case and so keep working on the domain as they are. Our own mixed-case
/// aliases do not: they have no check character to tell them from an old code.
pub fn lowers(scheme: &CodeScheme, code: &[u8]) -> bool {
    code.iter().any(u8::is_ascii_uppercase) && scheme.shape(code) != Shape::Generated
}

/// Whether a code the shape check would answer 404 without a lookup is looked up on a
/// `shortlink_imported_codes on` location: any code of the imported alphabet (YOURLS's `1`,
/// Kutt's `a.b`), and a generated-shape code with a wrong check character (Bitly's 7-character
/// codes have our shape by chance), which elsewhere is a 404 as soon as the check character is
/// trusted.
pub fn imported_lookup(shape: Shape, code: &[u8]) -> bool {
    match shape {
        Shape::BadCheck => true,
        Shape::Invalid => shortcode::is_imported_charset(code),
        Shape::Generated | Shape::Alias => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheme() -> CodeScheme {
        CodeScheme::new(&[7; shortcode::MIN_SECRET_LEN], 6, true).unwrap()
    }

    /// One of our generated codes with both cases in it, and the same body with a wrong check
    /// character.
    fn generated_mixed(scheme: &CodeScheme) -> (String, String) {
        let code = (0..)
            .map(|n| scheme.encode(n).unwrap())
            .find(|c| {
                c.bytes().any(|b| b.is_ascii_uppercase())
                    && c.bytes().any(|b| b.is_ascii_lowercase())
            })
            .unwrap();
        let mut bad = code.clone().into_bytes();
        let last = bad.len() - 1;
        bad[last] = shortcode::ALPHABET
            .iter()
            .copied()
            .find(|&c| c != bad[last] && c.is_ascii_uppercase())
            .unwrap();
        (code, String::from_utf8(bad).unwrap())
    }

    #[test]
    fn our_generated_codes_keep_their_case() {
        let scheme = scheme();
        let (ours, bad_check) = generated_mixed(&scheme);
        assert!(!lowers(&scheme, ours.as_bytes()), "{ours}");
        assert!(lowers(&scheme, bad_check.as_bytes()), "{bad_check}");
    }

    #[test]
    fn other_codes_are_lowered_only_when_they_have_upper_case() {
        let scheme = scheme();
        for code in ["AbC", "Spring-Sale", "X", "a.B~c"] {
            assert!(lowers(&scheme, code.as_bytes()), "{code}");
        }
        for code in ["abc", "1", "spring-sale", "a.b~c", "123"] {
            assert!(!lowers(&scheme, code.as_bytes()), "{code}");
        }
    }

    #[test]
    fn imported_locations_look_up_what_the_shape_check_refuses() {
        let scheme = scheme();
        let (ours, bad_check) = generated_mixed(&scheme);
        for code in ["1", "a2", "x.y~z", bad_check.as_str()] {
            let shape = scheme.shape(code.as_bytes());
            assert!(!shape.may_exist(), "{code}");
            assert!(imported_lookup(shape, code.as_bytes()), "{code}");
        }
        for code in ["a/b", "a%20", "", "a b"] {
            let shape = scheme.shape(code.as_bytes());
            assert!(!imported_lookup(shape, code.as_bytes()), "{code:?}");
        }
        let long = "a.".repeat(33);
        assert!(!imported_lookup(
            scheme.shape(long.as_bytes()),
            long.as_bytes()
        ));
        // Codes of our shapes are looked up anyway: not counted as imported lookups.
        for code in [ours.as_str(), "spring-sale"] {
            assert!(!imported_lookup(
                scheme.shape(code.as_bytes()),
                code.as_bytes()
            ));
        }
    }
}

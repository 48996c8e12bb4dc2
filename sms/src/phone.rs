//! Recipients' phone numbers to E.164, with a default country for numbers written nationally.
//!
//! Parsing and validation are libphonenumber's rules and metadata, through the `phonenumber`
//! crate (Apache-2.0; its metadata version is the `+9.x.y` of its version). A number is accepted
//! when libphonenumber finds it valid for its country: right length and prefix for a number
//! range in use. It does not say whether the line can receive SMS (that needs the operator).

use phonenumber::{country, Mode};
use std::fmt;
use std::str::FromStr;

/// Longest input looked at; longer strings are refused before parsing (E.164 numbers have at
/// most 15 digits; this leaves room for spaces, punctuation and an extension).
pub const MAX_INPUT_LEN: usize = 64;

/// A country for numbers written without `+` or an international prefix: an ISO 3166-1 alpha-2
/// code (`FR`, `us`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region(country::Id);

impl FromStr for Region {
    type Err = UnknownRegion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 2 {
            return Err(UnknownRegion(s.to_owned()));
        }
        country::Id::from_str(&s.to_ascii_uppercase())
            .map(Region)
            .map_err(|_| UnknownRegion(s.to_owned()))
    }
}

/// A region code that libphonenumber does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown country {0:?} (expected an ISO 3166-1 alpha-2 code such as FR)")]
pub struct UnknownRegion(pub String);

/// A number in E.164: `+` and up to 15 digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct E164(String);

impl E164 {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for E164 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a recipient's number was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PhoneError {
    #[error("the number is empty")]
    Empty,
    #[error("the number is longer than {MAX_INPUT_LEN} characters")]
    TooLong,
    #[error("the number has no country code and no default country was given")]
    NoCountry,
    #[error("not a phone number ({0})")]
    Unparsable(String),
    #[error("not a valid number for its country")]
    Invalid,
}

/// Normalises `input` to E.164. `default` is the country of numbers written nationally; a
/// number starting with `+` (or an international prefix of the default country) names its own.
pub fn normalize(input: &str, default: Option<Region>) -> Result<E164, PhoneError> {
    let input = input.trim();
    if input.is_empty() {
        return Err(PhoneError::Empty);
    }
    if input.len() > MAX_INPUT_LEN {
        return Err(PhoneError::TooLong);
    }
    let number = phonenumber::parse(default.map(|r| r.0), input).map_err(|e| match e {
        phonenumber::ParseError::InvalidCountryCode
            if default.is_none() && !input.starts_with('+') =>
        {
            PhoneError::NoCountry
        }
        e => PhoneError::Unparsable(e.to_string()),
    })?;
    if !phonenumber::is_valid(&number) {
        return Err(PhoneError::Invalid);
    }
    Ok(E164(number.format().mode(Mode::E164).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr() -> Option<Region> {
        Some("FR".parse().unwrap())
    }

    #[test]
    fn national_and_international_forms_agree() {
        for input in [
            "06 12 34 56 78",
            "0612345678",
            "+33 6 12 34 56 78",
            "+33612345678",
            "0033 6 12 34 56 78",
            " 06.12.34.56.78 ",
        ] {
            assert_eq!(
                normalize(input, fr()).unwrap().as_str(),
                "+33612345678",
                "{input:?}"
            );
        }
        // A number with its own country code keeps it whatever the default.
        assert_eq!(
            normalize("+44 7400 123456", fr()).unwrap().as_str(),
            "+447400123456"
        );
        assert_eq!(
            normalize("+1 (201) 555-0123", None).unwrap().as_str(),
            "+12015550123"
        );
        assert_eq!(
            normalize("(201) 555-0123", Some("us".parse().unwrap()))
                .unwrap()
                .as_str(),
            "+12015550123"
        );
    }

    #[test]
    fn bad_numbers_say_why() {
        assert_eq!(normalize("", fr()), Err(PhoneError::Empty));
        assert_eq!(normalize("   ", fr()), Err(PhoneError::Empty));
        assert_eq!(normalize(&"1".repeat(65), fr()), Err(PhoneError::TooLong));
        assert_eq!(normalize("0612345678", None), Err(PhoneError::NoCountry));
        assert!(matches!(
            normalize("hello", fr()),
            Err(PhoneError::Unparsable(_))
        ));
        // Too short for France, and a range not in use.
        assert_eq!(normalize("06 12 34", fr()), Err(PhoneError::Invalid));
        assert_eq!(
            normalize("+33 0 12 34 56 78", None),
            Err(PhoneError::Invalid)
        );
    }

    #[test]
    fn regions_are_iso_codes() {
        assert!("fr".parse::<Region>().is_ok());
        assert_eq!("XX".parse::<Region>(), Err(UnknownRegion("XX".into())));
        assert!("FRA".parse::<Region>().is_err());
    }
}

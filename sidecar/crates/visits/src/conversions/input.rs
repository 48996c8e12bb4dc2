//! What a conversion says, checked: the click it names, its name, its exact value and currency,
//! the sender's event id and time. Parsing only (no I/O); the store checks the click.

use super::currencies::CURRENCIES;
use chrono::{DateTime, Duration, Utc};

/// Longest event id, name and click id, in characters.
pub const MAX_EVENT_ID: usize = 128;
pub const MAX_NAME: usize = 64;
pub const MAX_CLICK_ID: usize = 64;

/// How far in the future a sender's `converted_at` may be (its clock against ours).
pub const CLOCK_SKEW: Duration = Duration::minutes(5);

/// Why a conversion is refused: each is an API error `code` (4xx, nothing written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No such visit in the workspace (another workspace's click is the same answer), or no
    /// human visit of the link with that `ref`.
    UnknownClick,
    BeforeClick,
    OutsideWindow,
    InvalidCurrency,
    InvalidValue,
    InvalidName,
    InvalidEventId,
    /// `converted_at` in the future beyond [`CLOCK_SKEW`].
    InvalidTime,
    /// Neither `click_id` nor `code` + `ref`, or both.
    InvalidClick,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::UnknownClick => "unknown_click",
            Refusal::BeforeClick => "before_click",
            Refusal::OutsideWindow => "outside_window",
            Refusal::InvalidCurrency => "invalid_currency",
            Refusal::InvalidValue => "invalid_value",
            Refusal::InvalidName => "invalid_name",
            Refusal::InvalidEventId => "invalid_event_id",
            Refusal::InvalidTime => "invalid_converted_at",
            Refusal::InvalidClick => "invalid_click",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::UnknownClick => "no click with this id (or no human visit of this code and ref) in this workspace",
            Refusal::BeforeClick => "converted_at is before the click",
            Refusal::OutsideWindow => "converted_at is after the click's attribution window",
            Refusal::InvalidCurrency => "currency must be an ISO 4217 code with a minor unit (EUR, USD, JPY ...), given with value",
            Refusal::InvalidValue => "value must be a non-negative decimal with at most the currency's minor-unit digits, given with currency",
            Refusal::InvalidName => "name must be 1 to 64 characters, no control characters",
            Refusal::InvalidEventId => "event_id is required: 1 to 128 characters, no control characters",
            Refusal::InvalidTime => "converted_at may not be in the future",
            Refusal::InvalidClick => "give click_id, or code and ref, not both",
        }
    }

    /// 404 for a click not found; 422 for the rest, as every value the API reads but cannot
    /// take (the OpenAPI schema states what it can of these, the rest in words).
    pub fn status(self) -> u16 {
        match self {
            Refusal::UnknownClick => 404,
            _ => 422,
        }
    }
}

/// Which click a conversion names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Click {
    /// The visit's id (what the landing page got in `click_id_param`).
    Id(String),
    /// The latest human visit of a per-recipient link, at or before the conversion.
    Recipient { code: String, recipient_ref: String },
}

/// An amount in minor units of its currency: `minor / 10^exponent` exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Money {
    pub minor: i64,
    pub currency: &'static str,
    pub exponent: u8,
}

impl Money {
    /// A decimal text (`19.99`, `20`, `0.5`) in `currency`: at most the currency's minor-unit
    /// digits after the point (trailing zeros beyond them are fine), not negative, within i64.
    pub fn parse(value: &str, currency: &str) -> Result<Money, Refusal> {
        let (currency, exponent) = currency_of(currency).ok_or(Refusal::InvalidCurrency)?;
        let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(fraction) || value.ends_with('.') {
            return Err(Refusal::InvalidValue);
        }
        let fraction = fraction.trim_end_matches('0');
        if fraction.len() > usize::from(exponent) {
            return Err(Refusal::InvalidValue);
        }
        let mut text = format!("{whole}{fraction}");
        text.extend(std::iter::repeat_n(
            '0',
            usize::from(exponent) - fraction.len(),
        ));
        let minor: i64 = text.parse().map_err(|_| Refusal::InvalidValue)?;
        Ok(Money {
            minor,
            currency,
            exponent,
        })
    }

    /// The exact decimal text (`19.99`, `1000`, `0.500` for an exponent of 3).
    pub fn text(minor: i64, exponent: u8) -> String {
        let exponent = usize::from(exponent);
        if exponent == 0 {
            return minor.to_string();
        }
        let digits = format!("{:0>width$}", minor.unsigned_abs(), width = exponent + 1);
        let (whole, fraction) = digits.split_at(digits.len() - exponent);
        format!("{}{whole}.{fraction}", if minor < 0 { "-" } else { "" })
    }
}

/// Every currency code a conversion may carry (the OpenAPI schema's enum).
pub fn currency_codes() -> impl Iterator<Item = &'static str> {
    CURRENCIES.iter().map(|(code, _)| *code)
}

/// The currency as ISO 4217 spells it, and its exponent; `None` for anything not on the list.
pub fn currency_of(code: &str) -> Option<(&'static str, u8)> {
    CURRENCIES
        .binary_search_by(|(known, _)| known.cmp(&code))
        .ok()
        .map(|i| CURRENCIES[i])
}

fn plain_text(text: &str, max: usize) -> bool {
    let chars = text.chars().count();
    (1..=max).contains(&chars) && !text.chars().any(char::is_control)
}

/// A conversion as a sender gives it, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConversion {
    pub click: Click,
    pub name: String,
    pub money: Option<Money>,
    pub event_id: String,
    pub converted_at: DateTime<Utc>,
}

/// A sender's fields, as text, before they are checked.
#[derive(Debug, Clone, Default)]
pub struct RawConversion {
    pub click_id: Option<String>,
    pub code: Option<String>,
    pub recipient_ref: Option<String>,
    pub name: Option<String>,
    pub value: Option<String>,
    pub currency: Option<String>,
    pub event_id: Option<String>,
    pub converted_at: Option<DateTime<Utc>>,
}

impl RawConversion {
    /// Checks everything that needs no database, in the order a sender would fix them.
    pub fn check(self, now: DateTime<Utc>) -> Result<NewConversion, Refusal> {
        let event_id = (self.event_id)
            .filter(|id| plain_text(id, MAX_EVENT_ID))
            .ok_or(Refusal::InvalidEventId)?;
        let click = match (self.click_id, self.code, self.recipient_ref) {
            (Some(id), None, None) if plain_text(&id, MAX_CLICK_ID) => Click::Id(id),
            (Some(_), None, None) => return Err(Refusal::UnknownClick),
            (None, Some(code), Some(recipient_ref)) => Click::Recipient {
                code,
                recipient_ref,
            },
            _ => return Err(Refusal::InvalidClick),
        };
        let name = self
            .name
            .filter(|name| plain_text(name, MAX_NAME))
            .ok_or(Refusal::InvalidName)?;
        let money = match (self.value, self.currency) {
            (None, None) => None,
            (Some(value), Some(currency)) => Some(Money::parse(&value, &currency)?),
            (Some(_), None) => return Err(Refusal::InvalidCurrency),
            (None, Some(_)) => return Err(Refusal::InvalidValue),
        };
        let converted_at = self.converted_at.unwrap_or(now);
        if converted_at > now + CLOCK_SKEW {
            return Err(Refusal::InvalidTime);
        }
        Ok(NewConversion {
            click,
            name,
            money,
            event_id,
            converted_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_exact_minor_units() {
        let money = |v: &str, c: &str| Money::parse(v, c).map(|m| (m.minor, m.exponent));
        assert_eq!(money("19.99", "EUR"), Ok((1999, 2)));
        assert_eq!(money("19.990", "EUR"), Ok((1999, 2)));
        assert_eq!(money("20", "USD"), Ok((2000, 2)));
        assert_eq!(money("0.5", "USD"), Ok((50, 2)));
        assert_eq!(money("1500", "JPY"), Ok((1500, 0)));
        assert_eq!(money("1.234", "BHD"), Ok((1234, 3)));
        assert_eq!(money("0.1", "JPY"), Err(Refusal::InvalidValue));
        assert_eq!(money("19.999", "EUR"), Err(Refusal::InvalidValue));
        for bad in [
            "-1",
            "1e3",
            "",
            ".5",
            "5.",
            "1,5",
            "NaN",
            "99999999999999999999",
        ] {
            assert_eq!(money(bad, "EUR"), Err(Refusal::InvalidValue), "{bad}");
        }
        for bad in ["eur", "EURO", "XXY", "XAU", ""] {
            assert_eq!(money("1", bad), Err(Refusal::InvalidCurrency), "{bad}");
        }
        assert_eq!(Money::text(1999, 2), "19.99");
        assert_eq!(Money::text(5, 2), "0.05");
        assert_eq!(Money::text(1500, 0), "1500");
        assert_eq!(Money::text(500, 3), "0.500");
    }

    #[test]
    fn fields_are_checked() {
        let now = Utc::now();
        let base = || RawConversion {
            click_id: Some("1700000000000-0".into()),
            name: Some("purchase".into()),
            event_id: Some("order-1".into()),
            ..RawConversion::default()
        };
        assert!(base().check(now).is_ok());
        let refused = |raw: RawConversion| raw.check(now).unwrap_err();
        assert_eq!(
            refused(RawConversion {
                event_id: None,
                ..base()
            }),
            Refusal::InvalidEventId
        );
        let long = "x".repeat(129);
        assert_eq!(
            refused(RawConversion {
                event_id: Some(long),
                ..base()
            }),
            Refusal::InvalidEventId
        );
        assert_eq!(
            refused(RawConversion {
                name: Some(String::new()),
                ..base()
            }),
            Refusal::InvalidName
        );
        assert_eq!(
            refused(RawConversion {
                name: Some("a".repeat(65)),
                ..base()
            }),
            Refusal::InvalidName
        );
        assert_eq!(
            refused(RawConversion {
                value: Some("1".into()),
                ..base()
            }),
            Refusal::InvalidCurrency
        );
        assert_eq!(
            refused(RawConversion {
                currency: Some("EUR".into()),
                ..base()
            }),
            Refusal::InvalidValue
        );
        assert_eq!(
            refused(RawConversion {
                code: Some("abc".into()),
                ..base()
            }),
            Refusal::InvalidClick
        );
        let later = now + Duration::minutes(6);
        assert_eq!(
            refused(RawConversion {
                converted_at: Some(later),
                ..base()
            }),
            Refusal::InvalidTime
        );
        let by_ref = RawConversion {
            click_id: None,
            code: Some("abc".into()),
            recipient_ref: Some("r-1".into()),
            ..base()
        };
        assert!(matches!(
            by_ref.check(now).unwrap().click,
            Click::Recipient { .. }
        ));
    }
}

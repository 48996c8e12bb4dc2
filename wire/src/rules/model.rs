//! What a rule is: its conditions, its action and their limits, as the decoder and the API see
//! them (the record holds them encoded: [`super::codec`]).

use super::{Cidr, Sticky, Weekly};

/// At most this many rules on a link, conditions in a rule, variants in a split and values in one
/// condition's list (languages, countries, address ranges). The API refuses more, with these
/// numbers in its error; the decoder refuses a record that holds more.
pub const MAX_RULES: usize = 16;
pub const MAX_CONDITIONS: usize = 8;
pub const MAX_VARIANTS: usize = 8;
pub const MAX_VALUES: usize = 32;

/// Where a rule sends a click: the same three things a link's own target has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: Box<[u8]>,
    /// 301, 302, 307 or 308.
    pub status: u16,
    /// Append the short URL's query string to `url`.
    pub forward_query: bool,
}

/// A [`Target`] as it lies in a [`RuleSet`]'s bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetRef<'a> {
    pub url: &'a [u8],
    pub status: u16,
    pub forward_query: bool,
}

/// One arm of a split, chosen with probability `weight / sum of weights`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub weight: u16,
    pub target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Target(Target),
    /// A/B: sticky splits pick by the recipient or the visitor (one person always sees one
    /// variant, [`Sticky`]), others per click.
    Split {
        variants: Box<[Variant]>,
        sticky: Sticky,
    },
}

/// One condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The device class of the `User-Agent` is one of these (a bit per [`Device`]).
    Device(u8),
    /// The client's preferred language (`Accept-Language`, highest q first) is one of these,
    /// lower case; `pt` holds for `pt-BR` too, `pt-br` only for `pt-BR`.
    Language(Box<[Box<[u8]>]>),
    /// The client's country (ISO 3166-1 alpha-2, upper case) is one of these.
    Country(Box<[[u8; 2]]>),
    /// The query string has this parameter (with this value, if given), compared decoded.
    Query {
        name: Box<[u8]>,
        value: Option<Box<[u8]>>,
    },
    /// The client address lies in one of these ranges.
    Ip(Box<[Cidr]>),
    /// The click comes at or after this Unix second.
    After(u64),
    /// The click comes before this Unix second.
    Before(u64),
    /// The click comes on one of some weekdays, within some hours, in a time zone.
    Weekly(Weekly),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub conditions: Box<[Condition]>,
    pub action: Action,
}

//! The rules' bytes inside a link record: a compact, length-prefixed binary form (no escaping, a
//! target URL may hold any byte a URL may), written by the sidecar and read by the module and the
//! sidecar's fallback. Decoding checks everything the evaluator relies on (status codes, URLs safe
//! in a `Location` header, a split's positive weight, known zones, the limits), so a value that
//! decodes is one the evaluator answers from without a second look.
//!
//! ```text
//! rules     = count:u8 rule*
//! rule      = conditions:u8 condition* action
//! condition = 'd' mask:u8                          device classes (Device::bit)
//!           | 'l' n:u8 (len:u8 tag)*               languages, lower case
//!           | 'c' n:u8 (code:2)*                   countries, upper case
//!           | 'q' len:u8 name flag:u8 [len:u16 value]   flag 1: a value follows
//!           | 'i' n:u8 (family:u8 prefix:u8 addr:4|16)* family 4 or 6
//!           | 'a' unix:u64 | 'b' unix:u64           after / before
//!           | 'w' days:u8 hours:u24 len:u8 zone     weekly window in an IANA zone
//! action    = 't' target | 's' sticky:u8 n:u8 (weight:u16 target)*   sticky: Sticky::byte
//! target    = status:u16 flags:u8 len:u16 url      flags bit 1: forward the query
//! ```
//! Integers are big-endian.

use super::{
    Action, Cidr, Condition, Device, Rule, Sticky, Target, TargetRef, Variant, Weekly,
    MAX_CONDITIONS, MAX_RULES, MAX_VALUES, MAX_VARIANTS,
};
use crate::status::is_redirect_status;
use crate::target::is_valid_target;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const FLAG_FORWARD_QUERY: u8 = 1;

/// Why bytes are not rules. The record decoder reports any of these as a bad record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesError {
    /// The bytes end inside a value, or go on after the last rule.
    Length,
    /// More rules, conditions, variants or values than the limits allow, or none where one is
    /// needed.
    Count,
    /// An unknown condition or action tag.
    Tag,
    /// A value outside its domain: a status, a URL, a zero weight sum, an address, a zone, a mask.
    Value,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RulesError::Length => "rules end early or run long",
            RulesError::Count => "rules over a limit",
            RulesError::Tag => "unknown rule tag",
            RulesError::Value => "bad rule value",
        })
    }
}

/// Appends the encoding of `rules` to `out`. The caller has validated them (the API does, with
/// errors a user can act on); a list over the limits still encodes, and then fails to decode.
pub fn encode(rules: &[Rule], out: &mut Vec<u8>) {
    out.push(rules.len() as u8);
    for rule in rules {
        out.push(rule.conditions.len() as u8);
        for condition in rule.conditions.iter() {
            encode_condition(condition, out);
        }
        match &rule.action {
            Action::Target(target) => {
                out.push(b't');
                encode_target(target, out);
            }
            Action::Split { variants, sticky } => {
                out.extend([b's', sticky.byte(), variants.len() as u8]);
                for variant in variants.iter() {
                    out.extend(variant.weight.to_be_bytes());
                    encode_target(&variant.target, out);
                }
            }
        }
    }
}

fn encode_condition(condition: &Condition, out: &mut Vec<u8>) {
    match condition {
        Condition::Device(mask) => out.extend([b'd', *mask]),
        Condition::Language(tags) => {
            out.extend([b'l', tags.len() as u8]);
            for tag in tags.iter() {
                out.push(tag.len() as u8);
                out.extend_from_slice(tag);
            }
        }
        Condition::Country(codes) => {
            out.extend([b'c', codes.len() as u8]);
            for code in codes.iter() {
                out.extend_from_slice(code);
            }
        }
        Condition::Query { name, value } => {
            out.extend([b'q', name.len() as u8]);
            out.extend_from_slice(name);
            match value {
                Some(value) => {
                    out.push(1);
                    out.extend((value.len() as u16).to_be_bytes());
                    out.extend_from_slice(value);
                }
                None => out.push(0),
            }
        }
        Condition::Ip(ranges) => {
            out.extend([b'i', ranges.len() as u8]);
            for range in ranges.iter() {
                match range.addr() {
                    IpAddr::V4(v4) => {
                        out.extend([4, range.prefix()]);
                        out.extend(v4.octets());
                    }
                    IpAddr::V6(v6) => {
                        out.extend([6, range.prefix()]);
                        out.extend(v6.octets());
                    }
                }
            }
        }
        Condition::After(at) => {
            out.push(b'a');
            out.extend(at.to_be_bytes());
        }
        Condition::Before(at) => {
            out.push(b'b');
            out.extend(at.to_be_bytes());
        }
        Condition::Weekly(window) => {
            out.extend([b'w', window.days]);
            out.extend(&window.hours.to_be_bytes()[1..]);
            let zone = window.zone.name();
            out.push(zone.len() as u8);
            out.extend_from_slice(zone.as_bytes());
        }
    }
}

fn encode_target(target: &Target, out: &mut Vec<u8>) {
    out.extend(target.status.to_be_bytes());
    out.push(if target.forward_query {
        FLAG_FORWARD_QUERY
    } else {
        0
    });
    out.extend((target.url.len() as u16).to_be_bytes());
    out.extend_from_slice(&target.url);
}

/// The rules in `bytes`, all of them checked, as values (the API's round trips and tests; the
/// module evaluates [`super::RuleSet`]'s bytes in place instead).
pub fn decode(bytes: &[u8]) -> Result<Box<[Rule]>, RulesError> {
    RawRules::new(bytes)?
        .map(|rule| rule.and_then(|rule| rule.to_rule()))
        .collect()
}

/// Whether `bytes` decode, with every check [`decode`] makes, without allocating: one pass,
/// each part checked as it is read (a record's rules are checked at every cache fill).
pub fn check(bytes: &[u8]) -> Result<(), RulesError> {
    check_spans(bytes, |_, _| {})
}

/// [`check`], telling `span` where each rule's action starts and the rule ends.
pub(super) fn check_spans(
    bytes: &[u8],
    mut span: impl FnMut(usize, usize),
) -> Result<(), RulesError> {
    let mut reader = Reader { bytes };
    let offset = |reader: &Reader<'_>| bytes.len() - reader.bytes.len();
    for _ in 0..reader.count(MAX_RULES)? {
        for _ in 0..reader.count(MAX_CONDITIONS)? {
            reader.condition()?.check()?;
        }
        let action_at = offset(&reader);
        reader.action()?.check()?;
        span(action_at, offset(&reader));
    }
    match reader.bytes {
        [] => Ok(()),
        _ => Err(RulesError::Length),
    }
}

/// Where each rule's action starts and the rule ends, in `bytes`, by structure alone; stops at
/// the first rule whose structure does not read.
pub(super) fn spans(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut reader = Reader { bytes };
    let count = reader.u8().map_or(0, usize::from);
    let offset = move |reader: &Reader<'_>| bytes.len() - reader.bytes.len();
    (0..count).map_while(move |_| {
        for _ in 0..reader.u8().ok()? {
            reader.condition().ok()?;
        }
        let action_at = offset(&reader);
        reader.action().ok()?;
        Some((action_at, offset(&reader)))
    })
}

/// The rules of `bytes` as they lie there, one at a time. The structure (lengths, tags, counts)
/// is checked as it is read; the values only by [`check`], so a reader of checked bytes pays for
/// no check twice.
pub(super) struct RawRules<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> RawRules<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Result<RawRules<'a>, RulesError> {
        let mut reader = Reader { bytes };
        let left = reader.count(MAX_RULES)?;
        Ok(RawRules { reader, left })
    }

    fn rule(&mut self) -> Result<RawRule<'a>, RulesError> {
        let count = self.reader.count(MAX_CONDITIONS)?;
        let start = self.reader.bytes;
        for _ in 0..count {
            self.reader.condition()?;
        }
        let conditions = &start[..start.len() - self.reader.bytes.len()];
        let action = self.reader.action()?;
        Ok(RawRule {
            conditions,
            count,
            action,
        })
    }
}

impl<'a> Iterator for RawRules<'a> {
    type Item = Result<RawRule<'a>, RulesError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if self.reader.bytes.is_empty() {
                return None;
            }
            self.reader.bytes = &[];
            return Some(Err(RulesError::Length));
        }
        self.left -= 1;
        let rule = self.rule();
        if rule.is_err() {
            self.left = 0;
            self.reader.bytes = &[];
        }
        Some(rule)
    }
}

/// One rule as it lies in the bytes.
pub(super) struct RawRule<'a> {
    /// The conditions' bytes, `count` of them, already read once.
    conditions: &'a [u8],
    count: usize,
    pub(super) action: RawAction<'a>,
}

impl<'a> RawRule<'a> {
    pub(super) fn conditions(&self) -> impl Iterator<Item = RawCondition<'a>> {
        let mut reader = Reader {
            bytes: self.conditions,
        };
        // Read once already when the rule was: these reads cannot fail.
        (0..self.count).map_while(move |_| reader.condition().ok())
    }

    fn to_rule(&self) -> Result<Rule, RulesError> {
        let conditions = self
            .conditions()
            .map(|condition| condition.check().and_then(|()| condition.to_condition()))
            .collect::<Result<Box<[_]>, _>>()?;
        self.action.check()?;
        let action = match &self.action {
            RawAction::Target(target) => Action::Target(target.to_target()),
            split @ RawAction::Split { sticky, .. } => Action::Split {
                variants: split
                    .variants()
                    .map(|(weight, target)| Variant {
                        weight,
                        target: target.to_target(),
                    })
                    .collect(),
                sticky: *sticky,
            },
        };
        Ok(Rule { conditions, action })
    }
}

/// One condition as it lies in the bytes.
pub(super) enum RawCondition<'a> {
    Device(u8),
    /// `count` tags, each `len:u8 tag`.
    Language {
        count: usize,
        bytes: &'a [u8],
    },
    /// Two bytes a country.
    Country(&'a [u8]),
    Query {
        name: &'a [u8],
        value: Option<&'a [u8]>,
    },
    /// `count` ranges, each `family:u8 prefix:u8 addr`.
    Ip {
        count: usize,
        bytes: &'a [u8],
    },
    After(u64),
    Before(u64),
    Weekly {
        days: u8,
        hours: u32,
        zone: &'a [u8],
    },
}

impl<'a> RawCondition<'a> {
    pub(super) fn languages(count: usize, bytes: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
        let mut reader = Reader { bytes };
        (0..count).map_while(move |_| {
            let len = reader.u8().ok()?;
            reader.take(usize::from(len)).ok()
        })
    }

    /// The ranges of an `Ip` condition; a range whose prefix does not fit its address (refused
    /// by [`check`]) is left out.
    pub(super) fn ranges(count: usize, bytes: &'a [u8]) -> impl Iterator<Item = Cidr> + 'a {
        let mut reader = Reader { bytes };
        (0..count).map_while(move |_| reader.range().ok())
    }

    fn check(&self) -> Result<(), RulesError> {
        let valid = match *self {
            RawCondition::Device(mask) => {
                let known = Device::ALL
                    .iter()
                    .fold(0, |mask, device| mask | device.bit());
                mask != 0 && mask & !known == 0
            }
            RawCondition::Language { count, bytes } => Self::languages(count, bytes).all(|tag| {
                !tag.is_empty()
                    && tag
                        .iter()
                        .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }),
            RawCondition::Country(codes) => codes.iter().all(u8::is_ascii_uppercase),
            RawCondition::Query { name, .. } => !name.is_empty(),
            RawCondition::Ip { count, bytes } => Self::ranges(count, bytes).count() == count,
            RawCondition::After(_) | RawCondition::Before(_) => true,
            RawCondition::Weekly { days, hours, zone } => {
                days != 0
                    && days & !Weekly::ALL_DAYS == 0
                    && hours != 0
                    && weekly_zone(zone).is_some()
            }
        };
        valid.then_some(()).ok_or(RulesError::Value)
    }

    fn to_condition(&self) -> Result<Condition, RulesError> {
        Ok(match *self {
            RawCondition::Device(mask) => Condition::Device(mask),
            RawCondition::Language { count, bytes } => {
                Condition::Language(Self::languages(count, bytes).map(Into::into).collect())
            }
            RawCondition::Country(codes) => Condition::Country(
                codes
                    .chunks_exact(2)
                    .map(|code| [code[0], code[1]])
                    .collect(),
            ),
            RawCondition::Query { name, value } => Condition::Query {
                name: name.into(),
                value: value.map(Into::into),
            },
            RawCondition::Ip { count, bytes } => {
                Condition::Ip(Self::ranges(count, bytes).collect())
            }
            RawCondition::After(at) => Condition::After(at),
            RawCondition::Before(at) => Condition::Before(at),
            RawCondition::Weekly { days, hours, zone } => Condition::Weekly(Weekly {
                days,
                hours,
                zone: weekly_zone(zone).ok_or(RulesError::Value)?,
            }),
        })
    }
}

/// A weekly window's zone, by its IANA name.
pub(super) fn weekly_zone(name: &[u8]) -> Option<chrono_tz::Tz> {
    std::str::from_utf8(name).ok().and_then(Weekly::zone_named)
}

/// A rule's action as it lies in the bytes.
pub(super) enum RawAction<'a> {
    Target(TargetRef<'a>),
    /// `count` variants, each `weight:u16 target`, weighing `total` together.
    Split {
        sticky: Sticky,
        count: usize,
        total: u32,
        bytes: &'a [u8],
    },
}

impl<'a> RawAction<'a> {
    /// A split's variants: weight and target.
    pub(super) fn variants(&self) -> impl Iterator<Item = (u16, TargetRef<'a>)> {
        let (count, bytes) = match *self {
            RawAction::Split { count, bytes, .. } => (count, bytes),
            RawAction::Target(_) => (0, &[][..]),
        };
        let mut reader = Reader { bytes };
        (0..count).map_while(move |_| Some((reader.u16().ok()?, reader.target().ok()?)))
    }

    fn check(&self) -> Result<(), RulesError> {
        match self {
            RawAction::Target(target) => check_target(target),
            RawAction::Split { count, total, .. } => {
                if *count == 0 {
                    return Err(RulesError::Count);
                }
                for (_, target) in self.variants() {
                    check_target(&target)?;
                }
                (*total > 0).then_some(()).ok_or(RulesError::Value)
            }
        }
    }
}

fn check_target(target: &TargetRef<'_>) -> Result<(), RulesError> {
    let valid = is_redirect_status(u64::from(target.status)) && is_valid_target(target.url);
    valid.then_some(()).ok_or(RulesError::Value)
}

impl TargetRef<'_> {
    fn to_target(self) -> Target {
        Target {
            url: self.url.into(),
            status: self.status,
            forward_query: self.forward_query,
        }
    }
}

/// Reads the grammar's parts: `take` and the integers check only that the bytes are there, and
/// `condition`, `action` and `target` only the structure ([`check`] checks values).
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    // The integer readers are inlined into `condition` and `action`, which a click runs a few
    // dozen times: a call each would cost more than the read.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], RulesError> {
        let (taken, rest) = self.bytes.split_at_checked(n).ok_or(RulesError::Length)?;
        self.bytes = rest;
        Ok(taken)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], RulesError> {
        let (taken, rest) = self.bytes.split_first_chunk().ok_or(RulesError::Length)?;
        self.bytes = rest;
        Ok(*taken)
    }

    #[inline]
    pub(super) fn u8(&mut self) -> Result<u8, RulesError> {
        Ok(self.array::<1>()?[0])
    }

    #[inline]
    fn u16(&mut self) -> Result<u16, RulesError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, RulesError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn flag(&mut self) -> Result<bool, RulesError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(RulesError::Value),
        }
    }

    fn count(&mut self, max: usize) -> Result<usize, RulesError> {
        let n = usize::from(self.u8()?);
        if n > max {
            return Err(RulesError::Count);
        }
        Ok(n)
    }

    /// One condition's structure: its tag, lengths and counts.
    pub(super) fn condition(&mut self) -> Result<RawCondition<'a>, RulesError> {
        Ok(match self.u8()? {
            b'd' => RawCondition::Device(self.u8()?),
            b'l' => {
                let count = self.values()?;
                let start = self.bytes;
                for _ in 0..count {
                    let len = self.u8()?;
                    self.take(usize::from(len))?;
                }
                RawCondition::Language {
                    count,
                    bytes: &start[..start.len() - self.bytes.len()],
                }
            }
            b'c' => {
                let count = self.values()?;
                RawCondition::Country(self.take(2 * count)?)
            }
            b'q' => {
                let len = self.u8()?;
                let name = self.take(usize::from(len))?;
                let value = if self.flag()? {
                    let len = self.u16()?;
                    Some(self.take(usize::from(len))?)
                } else {
                    None
                };
                RawCondition::Query { name, value }
            }
            b'i' => {
                let count = self.values()?;
                let start = self.bytes;
                for _ in 0..count {
                    let family = self.u8()?;
                    self.u8()?;
                    match family {
                        4 => self.take(4)?,
                        6 => self.take(16)?,
                        _ => return Err(RulesError::Value),
                    };
                }
                RawCondition::Ip {
                    count,
                    bytes: &start[..start.len() - self.bytes.len()],
                }
            }
            b'a' => RawCondition::After(self.u64()?),
            b'b' => RawCondition::Before(self.u64()?),
            b'w' => {
                let days = self.u8()?;
                let hours = self.take(3)?;
                let hours = u32::from_be_bytes([0, hours[0], hours[1], hours[2]]);
                let len = self.u8()?;
                let zone = self.take(usize::from(len))?;
                RawCondition::Weekly { days, hours, zone }
            }
            _ => return Err(RulesError::Tag),
        })
    }

    pub(super) fn action(&mut self) -> Result<RawAction<'a>, RulesError> {
        Ok(match self.u8()? {
            b't' => RawAction::Target(self.target()?),
            b's' => {
                let sticky = Sticky::from_byte(self.u8()?).ok_or(RulesError::Value)?;
                let count = self.count(MAX_VARIANTS)?;
                let start = self.bytes;
                let mut total = 0;
                for _ in 0..count {
                    total += u32::from(self.u16()?);
                    self.target()?;
                }
                RawAction::Split {
                    sticky,
                    count,
                    total,
                    bytes: &start[..start.len() - self.bytes.len()],
                }
            }
            _ => return Err(RulesError::Tag),
        })
    }

    fn target(&mut self) -> Result<TargetRef<'a>, RulesError> {
        let status = self.u16()?;
        let flags = self.u8()?;
        let len = self.u16()?;
        Ok(TargetRef {
            url: self.take(usize::from(len))?,
            status,
            forward_query: flags & FLAG_FORWARD_QUERY != 0,
        })
    }

    /// One range of an `Ip` condition; `Value` when its prefix does not fit.
    fn range(&mut self) -> Result<Cidr, RulesError> {
        let family = self.u8()?;
        let prefix = self.u8()?;
        let addr = match family {
            4 => IpAddr::V4(Ipv4Addr::from(self.array::<4>()?)),
            6 => IpAddr::V6(Ipv6Addr::from(self.array::<16>()?)),
            _ => return Err(RulesError::Value),
        };
        Cidr::new(addr, prefix).ok_or(RulesError::Value)
    }

    /// A condition's list: one value at least, [`MAX_VALUES`] at most.
    fn values(&mut self) -> Result<usize, RulesError> {
        match self.count(MAX_VALUES)? {
            0 => Err(RulesError::Count),
            n => Ok(n),
        }
    }
}

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
//! action    = 't' target | 's' sticky:u8 n:u8 (weight:u16 target)*
//! target    = status:u16 flags:u8 len:u16 url      flags bit 1: forward the query
//! ```
//! Integers are big-endian.

use super::{
    Action, Cidr, Condition, Device, Rule, Target, Variant, Weekly, MAX_CONDITIONS, MAX_RULES,
    MAX_VALUES, MAX_VARIANTS,
};
use crate::record::is_valid_target;
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
                out.extend([b's', u8::from(*sticky), variants.len() as u8]);
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

/// The rules in `bytes`, all of them checked.
pub fn decode(bytes: &[u8]) -> Result<Box<[Rule]>, RulesError> {
    let mut reader = Reader { bytes };
    let count = reader.count(MAX_RULES)?;
    let mut rules = Vec::with_capacity(count);
    for _ in 0..count {
        let conditions = reader.count(MAX_CONDITIONS)?;
        let conditions = (0..conditions)
            .map(|_| decode_condition(&mut reader))
            .collect::<Result<Box<[_]>, _>>()?;
        let action = match reader.u8()? {
            b't' => Action::Target(decode_target(&mut reader)?),
            b's' => {
                let sticky = reader.flag()?;
                let n = reader.count(MAX_VARIANTS)?;
                if n == 0 {
                    return Err(RulesError::Count);
                }
                let variants = (0..n)
                    .map(|_| {
                        Ok(Variant {
                            weight: reader.u16()?,
                            target: decode_target(&mut reader)?,
                        })
                    })
                    .collect::<Result<Box<[_]>, RulesError>>()?;
                if variants.iter().all(|variant| variant.weight == 0) {
                    return Err(RulesError::Value);
                }
                Action::Split { variants, sticky }
            }
            _ => return Err(RulesError::Tag),
        };
        rules.push(Rule { conditions, action });
    }
    if !reader.bytes.is_empty() {
        return Err(RulesError::Length);
    }
    Ok(rules.into_boxed_slice())
}

fn decode_condition(reader: &mut Reader<'_>) -> Result<Condition, RulesError> {
    Ok(match reader.u8()? {
        b'd' => {
            let mask = reader.u8()?;
            let known = Device::ALL
                .iter()
                .fold(0, |mask, device| mask | device.bit());
            if mask == 0 || mask & !known != 0 {
                return Err(RulesError::Value);
            }
            Condition::Device(mask)
        }
        b'l' => {
            let n = reader.values()?;
            let tags = (0..n)
                .map(|_| {
                    let len = reader.u8()?;
                    let tag = reader.take(usize::from(len))?;
                    let valid = !tag.is_empty()
                        && tag
                            .iter()
                            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                    valid.then(|| tag.into()).ok_or(RulesError::Value)
                })
                .collect::<Result<Box<[_]>, _>>()?;
            Condition::Language(tags)
        }
        b'c' => {
            let n = reader.values()?;
            let codes = (0..n)
                .map(|_| {
                    let code: [u8; 2] = reader.take(2)?.try_into().expect("two bytes");
                    code.iter()
                        .all(u8::is_ascii_uppercase)
                        .then_some(code)
                        .ok_or(RulesError::Value)
                })
                .collect::<Result<Box<[_]>, _>>()?;
            Condition::Country(codes)
        }
        b'q' => {
            let len = reader.u8()?;
            let name = reader.take(usize::from(len))?;
            if name.is_empty() {
                return Err(RulesError::Value);
            }
            let value = if reader.flag()? {
                let len = reader.u16()?;
                Some(reader.take(usize::from(len))?.into())
            } else {
                None
            };
            Condition::Query {
                name: name.into(),
                value,
            }
        }
        b'i' => {
            let n = reader.values()?;
            let ranges = (0..n)
                .map(|_| {
                    let family = reader.u8()?;
                    let prefix = reader.u8()?;
                    let addr = match family {
                        4 => IpAddr::V4(Ipv4Addr::from(
                            <[u8; 4]>::try_from(reader.take(4)?).expect("four bytes"),
                        )),
                        6 => IpAddr::V6(Ipv6Addr::from(
                            <[u8; 16]>::try_from(reader.take(16)?).expect("sixteen bytes"),
                        )),
                        _ => return Err(RulesError::Value),
                    };
                    Cidr::new(addr, prefix).ok_or(RulesError::Value)
                })
                .collect::<Result<Box<[_]>, _>>()?;
            Condition::Ip(ranges)
        }
        b'a' => Condition::After(reader.u64()?),
        b'b' => Condition::Before(reader.u64()?),
        b'w' => {
            let days = reader.u8()?;
            let hours = reader.take(3)?;
            let hours = u32::from_be_bytes([0, hours[0], hours[1], hours[2]]);
            let len = reader.u8()?;
            let zone = std::str::from_utf8(reader.take(usize::from(len))?)
                .ok()
                .and_then(Weekly::zone_named)
                .ok_or(RulesError::Value)?;
            if days == 0 || days & !Weekly::ALL_DAYS != 0 || hours == 0 {
                return Err(RulesError::Value);
            }
            Condition::Weekly(Weekly { days, hours, zone })
        }
        _ => return Err(RulesError::Tag),
    })
}

fn decode_target(reader: &mut Reader<'_>) -> Result<Target, RulesError> {
    let status = reader.u16()?;
    let flags = reader.u8()?;
    let len = reader.u16()?;
    let url = reader.take(usize::from(len))?;
    if !matches!(status, 301 | 302 | 307 | 308) || !is_valid_target(url) {
        return Err(RulesError::Value);
    }
    Ok(Target {
        url: url.into(),
        status,
        forward_query: flags & FLAG_FORWARD_QUERY != 0,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RulesError> {
        if self.bytes.len() < n {
            return Err(RulesError::Length);
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, RulesError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, RulesError> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("two bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, RulesError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("eight bytes"),
        ))
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

    /// A condition's list: one value at least, [`MAX_VALUES`] at most.
    fn values(&mut self) -> Result<usize, RulesError> {
        match self.count(MAX_VALUES)? {
            0 => Err(RulesError::Count),
            n => Ok(n),
        }
    }
}

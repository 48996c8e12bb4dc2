//! Evaluating a link's rules against one click, in place on their encoded bytes.

use super::codec::{self, RawAction, RawCondition};
use super::{device, language, query, Device, RuleSet, TargetRef, Weekly};
use std::net::IpAddr;

/// What a rule evaluation reads of a click.
#[derive(Debug, Clone, Copy)]
pub struct Click<'a> {
    pub now_unix: u64,
    pub user_agent: &'a [u8],
    pub accept_language: &'a [u8],
    /// The raw query string, without the `?`.
    pub query: &'a [u8],
    /// The client address as nginx's realip settings give it.
    pub client: Option<IpAddr>,
    /// A stable number per visitor ([`visitor`]), for sticky splits.
    pub visitor: u64,
    /// The link's recipient number ([`recipient`]), set from the record for a link with a `ref`.
    pub recipient: Option<u64>,
    /// The request's `Cookie` header holding the visitor cookie ([`COOKIE`]), or empty; read
    /// only by a split sticky by cookie.
    pub cookies: &'a [u8],
    /// A fresh random number, for splits per click.
    pub random: u64,
}

/// The answer of a rule, with which rule and variant gave it (recorded on the visit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice<'a> {
    /// Index of the rule in the link's list.
    pub rule: u8,
    /// Index of the variant, for a split.
    pub variant: Option<u8>,
    pub target: TargetRef<'a>,
}

/// The first rule of `rules` whose conditions all hold for `click`, or `None` (the link's own
/// target answers). `country` looks the client's country up; it is called at most once.
pub fn choose<'r>(
    rules: &'r RuleSet,
    click: &Click<'_>,
    country: impl FnOnce(IpAddr) -> Option<[u8; 2]>,
) -> Option<Choice<'r>> {
    let mut country = Lazy::new(country);
    let mut device = None;
    // The bytes were checked when the set was made (a read cannot fail), and the set knows
    // where each rule's action starts and ends: a rule's conditions are read while they hold,
    // its action only when they all do.
    let bytes = rules.as_bytes();
    let mut start = 1;
    for (index, (action_at, end)) in rules.spans().enumerate() {
        let mut conditions = codec::Reader::new(bytes.get(start..action_at)?);
        let count = conditions.u8().ok()?;
        let holds = (0..count).all(|_| {
            conditions.condition().is_ok_and(|condition| {
                condition_holds(&condition, click, &mut device, &mut country)
            })
        });
        if holds {
            let action = codec::Reader::new(bytes.get(action_at..end)?)
                .action()
                .ok()?;
            let (variant, target) = act(&action, click, index)?;
            return Some(Choice {
                rule: index as u8,
                variant,
                target,
            });
        }
        start = end;
    }
    None
}

fn condition_holds<F: FnOnce(IpAddr) -> Option<[u8; 2]>>(
    condition: &RawCondition<'_>,
    click: &Click<'_>,
    device: &mut Option<Device>,
    country: &mut Lazy<F>,
) -> bool {
    match *condition {
        RawCondition::Device(mask) => {
            let class = *device.get_or_insert_with(|| device::classify(click.user_agent));
            mask & class.bit() != 0
        }
        RawCondition::Language { count, bytes } => language::preferred_matches(
            click.accept_language,
            RawCondition::languages(count, bytes),
        ),
        RawCondition::Country(codes) => click
            .client
            .and_then(|ip| country.get(ip))
            .is_some_and(|found| codes.chunks_exact(2).any(|code| code == found)),
        RawCondition::Query { name, value } => query::has(click.query, name, value),
        RawCondition::Ip { count, bytes } => click
            .client
            .is_some_and(|ip| RawCondition::ranges(count, bytes).any(|range| range.contains(ip))),
        RawCondition::After(at) => click.now_unix >= at,
        RawCondition::Before(at) => click.now_unix < at,
        RawCondition::Weekly { days, hours, zone } => codec::weekly_zone(zone)
            .is_some_and(|zone| Weekly { days, hours, zone }.contains(click.now_unix)),
    }
}

fn act<'r>(
    action: &RawAction<'r>,
    click: &Click<'_>,
    rule: usize,
) -> Option<(Option<u8>, TargetRef<'r>)> {
    match *action {
        RawAction::Target(target) => Some((None, target)),
        RawAction::Split { sticky, total, .. } => {
            // Sticky: the same visitor lands on the same variant of the same rule; mixing the rule
            // in keeps two splits of one link independent.
            let draw = match sticky.visitor(click) {
                Some(visitor) => mix(visitor ^ (rule as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                None => click.random,
            };
            let (index, target) = pick(action.variants(), u64::from(total), draw)?;
            Some((Some(index as u8), target))
        }
    }
}

/// The variant `draw` falls on, by weight, among variants weighing `total` (positive: checked).
fn pick<'r>(
    variants: impl Iterator<Item = (u16, TargetRef<'r>)>,
    total: u64,
    draw: u64,
) -> Option<(usize, TargetRef<'r>)> {
    // Multiply-shift maps the draw onto [0, total) without the bias of a modulo.
    let mut point = ((u128::from(draw) * u128::from(total)) >> 64) as u64;
    let mut last = None;
    for (index, (weight, target)) in variants.enumerate() {
        let weight = u64::from(weight);
        if point < weight {
            return Some((index, target));
        }
        point -= weight;
        last = Some((index, target));
    }
    last
}

/// The visitor number of sticky splits: the client address as text (as nginx's realip gives
/// it) and the `User-Agent`. The module and the sidecar's fallback both compute it here, so a
/// phone gets the same variant from either. Stable across builds, machines and restarts (a seeded
/// hasher would reshuffle visitors at every reload): eight bytes at a time, little-endian, each
/// part closed by its length (so `ab`+`c` and `a`+`bc` differ); [`mix`] spreads it before use.
/// It runs on every click of a sticky split, over a hundred bytes or so of agent.
pub fn visitor(client: &[u8], user_agent: &[u8]) -> u64 {
    absorb(absorb(0xcbf2_9ce4_8422_2325, client), user_agent)
}

pub(super) fn absorb(mut hash: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let step = |hash: u64, word: u64| (hash ^ word).wrapping_mul(K).rotate_left(29);
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = step(hash, u64::from_le_bytes(word));
    }
    let mut last = [0; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    hash = step(hash, u64::from_le_bytes(last));
    step(hash, bytes.len() as u64)
}

/// SplitMix64's finaliser: spreads a visitor hash whose low bits may be poor over all 64.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The country lookup, done on first need and remembered for the other rules of the click.
struct Lazy<F> {
    lookup: Option<F>,
    found: Option<[u8; 2]>,
}

impl<F: FnOnce(IpAddr) -> Option<[u8; 2]>> Lazy<F> {
    fn new(lookup: F) -> Self {
        Lazy {
            lookup: Some(lookup),
            found: None,
        }
    }

    fn get(&mut self, ip: IpAddr) -> Option<[u8; 2]> {
        if let Some(lookup) = self.lookup.take() {
            self.found = lookup(ip);
        }
        self.found
    }
}

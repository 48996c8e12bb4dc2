//! Choosing the cheapest encoding of a text and cutting it into segments.
//!
//! [`measure`] answers the numbers (encoding, units, segments) without allocating; [`analyze`]
//! adds what a person composing the campaign wants to see: where the parts break, which
//! characters forced UCS-2, and which look-alikes were replaced.

use crate::gsm::{self, Language, TableMask};
use crate::lookalike;
use std::fmt;

/// Octets of user data in one SMS (TS 23.040 §9.2.3.24: TP-UD is at most 140 octets).
pub const USER_DATA_OCTETS: usize = 140;
/// Octets the UDH takes in every part of a concatenated message: UDHL (1) + the concatenation
/// IE with an 8-bit reference (IEI 0x00, length 3, reference, total, sequence: 5).
pub const CONCAT_UDH_OCTETS: usize = 6;
/// Octets of one national language shift IE (IEI 0x24 single shift or 0x25 locking shift,
/// length 1, language identifier: TS 23.040 §9.2.3.24.15/16).
pub const NATIONAL_IE_OCTETS: usize = 3;

/// A set of national languages, e.g. the tables a gateway supports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LanguageSet(TableMask);

impl LanguageSet {
    pub const EMPTY: LanguageSet = LanguageSet(0);

    pub fn with(self, language: Language) -> LanguageSet {
        LanguageSet(self.0 | 1 << language.id())
    }

    pub fn contains(self, language: Language) -> bool {
        self.0 & 1 << language.id() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Language> {
        Language::ALL.into_iter().filter(move |&l| self.contains(l))
    }
}

impl FromIterator<Language> for LanguageSet {
    fn from_iter<I: IntoIterator<Item = Language>>(iter: I) -> Self {
        iter.into_iter().fold(LanguageSet::EMPTY, LanguageSet::with)
    }
}

/// What the analysis may use besides the default alphabet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Replace look-alike characters ([`crate::lookalike`]) when that makes the message cheaper:
    /// fewer segments, or the same number in GSM-7 instead of UCS-2, or fewer national IEs. All
    /// look-alikes are replaced or none.
    pub replace_lookalikes: bool,
    /// National locking-shift tables the gateway supports (languages without one are ignored).
    pub locking_shift: LanguageSet,
    /// National single-shift tables the gateway supports.
    pub single_shift: LanguageSet,
}

impl Options {
    /// Both shift tables of each language (where the standard defines them).
    pub fn with_language(mut self, language: Language) -> Options {
        self.single_shift = self.single_shift.with(language);
        if language.has_locking_shift() {
            self.locking_shift = self.locking_shift.with(language);
        }
        self
    }
}

/// The data coding of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The GSM 7-bit alphabet: the default one unless a national locking-shift table is named,
    /// with the default extension table unless a national single-shift table is named.
    Gsm7 {
        locking: Option<Language>,
        single: Option<Language>,
    },
    /// UCS-2 (in practice UTF-16: characters beyond the BMP take a surrogate pair).
    Ucs2,
}

impl Encoding {
    /// The default alphabet with the default extension table.
    pub const GSM7: Encoding = Encoding::Gsm7 {
        locking: None,
        single: None,
    };

    /// National language IEs every part carries (0, 1 or 2).
    pub fn national_ies(self) -> usize {
        match self {
            Encoding::Gsm7 { locking, single } => {
                usize::from(locking.is_some()) + usize::from(single.is_some())
            }
            Encoding::Ucs2 => 0,
        }
    }

    /// Units (septets or UTF-16 code units) that fit in one SMS: alone, and as a part of a
    /// concatenated message.
    pub fn capacity(self) -> Capacity {
        let national = self.national_ies() * NATIONAL_IE_OCTETS;
        // A UDH, when present, starts with its length octet (UDHL).
        let udh_alone = if national == 0 { 0 } else { 1 + national };
        let udh_part = CONCAT_UDH_OCTETS + national;
        match self {
            // Septets start on a septet boundary after the UDH (fill bits, TS 23.040
            // §9.2.3.24), so the header costs ceil(octets * 8 / 7) septets.
            Encoding::Gsm7 { .. } => {
                let septets = USER_DATA_OCTETS * 8 / 7;
                Capacity {
                    alone: septets - (udh_alone * 8).div_ceil(7),
                    part: septets - (udh_part * 8).div_ceil(7),
                }
            }
            Encoding::Ucs2 => Capacity {
                alone: (USER_DATA_OCTETS - udh_alone) / 2,
                part: (USER_DATA_OCTETS - udh_part) / 2,
            },
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encoding::Gsm7 {
                locking: None,
                single: None,
            } => f.write_str("GSM-7"),
            Encoding::Gsm7 { locking, single } => {
                f.write_str("GSM-7")?;
                if let Some(l) = locking {
                    write!(f, " locking:{}", l.name())?;
                }
                if let Some(l) = single {
                    write!(f, " single:{}", l.name())?;
                }
                Ok(())
            }
            Encoding::Ucs2 => f.write_str("UCS-2"),
        }
    }
}

/// Units per SMS for an encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// In a message sent as one SMS (no concatenation IE).
    pub alone: usize,
    /// In each part of a concatenated message.
    pub part: usize,
}

/// The numbers for one text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    pub encoding: Encoding,
    /// Unicode scalar values of the text sent.
    pub chars: usize,
    /// Septets (GSM-7, escapes included) or UTF-16 code units (UCS-2), UDH excluded.
    pub units: usize,
    pub segments: usize,
    /// Look-alikes were replaced (only when that saved segments).
    pub replaced: bool,
}

impl Measure {
    /// What the choice between texts and encodings minimises: segments, then UCS-2 over GSM-7
    /// (GSM-7 leaves more room and every handset reads it), then national IEs, then units.
    fn cost(&self) -> (usize, bool, usize, usize) {
        (
            self.segments,
            self.encoding == Encoding::Ucs2,
            self.encoding.national_ies(),
            self.units,
        )
    }
}

/// One part of the message as it will be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Byte range in [`Analysis::text`].
    pub start: usize,
    pub end: usize,
    /// Septets or UTF-16 code units in this part.
    pub units: usize,
}

/// A character that no allowed GSM table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forced {
    pub ch: char,
    /// Index of the character (in Unicode scalar values, from 0) in the text.
    pub position: usize,
}

/// A look-alike that was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// Index of the character (in Unicode scalar values, from 0) in the original text.
    pub position: usize,
    pub from: char,
    pub to: &'static str,
}

/// Everything about one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    pub measure: Measure,
    /// The text as it will be sent: the input, or the input with look-alikes replaced.
    pub text: String,
    pub parts: Vec<Part>,
    /// Why the message is UCS-2: the characters outside every allowed GSM table (empty for
    /// GSM-7). When each character is in some allowed table but no one pair of tables holds
    /// them all, these are the characters outside the default alphabet.
    pub forced_ucs2: Vec<Forced>,
    pub replacements: Vec<Replacement>,
}

/// The numbers for `text`, without allocating.
pub fn measure(text: &str, options: &Options) -> Measure {
    let plain = measure_chars(text.chars(), options);
    if !options.replace_lookalikes || !text.chars().any(|c| lookalike::replacement(c).is_some()) {
        return plain;
    }
    let replaced = measure_chars(replaced_chars(text), options);
    if replaced.cost() < plain.cost() {
        Measure {
            replaced: true,
            ..replaced
        }
    } else {
        plain
    }
}

/// The numbers plus the parts, the reasons for UCS-2 and the replacements.
pub fn analyze(text: &str, options: &Options) -> Analysis {
    let measure = measure(text, options);
    let (text, replacements) = if measure.replaced {
        let mut out = String::with_capacity(text.len());
        let mut replacements = Vec::new();
        for (position, c) in text.chars().enumerate() {
            match lookalike::replacement(c) {
                Some(to) => {
                    out.push_str(to);
                    replacements.push(Replacement {
                        position,
                        from: c,
                        to,
                    });
                }
                None => out.push(c),
            }
        }
        (out, replacements)
    } else {
        (text.to_owned(), Vec::new())
    };
    let parts = split(&text, measure.encoding);
    debug_assert_eq!(parts.len(), measure.segments);
    let forced_ucs2 = if measure.encoding == Encoding::Ucs2 {
        forced(&text, options)
    } else {
        Vec::new()
    };
    Analysis {
        measure,
        text,
        parts,
        forced_ucs2,
        replacements,
    }
}

/// The text with every look-alike replaced, as characters.
fn replaced_chars(text: &str) -> impl Iterator<Item = char> + Clone + '_ {
    text.chars().flat_map(|c| {
        let (one, many) = match lookalike::replacement(c) {
            Some(r) => (None, r),
            None => (Some(c), ""),
        };
        one.into_iter().chain(many.chars())
    })
}

/// A candidate pair of tables: bit masks of the locking-shift and single-shift table.
#[derive(Clone, Copy)]
struct Candidate {
    encoding: Encoding,
    locking: TableMask,
    single: TableMask,
}

/// Most candidates there can be: (1 + languages with a locking table) x (1 + languages).
const MAX_CANDIDATES: usize = (1 + Language::ALL.len()) * (1 + Language::ALL.len());

fn candidates(options: &Options) -> ([Option<Candidate>; MAX_CANDIDATES], usize) {
    let mut out = [None; MAX_CANDIDATES];
    let mut n = 0;
    let lockings = std::iter::once(None).chain(
        options
            .locking_shift
            .iter()
            .filter(|l| l.has_locking_shift())
            .map(Some),
    );
    // The choice minimises `Measure::cost` (segments, then IEs, then septets); a complete tie
    // goes to the first pair in this order (lower language identifiers first).
    let mask = |l: Option<Language>| l.map_or(1, |l| 1 << l.id());
    for locking in lockings {
        for single in std::iter::once(None).chain(options.single_shift.iter().map(Some)) {
            out[n] = Some(Candidate {
                encoding: Encoding::Gsm7 { locking, single },
                locking: mask(locking),
                single: mask(single),
            });
            n += 1;
        }
    }
    (out, n)
}

/// Septets of `c` with the given tables, or `None` if neither holds it.
#[inline]
fn septets(membership: gsm::Membership, locking: TableMask, single: TableMask) -> Option<usize> {
    if membership.locking & locking != 0 {
        Some(1)
    } else if membership.single & single != 0 {
        Some(2)
    } else {
        None
    }
}

fn measure_chars<I: Iterator<Item = char> + Clone>(chars: I, options: &Options) -> Measure {
    let (candidates, n) = if options.locking_shift.is_empty() && options.single_shift.is_empty() {
        // The common case: no national tables, no candidate list to build.
        let mut only = [None; MAX_CANDIDATES];
        only[0] = Some(Candidate {
            encoding: Encoding::GSM7,
            locking: 1,
            single: 1,
        });
        (only, 1)
    } else {
        candidates(options)
    };
    let mut totals = [Some(0usize); MAX_CANDIDATES];
    let mut count = 0;
    let mut utf16 = 0;
    for c in chars.clone() {
        count += 1;
        utf16 += c.len_utf16();
        let m = gsm::lookup(c);
        for (total, candidate) in totals[..n].iter_mut().zip(&candidates[..n]) {
            let candidate = candidate.as_ref().expect("filled up to n");
            if let Some(t) = total {
                match septets(m, candidate.locking, candidate.single) {
                    Some(s) => *t += s,
                    None => *total = None,
                }
            }
        }
    }
    let mut best: Option<Measure> = None;
    for (total, candidate) in totals[..n].iter().zip(&candidates[..n]) {
        let (Some(units), Some(candidate)) = (total, candidate) else {
            continue;
        };
        let capacity = candidate.encoding.capacity();
        let segments = if *units <= capacity.alone {
            1
        } else {
            count_parts(
                chars.clone().map(|c| {
                    septets(gsm::lookup(c), candidate.locking, candidate.single).expect("feasible")
                }),
                capacity.part,
            )
        };
        let this = Measure {
            encoding: candidate.encoding,
            chars: count,
            units: *units,
            segments,
            replaced: false,
        };
        if best.is_none_or(|b| this.cost() < b.cost()) {
            best = Some(this);
        }
    }
    best.unwrap_or_else(|| {
        let capacity = Encoding::Ucs2.capacity();
        let segments = if utf16 <= capacity.alone {
            1
        } else {
            count_parts(chars.map(char::len_utf16), capacity.part)
        };
        Measure {
            encoding: Encoding::Ucs2,
            chars: count,
            units: utf16,
            segments,
            replaced: false,
        }
    })
}

/// Parts of a concatenated message: each character (one GSM septet, an escape and its septet,
/// one UTF-16 unit or a surrogate pair) goes whole into the current part or starts the next.
fn count_parts(widths: impl Iterator<Item = usize>, capacity: usize) -> usize {
    let mut parts = 1;
    let mut used = 0;
    for w in widths {
        if used + w > capacity {
            parts += 1;
            used = 0;
        }
        used += w;
    }
    parts
}

/// The width of `c` in `encoding` (the encoding is known to hold it).
#[inline]
fn width(c: char, encoding: Encoding) -> usize {
    match encoding {
        Encoding::Ucs2 => c.len_utf16(),
        Encoding::Gsm7 { locking, single } => {
            let mask = |l: Option<Language>| l.map_or(1, |l| 1 << l.id());
            septets(gsm::lookup(c), mask(locking), mask(single)).expect("encoding holds the text")
        }
    }
}

/// The parts of `text` in `encoding`, as byte ranges.
pub fn split(text: &str, encoding: Encoding) -> Vec<Part> {
    let capacity = encoding.capacity();
    let total: usize = text.chars().map(|c| width(c, encoding)).sum();
    if total <= capacity.alone {
        return vec![Part {
            start: 0,
            end: text.len(),
            units: total,
        }];
    }
    let mut parts = Vec::with_capacity(total.div_ceil(capacity.part.saturating_sub(1)));
    let mut current = Part {
        start: 0,
        end: 0,
        units: 0,
    };
    for (i, c) in text.char_indices() {
        let w = width(c, encoding);
        if current.units + w > capacity.part {
            parts.push(current);
            current = Part {
                start: i,
                end: i,
                units: 0,
            };
        }
        current.units += w;
        current.end = i + c.len_utf8();
    }
    parts.push(current);
    parts
}

fn forced(text: &str, options: &Options) -> Vec<Forced> {
    let allowed_locking = 1 | options.locking_shift.0;
    let allowed_single = 1 | options.single_shift.0;
    let outside = |mask_l: TableMask, mask_s: TableMask| {
        text.chars()
            .enumerate()
            .filter(|&(_, c)| {
                let m = gsm::lookup(c);
                m.locking & mask_l == 0 && m.single & mask_s == 0
            })
            .map(|(position, ch)| Forced { ch, position })
            .collect::<Vec<_>>()
    };
    let found = outside(allowed_locking, allowed_single);
    if found.is_empty() {
        outside(1, 1)
    } else {
        found
    }
}

#[cfg(test)]
mod tests;

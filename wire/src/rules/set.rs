//! [`RuleSet`]: what a reader keeps of a link's rules.

use super::codec::{self, RulesError};
use super::Rule;

/// A link's rules in their encoded form, checked, with where each rule's action starts and the
/// rule ends (so an evaluation skips a rule whose conditions fail without reading its action):
/// what a reader keeps and evaluates ([`super::choose`]), in one allocation. Empty for a link
/// without rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    /// The encoding, then per rule two native-endian `u32`s: its action's offset and its end.
    data: Box<[u8]>,
    /// The encoding's length: where the spans begin.
    encoded: usize,
}

const SPAN: usize = 8;

impl RuleSet {
    /// The rules encoded in `bytes`, with every check [`codec::decode`] makes (in the same pass
    /// that finds the spans: this runs at every cache fill of a rule link).
    pub fn new(bytes: &[u8]) -> Result<RuleSet, RulesError> {
        let mut checked = Ok(());
        let set = RuleSet::with_spans(bytes, |push| checked = codec::check_spans(bytes, push));
        checked.map(|()| set)
    }

    /// `rules`, encoded. Rules over the limits encode, and then fail [`RuleSet::new`] (the
    /// record's decoder): the API checks the limits first, with errors a user can act on.
    pub fn encode(rules: &[Rule]) -> RuleSet {
        let mut bytes = Vec::new();
        codec::encode(rules, &mut bytes);
        RuleSet::with_spans(&bytes, |push| {
            for (action_at, end) in codec::spans(&bytes) {
                push(action_at, end);
            }
        })
    }

    /// `bytes` and the spans `find` gives its callback, in one allocation.
    fn with_spans(bytes: &[u8], find: impl FnOnce(&mut dyn FnMut(usize, usize))) -> RuleSet {
        let count = bytes.first().map_or(0, |&count| usize::from(count));
        let mut data = Vec::with_capacity(bytes.len() + SPAN * count);
        data.extend_from_slice(bytes);
        find(&mut |action_at, end| {
            // Records are far below 4 GiB (record::MAX_RECORD_BYTES).
            data.extend((action_at as u32).to_ne_bytes());
            data.extend((end as u32).to_ne_bytes());
        });
        if count == 0 {
            return RuleSet::default();
        }
        RuleSet {
            data: data.into_boxed_slice(),
            encoded: bytes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.data.first().map_or(0, |&count| usize::from(count))
    }

    /// The encoded form, as the record carries it.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data[..self.encoded]
    }

    /// Each rule's action offset and end, in [`RuleSet::as_bytes`].
    pub(super) fn spans(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.data[self.encoded..].chunks_exact(SPAN).map(|span| {
            let offset = |at: usize| {
                let mut word = [0; 4];
                word.copy_from_slice(&span[at..at + 4]);
                u32::from_ne_bytes(word) as usize
            };
            (offset(0), offset(4))
        })
    }

    /// The rules as values.
    pub fn to_rules(&self) -> Box<[Rule]> {
        if self.is_empty() {
            return Box::default();
        }
        // Checked when made: decoding cannot fail.
        codec::decode(self.as_bytes()).unwrap_or_default()
    }
}

impl From<Vec<Rule>> for RuleSet {
    fn from(rules: Vec<Rule>) -> RuleSet {
        RuleSet::encode(&rules)
    }
}

//! A link's preview card key (`sl:p:<code>`), written beside its record: the module reads the
//! card only when the record says the link has one (`Extras::has_card`), so the card follows the
//! record everywhere the record is written — with the record's expiry, and gone with it. On a
//! cluster the card key hashes to its own slot: every write is routed by its own key.

use super::{RecordWorkspace, RecordWrite};
use shortlink_model::link::card;
use shortlink_model::{Link, LinkExtras};
pub use shortlink_wire::keys::preview_key;
use shortlink_wire::keys::visit_count_key;

/// The encoded card of a stored link, if it has one that reads back. A stored card that no
/// longer parses (a hand-edited row) is logged and left out: the link then has no card, as
/// `has_card` also says.
pub fn card_value(code: &str, extras: &LinkExtras) -> Option<Vec<u8>> {
    match card::parse_stored(extras.preview.as_deref()?) {
        Ok(spec) => Some(spec.encode()),
        Err(error) => {
            tracing::error!(%code, %error, "stored card is not JSON; left out");
            None
        }
    }
}

/// Whether the record of a link with these extras says it has a card.
pub(super) fn has_card(extras: &LinkExtras) -> bool {
    extras
        .preview
        .as_deref()
        .is_some_and(|text| card::parse_stored(text).is_ok())
}

impl RecordWrite {
    /// The write of `link`'s card key that goes with `record`, the write of its record: the card
    /// with the record's expiry while the record is written and says it has one, else the key's
    /// removal (no card, revoked, or the record itself removed).
    pub fn card_for(link: &Link, record: &RecordWrite) -> RecordWrite {
        let key = preview_key(&link.code);
        let value = match link.revoked_at {
            Some(_) => None,
            None => card_value(&link.code, &link.extras),
        };
        match (record, value) {
            (RecordWrite::Set { .. }, Some(value)) => RecordWrite::Set { key, value },
            (RecordWrite::SetUntil { at, .. }, Some(value)) => RecordWrite::SetUntil {
                key,
                value,
                at: *at,
            },
            _ => RecordWrite::Delete { key },
        }
    }

    /// The card write of a link just created: only for a link with a card (a new code has no
    /// card to remove).
    pub fn new_card(link: &Link, record: &RecordWrite) -> Option<RecordWrite> {
        link.extras
            .preview
            .is_some()
            .then(|| Self::card_for(link, record))
            .filter(|write| !matches!(write, RecordWrite::Delete { .. }))
    }

    /// Everything Redis must hold for `link` at `now`: its record and its card key, and once
    /// the record goes for good (past its grace), no click counter either.
    pub fn for_link_and_card(
        link: &Link,
        workspace: RecordWorkspace,
        now: chrono::DateTime<chrono::Utc>,
        grace: std::time::Duration,
    ) -> Vec<RecordWrite> {
        let record = Self::for_link(link, workspace, now, grace);
        let card = Self::card_for(link, &record);
        let gone = matches!(record, RecordWrite::Delete { .. });
        let mut writes = vec![record, card];
        if gone && link.extras.max_visits.is_some() {
            writes.push(RecordWrite::Delete {
                key: visit_count_key(&link.code),
            });
        }
        writes
    }

    /// What [`Self::restore`] puts back, with the card key.
    pub fn restore_with_card(
        code: &str,
        previous: Option<&Link>,
        workspace: RecordWorkspace,
        now: chrono::DateTime<chrono::Utc>,
        grace: std::time::Duration,
    ) -> Vec<RecordWrite> {
        match previous {
            Some(link) => Self::for_link_and_card(link, workspace, now, grace),
            None => vec![
                Self::restore(code, None, workspace, now, grace),
                RecordWrite::Delete {
                    key: preview_key(code),
                },
            ],
        }
    }
}

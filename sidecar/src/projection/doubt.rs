//! Records in doubt: a write-through that failed may or may not have reached Redis, and with
//! Sentinel that matters after a failover. A reply lost with the connection, or a `WAIT` that came
//! short while the primary was dying, leaves a write on the old primary that its replicas may
//! still apply (a frozen replica reads what its socket buffered) and that the undo (a create's
//! delete, an update's previous record) may not have followed. The promoted replica would then
//! hold a refused change: an update SQL rolled back, a link SQL never committed.
//!
//! So with Sentinel or `--redis-wait-replicas` every key of a failed write-through is kept here,
//! with the value sent, until [`crate::service::LinkService::settle_in_doubt`] has written it again
//! from SQL (the marker's keeper calls it on every check).

use super::{written_value, Projection, ProjectionError, RecordWrite};

impl Projection {
    /// Notes the keys of `writes` when `result` is a failure (with Sentinel, a cluster or `WAIT` only: one
    /// Redis behaves as before).
    pub(super) fn doubt_if_failed<T>(
        &self,
        writes: &[RecordWrite],
        result: Result<T, ProjectionError>,
    ) -> Result<T, ProjectionError> {
        if result.is_err() && (self.primary.fails_over() || self.wait.is_some()) {
            let mut in_doubt = self.in_doubt.lock().unwrap_or_else(|e| e.into_inner());
            for write in writes {
                in_doubt.insert(
                    write.key().to_owned(),
                    written_value(write).map(<[u8]>::to_vec),
                );
            }
        }
        result
    }

    /// The keys in doubt, with the value each failed write sent (`None` for a delete).
    pub fn in_doubt(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let in_doubt = self.in_doubt.lock().unwrap_or_else(|e| e.into_inner());
        in_doubt
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `key` written again from SQL: no longer in doubt, unless a write that failed since sent
    /// another value.
    pub fn settled(&self, key: &str, sent: &Option<Vec<u8>>) {
        let mut in_doubt = self.in_doubt.lock().unwrap_or_else(|e| e.into_inner());
        if in_doubt.get(key) == Some(sent) {
            in_doubt.remove(key);
        }
    }
}

//! Publishing the sweeps hindsight noticed (`shortlink_wire::sweeps`): once the batch that
//! noticed them is stored, into Redis for the module's capped path, and into this process's copy
//! for the fallback ([`Consumer::noticed_sweeps`]), which answers capped clicks while Redis is
//! unreachable.

use super::{Consumer, NoticedSweeps};
use shortlink_wire::keys;
use shortlink_wire::sweeps::PUBLISH_SCRIPT;
use std::sync::Arc;

impl Consumer {
    /// This consumer's copy of the sweeps it noticed: the fallback of the same process reads it.
    pub fn noticed_sweeps(&self) -> NoticedSweeps {
        Arc::clone(&self.noticed)
    }

    /// This consumer, keeping the sweeps it notices in `noticed` (the fallback's copy).
    pub fn sharing_sweeps(mut self, noticed: NoticedSweeps) -> Self {
        self.noticed = noticed;
        self
    }

    /// Publishes the sweeps noticed since the last call. A failure is logged, never the batch's:
    /// its visits are stored and counted already, and the flags only spare further caps.
    pub(super) async fn publish_sweeps(&mut self) {
        let noticed = (self.writer.hindsight.lock())
            .unwrap_or_else(|e| e.into_inner())
            .take_noticed();
        if noticed.is_empty() {
            return;
        }
        (self.noticed.lock())
            .unwrap_or_else(|e| e.into_inner())
            .raise(&noticed);
        let now = chrono::Utc::now().timestamp_millis();
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PUBLISH_SCRIPT).arg(1).arg(keys::SWEEPS).arg(now);
        for (flag, until) in &noticed {
            cmd.arg(flag.field()).arg(until);
        }
        match self.query(&cmd).await {
            Ok(_) => tracing::info!(sweeps = noticed.len(), "sweeps noticed, caps spared"),
            Err(error) => tracing::warn!(%error, "sweeps noticed but not published"),
        }
    }
}

//! SMS messaging (issues 68 and 81, docs/DELIVERIES.md): a workspace's gateway made ready to
//! send ([`gateway::ready`]), compose's send jobs queued in SQL and handed to Kannel by whichever
//! sidecar holds their lease ([`gateway`]), every gateway's receipts read, checked and written
//! ([`receipts`]), and the secrets receipts are checked with: the send jobs' `dlr-url`
//! signatures ([`signed`]) and the gateways' sealed credentials ([`sealed`]).
//!
//! The HTTP API and the binary use it; it knows nothing of HTTP requests. Its jobs take
//! [`Messaging`], what they need, not the API's state.

mod error;
pub mod gateway;
pub mod receipts;
pub mod sealed;
pub mod signed;

use shortlink_core::outbound::Policy;
use shortlink_store::Storage;
use shortlink_visits::store::VisitStore;
use std::path::PathBuf;
use std::sync::Arc;

pub use error::{Error, Result};
pub use signed::{DlrKey, SignedMessage};

/// What messaging needs of the deployment, shared by the API's handlers and the send jobs.
pub struct Messaging {
    /// Gateways, send queues, callback tokens and receipts.
    pub store: Arc<dyn VisitStore>,
    /// Workspaces (a slug names a secrets directory), keys' standing and the audit log.
    pub storage: Arc<dyn Storage>,
    /// This sidecar's side of the send jobs: its lease owner name, the jobs to wake.
    pub sends: gateway::sends::Sends,
    /// What a gateway's and a callback base's addresses may be (`--gateway-allow-networks`).
    pub policy: Policy,
    /// `--gateway-secrets-dir`: `None` sends through no gateway.
    pub secrets_dir: Option<PathBuf>,
    /// Signs and checks a send job's `dlr-url`s.
    pub dlr_key: DlrKey,
    /// Seals the gateways' secrets kept in SQL.
    pub sealer: Arc<sealed::Sealer>,
}

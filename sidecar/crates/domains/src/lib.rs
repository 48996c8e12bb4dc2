//! The short domains as the sidecar sees them: the issuing list (nginx's configuration, sent per
//! request), which domain a new link is handed out on, and each domain's health.

#![deny(unsafe_code)]

pub(crate) mod certificate;
pub mod dns;
pub mod drain;
pub mod health;
pub mod health_job;
pub mod http1;
pub mod issuing;
pub mod receipt_drain;
mod receipt_links;
pub mod receipt_share;
mod receipt_watch;
pub mod receipts;
mod state;
mod traffic;
mod webhook;

pub use issuing::{DrainView, IssuingBase, IssuingBases, Pick, Spread, WorkspaceBases};

//! Delivery receipts (issue 68): what SMS gateways report of each message carrying a link, the
//! callback tokens their native callbacks authenticate with, and the campaign funnel built on
//! them (sent → delivered → clicked → converted).
//!
//! - [`model`]: states, gateways and the rule a message's current state follows (pure);
//! - [`store`]: `delivery_receipts` and `delivery_messages` on every backend, idempotent per
//!   workspace, gateway message id and state;
//! - [`tokens`]: `callback_tokens` (hashed, as API keys);
//! - [`funnel`]: a campaign's counts by current state, domain and carrier;
//! - [`gateway`]: compose's hand-off to a gateway (a workspace's gateway, the jobs that send,
//!   what the gateway answered per recipient);
//! - [`queue`]: the send jobs' queue (the messages waiting for their hand-off, the jobs' leases);
//! - [`states`]: the current state of some links' messages (the re-send list's reasons);
//! - [`rate`]: a campaign's delivered rate over time.
//!
//! No phone number is stored but a queued message's, until its hand-off is recorded ([`queue`]):
//! gateways' destinations are dropped before anything gets here.
//! docs/DELIVERIES.md is the user's side of it.

pub mod funnel;
pub mod gateway;
pub mod model;
pub mod queue;
pub mod rate;
pub mod states;
pub mod store;
pub mod tokens;

pub use funnel::{Funnel, FunnelCounts, FunnelStore};
pub use gateway::{GatewayConfig, GatewayStore, SendJob, SendOutcome, SendRecord};
pub use model::{DeliveryState, Gateway, Invalid, LinkRef, NewReceipt, Receipt, Recorded, Refusal};
pub use queue::{NewJob, OpenJob, Pending, SendQueueStore};
pub use rate::{DeliveredRate, RatePoint};
pub use states::{MessageState, MessageStateStore};
pub use store::DeliveryStore;
pub use tokens::{new_token_id, CallbackToken, CallbackTokenStore};

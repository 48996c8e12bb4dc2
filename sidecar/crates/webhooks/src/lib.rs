//! Click webhooks and the resumable visit feed (issue 36): every stored visit given away, once per
//! receiver after de-duplication by its id, in the order the visit store committed it.
//!
//! - [`feed`]: the order (one `visit_feed` row per visit transaction, appended inside it) and
//!   the reader both the feed endpoint and the deliverers use; [`cursor`]: a position in it;
//!   `filter`: which visits a reader or a subscription wants;
//! - [`event`]: what one visit looks like to a receiver (made from the store's `row`);
//!   [`reclassified`]: a stored visit's verdict changed by hindsight, and who hears of it;
//! - [`subscription`], [`service`]: subscriptions as the API and the console take and show them;
//! - [`deliver`]: per-subscription delivery under a lease, retries, failures; [`client`]: the
//!   signed POST, through the outbound rules of [`shortlink_core::outbound`] (which addresses a webhook
//!   may reach, no redirects, no implicit proxy);
//! - `audit`: what a subscription change records in the audit log;
//! - [`store`]: the SQL of all of it; `settings`: [`WebhookSettings`], from the configuration.
//!
//! docs/WEBHOOKS.md, "Click webhooks and the visit feed", says why it is built this way.

#![deny(unsafe_code)]

mod audit;
pub mod client;
pub mod cursor;
pub mod deliver;
pub mod event;
pub mod feed;
mod filter;
pub mod link_visits;
pub mod reclassified;
mod row;
pub mod service;
mod settings;
pub mod store;
pub mod subscription;

pub use cursor::Cursor;
pub use event::{FeedEvent, Privacy};
pub use service::{WebhookError, WebhookService};
pub use settings::WebhookSettings;
pub use store::{Stores, WebhookStore};

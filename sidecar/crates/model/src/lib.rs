//! What a link is, before any store or network: the link as SQL keeps it ([`Link`]) and who owns
//! it ([`WorkspaceId`]), its typed parts between the API, SQL and the
//! Redis record ([`link`]: preview card, click-time rules), the target URL policy ([`validate`]),
//! and what the OpenAPI document states beyond the derives ([`schema`]).

#![deny(unsafe_code)]

pub mod link;
pub mod schema;
pub mod validate;
mod workspace;

pub use link::{Link, LinkExtras, LinkFlags, LinkState};
pub use workspace::WorkspaceId;

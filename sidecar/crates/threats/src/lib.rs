//! Threat feeds (issue 79): public lists of malicious hosts and URLs in their own formats
//! ([`parse`]), fetched from a URL or a file only when they changed ([`source`]), verified and
//! held in memory as sorted hashes ([`feed`], [`index`]), and asked with the shorteners' list
//! and the brands' look-alikes ([`lookalike`]) as one check ([`Threats::check`]); commercial
//! lookups behind [`reputation::TargetReputation`]. No I/O but the feeds' own.

pub mod error;
pub mod feed;
pub mod index;
pub mod lookalike;
pub mod normalize;
pub mod parse;
pub mod reputation;
pub mod source;
mod threats;

pub use error::Error;
pub use threats::{
    FeedChange, Refusal, Settings, Threats, LOOKALIKE_FEED, SHORTENERS, SHORTENERS_FEED,
};

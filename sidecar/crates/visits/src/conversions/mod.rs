//! Conversions (issue 54): a sender's lead or purchase attached to the click that led to it, and
//! the A/B results they make possible.
//!
//! - [`input`]: what a sender gives, checked (name, exact value and ISO 4217 currency, time);
//! - [`store`]: the `conversions` table on every backend, idempotent by the sender's event id,
//!   written with its visit feed row; the per-variant counts results read;
//! - [`significance`]: the two-proportion test, the interval and the sample size (pure);
//! - [`results`]: per-arm rates and per-split verdicts from the counts (pure).
//!
//! docs/CONVERSIONS.md is the user's side of it.

mod conversion;
mod currencies;
pub mod input;
pub mod results;
pub mod significance;
pub mod store;

pub use input::{currency_codes, Click, Money, NewConversion, RawConversion, Refusal};
pub use results::{ab_result, AbResult};
pub use store::{ArmCounts, Conversion, ConversionStore, Recorded, Scope};

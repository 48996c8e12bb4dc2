//! Click-time rules: where one link sends a click, decided from the request alone.
//!
//! A link may carry an ordered list of rules; each is a set of conditions that must all hold and an
//! action (one target, or a weighted split over several). The first rule whose conditions hold
//! answers; when none does, the link's own target does. The module evaluates them in the worker
//! from the decoded record, and the sidecar's resolve fallback runs the very same code, so a click
//! gets the same answer whichever of the two serves it.
//!
//! A reader holds a link's rules as a [`RuleSet`]: their encoded bytes ([`codec`]), checked once
//! when the record is read and evaluated in place, so a cache fill costs one allocation however
//! many rules, values and targets the link has. Evaluation allocates nothing and reads each
//! request header at most once per condition. The client's country is looked up only when a rule
//! asks for it, and then once.

mod choose;
pub mod codec;
mod device;
mod language;
mod model;
mod net;
mod query;
mod set;
mod sticky;
mod time;

pub use device::{classify as device_class, Device};
pub use net::{is_routable, Cidr};
pub use set::RuleSet;
pub use sticky::{
    cookie_to_set, recipient, set_cookie, visitor_cookie, SetCookie, Sticky, COOKIE, COOKIE_MAX_AGE,
};
pub use time::Weekly;

pub use choose::{choose, mix, visitor, Choice, Click};
pub use model::{
    Action, Condition, Rule, Target, TargetRef, Variant, MAX_CONDITIONS, MAX_RULES, MAX_VALUES,
    MAX_VARIANTS,
};

#[cfg(test)]
mod tests;

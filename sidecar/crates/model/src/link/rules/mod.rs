//! Click-time rules in their API form: what a caller writes, what SQL keeps (as JSON text) and
//! what a read returns, normalised. [`convert`] checks them and turns them into `wire`'s rules,
//! the one form the module and the fallback evaluate.
//!
//! ```json
//! {"if": {"device": ["ios"], "country": ["PT"]}, "then": {"url": "https://apps.apple.com/x"}}
//! {"if": {}, "split": {"sticky": true, "variants": [{"weight": 1, "url": "https://a.example/"},
//!                                                    {"weight": 1, "url": "https://b.example/"}]}}
//! ```
//! A target (`then`, each variant) has the fields a link has for its own: `url`, `redirect`,
//! `forward_query`.

mod convert;
mod describe;
mod spec;

pub use convert::{check, parse_stored, to_wire, RulesCheck};
pub use describe::{arm_url, condition_text};
pub use spec::{
    Conditions, QuerySpec, RuleSpec, SplitSpec, StickyMode, StickySpec, TargetSpec, VariantSpec,
    WeeklySpec,
};

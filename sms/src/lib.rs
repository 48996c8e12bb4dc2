//! SMS composition (crate docs written below once the modules settle).

pub mod gsm;
pub mod lookalike;
pub mod phone;
pub mod segments;
pub mod template;

pub use gsm::Language;
pub use segments::{
    analyze, measure, Analysis, Capacity, Encoding, LanguageSet, Measure, Options, Part,
};

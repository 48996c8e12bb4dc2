//! The PostgreSQL dialect's marker, in a file of its own: [`super::copy`] names it and
//! `mod.rs`, which runs the copy, implements the dialect on it.

/// The PostgreSQL dialect.
#[derive(Clone)]
pub struct Pg;

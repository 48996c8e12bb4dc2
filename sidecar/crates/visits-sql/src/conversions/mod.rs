//! Conversions in SQL ([`shortlink_visits::conversions::ConversionStore`]).

mod arrays;
mod batch;
mod rollup;
mod store;

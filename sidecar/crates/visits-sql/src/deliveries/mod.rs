//! Delivery receipts, their messages, the gateways' jobs and queue, callback tokens, funnels and
//! delivered rates in SQL (the traits of [`shortlink_visits::deliveries`]).

mod chunk;
mod funnel;
mod gateway;
mod parallel;
mod queue;
pub(crate) mod rate;
mod returning;
mod states;
mod store;
mod tokens;

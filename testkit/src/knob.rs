//! The benches' knobs: sizes and counts read from the environment, with a default.

/// `name`'s value as a number, or `default` when it is unset or not a number.
pub fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

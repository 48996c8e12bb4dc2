//! When to try connecting again after Redis failed.

/// Exponential backoff shared by a worker's connections. While it says "down", lookups fail
/// at once (and go to the fallback) instead of queueing behind connects that will fail too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff {
    delay_ms: u64,
    until_ms: u64,
}

impl Backoff {
    pub const MIN_MS: u64 = 50;
    /// Small enough that a worker notices Redis is back within about a second.
    pub const MAX_MS: u64 = 500;

    pub fn failed(&mut self, now_ms: u64) {
        self.delay_ms = (self.delay_ms * 2).clamp(Self::MIN_MS, Self::MAX_MS);
        self.until_ms = now_ms + self.delay_ms;
    }

    pub fn succeeded(&mut self) {
        *self = Self::default();
    }

    pub fn is_down(&self, now_ms: u64) -> bool {
        now_ms < self.until_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        assert!(!b.is_down(0));
        let mut delays = Vec::new();
        for _ in 0..7 {
            b.failed(1_000);
            delays.push(b.until_ms - 1_000);
        }
        assert_eq!(delays, [50, 100, 200, 400, 500, 500, 500]);
        assert!(b.is_down(1_499));
        assert!(!b.is_down(1_500));
        b.succeeded();
        assert!(!b.is_down(1_000));
        b.failed(0);
        assert_eq!(b.until_ms, Backoff::MIN_MS);
    }
}

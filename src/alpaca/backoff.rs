//! Exponential backoff with full jitter, shared by the REST retries and the stream reconnects.

use rand::Rng;
use std::time::Duration;

/// How long to wait before retry number n: a random delay between half and all of `initial` × 2ⁿ, capped at
/// `max` (see `delay`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The ceiling of the first retry's delay; it doubles with each retry.
    pub initial: Duration,
    /// The ceiling of any retry's delay, however many retries came before.
    pub max: Duration,
}

impl Backoff {
    /// The streams' policy: 0.5 s doubling to 60 s.
    pub const STREAM: Backoff = Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(60) };

    /// The ceiling for attempt `n` (0-based): `initial * 2^n`, capped at `max`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(20));
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// A delay drawn uniformly from [ceiling/2, ceiling] ("equal jitter": never zero, never above the cap).
    pub fn delay(&self, attempt: u32) -> Duration {
        let c = self.ceiling(attempt);
        let half = c / 2;
        let extra = rand::rng().random_range(0..=half.as_millis().max(1) as u64);
        half + Duration::from_millis(extra).min(c - half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_bounded_jitter() {
        let b = Backoff::STREAM;
        let ceilings: Vec<u64> = (0..10).map(|n| b.ceiling(n).as_millis() as u64).collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
        for n in 0..40 {
            let d = b.delay(n);
            assert!(d >= b.ceiling(n) / 2 && d <= b.ceiling(n), "{n}: {d:?}");
        }
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(60));
    }
}

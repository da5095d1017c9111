//! A client-side token bucket per host. With `burst` b and `per_minute` r, no 60-second window ever sees
//! more than b + r requests, so the defaults (10 + 190) keep the trading host at 200/min. A 429 blocks
//! the whole bucket until the server's reset time, so concurrent callers wait too.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A request budget: a bucket of `burst` tokens refilled at `per_minute` tokens a minute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests allowed per minute, sustained.
    pub per_minute: u32,
    /// Requests that may go at once on top of the sustained rate (the bucket's size).
    pub burst: u32,
}

impl RateLimit {
    /// Alpaca's trading API allows 200 requests per minute per account.
    pub const TRADING: RateLimit = RateLimit { per_minute: 190, burst: 10 };
    /// The free market-data plan allows 200 per minute.
    pub const DATA_FREE: RateLimit = RateLimit { per_minute: 190, burst: 10 };
}

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
    blocked_until: Option<Instant>,
}

/// The token bucket of one host, shared by every call to it (see the module docs).
#[derive(Debug)]
pub struct Limiter {
    limit: RateLimit,
    state: Mutex<State>,
}

impl Limiter {
    /// A full bucket for this budget.
    pub fn new(limit: RateLimit) -> Self {
        let state = State { tokens: f64::from(limit.burst.max(1)), last: Instant::now(), blocked_until: None };
        Limiter { limit, state: Mutex::new(state) }
    }

    /// Waits for a token and takes it. Cancellation-safe: a token is only taken when this returns.
    pub async fn acquire(&self) {
        loop {
            match self.try_take(Instant::now()) {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Stops every caller until `until` (a 429's reset time) and empties the bucket.
    pub fn block_until(&self, until: Instant) {
        let mut s = self.lock();
        s.tokens = 0.0;
        s.last = s.last.max(until);
        s.blocked_until = Some(s.blocked_until.map_or(until, |b| b.max(until)));
    }

    /// `None` when a token was taken, else how long to wait before trying again.
    fn try_take(&self, now: Instant) -> Option<Duration> {
        let mut s = self.lock();
        if let Some(b) = s.blocked_until {
            if now < b {
                return Some(b - now);
            }
            s.blocked_until = None;
        }
        let rate = f64::from(self.limit.per_minute.max(1)) / 60.0;
        if now > s.last {
            let add = (now - s.last).as_secs_f64() * rate;
            s.tokens = (s.tokens + add).min(f64::from(self.limit.burst.max(1)));
            s.last = now;
        }
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - s.tokens) / rate).max(Duration::from_millis(1)))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update of plain numbers: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest number of events in any window of `w` starting at an event.
    fn max_in_window(times: &[Instant], w: Duration) -> usize {
        (0..times.len()).map(|i| times[i..].iter().take_while(|t| **t < times[i] + w).count()).max().unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn never_more_than_200_in_any_minute() {
        let l = Limiter::new(RateLimit::TRADING);
        let mut times = Vec::new();
        for _ in 0..1000 {
            l.acquire().await;
            times.push(Instant::now());
        }
        let most = max_in_window(&times, Duration::from_secs(60));
        assert!((195..=200).contains(&most), "{most} requests in one minute");
        let took = times[999] - times[0];
        assert!(took >= Duration::from_secs(310) && took <= Duration::from_secs(320), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_block_stops_everyone_until_the_reset() {
        let l = Limiter::new(RateLimit::TRADING);
        let start = Instant::now();
        l.block_until(start + Duration::from_secs(30));
        l.acquire().await;
        assert!(Instant::now() - start >= Duration::from_secs(30));
        assert!(Instant::now() - start < Duration::from_secs(31), "first token right after the reset");
    }
}

//! The replay feed: stored bars through the same [`MarketFeed`] trait as the live Alpaca stream, so the
//! engine cannot tell a replay from the market. Bars of all symbols are merged in time order (ties in
//! symbol order), each delivered exactly once; the replay runs as fast as possible (`speed = 0`) or at
//! `speed` times real time, paced on tokio's clock (so tests can pause and advance time). It starts with
//! `Connected { backfilled: 0 }` and ends with `FeedError::Stopped` after the last bar.

use crate::alpaca::feed::{FeedError, FeedEvent, MarketFeed};
use crate::domain::{Bar, Symbol, Timeframe};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use tokio::time::{Duration, Instant};

pub struct ReplayFeed {
    bars: VecDeque<Bar>,
    speed: f64,
    connected: bool,
    /// Wall-clock start and the market time it corresponds to.
    origin: Option<(Instant, DateTime<Utc>)>,
}

impl ReplayFeed {
    /// `speed`: 0 (or less) = as fast as possible; N = N seconds of market time per wall second.
    pub fn new(mut bars: Vec<Bar>, speed: f64) -> Self {
        bars.sort_by(|a, b| a.t.cmp(&b.t).then_with(|| a.symbol.cmp(&b.symbol)));
        let speed = if speed.is_finite() && speed > 0.0 { speed } else { 0.0 };
        ReplayFeed { bars: bars.into(), speed, connected: false, origin: None }
    }

    /// The stored bars of `symbols` with `from <= t <= to`.
    pub fn from_store(
        store: &Store,
        symbols: &[Symbol],
        tf: Timeframe,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        speed: f64,
    ) -> Result<Self, StoreError> {
        let mut all = Vec::new();
        for s in symbols {
            all.extend(store.bars(s, tf, from, to)?);
        }
        Ok(ReplayFeed::new(all, speed))
    }

    pub fn remaining(&self) -> usize {
        self.bars.len()
    }

    /// When the next bar is due on the wall clock.
    fn due(&mut self, t: DateTime<Utc>) -> Option<Instant> {
        if self.speed == 0.0 {
            return None;
        }
        let (start, t0) = *self.origin.get_or_insert((Instant::now(), t));
        let market_secs = (t - t0).num_milliseconds().max(0) as f64 / 1000.0;
        Some(start + Duration::from_secs_f64(market_secs / self.speed))
    }
}

impl MarketFeed for ReplayFeed {
    /// Cancellation-safe: a bar leaves the queue only once its wait is over.
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        if !self.connected {
            self.connected = true;
            return Ok(FeedEvent::Connected { backfilled: 0 });
        }
        let Some(t) = self.bars.front().map(|b| b.t) else { return Err(FeedError::Stopped) };
        if let Some(at) = self.due(t) {
            tokio::time::sleep_until(at).await;
        }
        self.bars.pop_front().map(FeedEvent::Bar).ok_or(FeedError::Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn bar(sym: &str, day: u32) -> Bar {
        let t = Utc.with_ymd_and_hms(2024, 1, day, 5, 0, 0).unwrap();
        Bar::new(Symbol::new(sym).unwrap(), Timeframe::DAY1, t, 10.0, 11.0, 9.0, 10.0, 1.0).unwrap()
    }

    async fn drain(f: &mut ReplayFeed) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        loop {
            match f.next().await {
                Ok(FeedEvent::Bar(b)) => out.push((b.symbol.to_string(), chrono::Datelike::day(&b.t))),
                Ok(FeedEvent::Connected { backfilled: 0 }) => assert!(out.is_empty(), "connected comes first"),
                Ok(other) => panic!("unexpected {other:?}"),
                Err(FeedError::Stopped) => return out,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[tokio::test]
    async fn merges_symbols_in_time_order_each_bar_once() {
        let mut f = ReplayFeed::new(vec![bar("MSFT", 3), bar("AAPL", 3), bar("MSFT", 1), bar("AAPL", 2)], 0.0);
        let got = drain(&mut f).await;
        assert_eq!(got, [("MSFT".into(), 1), ("AAPL".into(), 2), ("AAPL".into(), 3), ("MSFT".into(), 3)]);
        assert!(matches!(f.next().await, Err(FeedError::Stopped)), "stays stopped");
    }

    #[tokio::test(start_paused = true)]
    async fn paces_at_n_times_real_time() {
        // Three daily bars at 86,400x: one market day per wall second, so the last bar is due 2 s in.
        let mut f = ReplayFeed::new(vec![bar("AAPL", 1), bar("AAPL", 2), bar("AAPL", 3)], 86_400.0);
        let start = Instant::now();
        let got = drain(&mut f).await;
        assert_eq!(got.len(), 3);
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(2) && took < Duration::from_millis(2100), "{took:?}");
    }

    #[tokio::test]
    async fn replays_stored_bars() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/stocks-daily-2000-2013.csv.gz");
        let syms = vec![Symbol::new("AAPL").unwrap(), Symbol::new("FB").unwrap()];
        let opts = crate::data::ImportOptions { symbols: syms.clone(), ..Default::default() };
        crate::data::import_csv(&store, &path, &opts).unwrap();
        let from = Utc.with_ymd_and_hms(2012, 1, 1, 0, 0, 0).unwrap();
        let to = Utc.with_ymd_and_hms(2013, 12, 31, 0, 0, 0).unwrap();
        let mut f = ReplayFeed::from_store(&store, &syms, Timeframe::DAY1, from, to, 0.0).unwrap();
        let (mut n, mut last) = (0, None);
        f.next().await.unwrap();
        while let Ok(FeedEvent::Bar(b)) = f.next().await {
            assert!(last.is_none_or(|l| l <= b.t), "out of order");
            last = Some(b.t);
            n += 1;
        }
        // AAPL traded 292 days from 2012-01-03 to 2013-03-01; FB all of its 196 days.
        assert_eq!(n, store.bars(&syms[0], Timeframe::DAY1, from, to).unwrap().len() + 196);
    }
}

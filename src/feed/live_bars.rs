//! The live bar path between the market-data feed and the engine.
//!
//! Every minute bar the feed delivers (streamed or backfilled over REST) is written to the store as it
//! arrives, and aggregated into `market.timeframe` (`feed::Aggregator`: exchange-clock buckets,
//! a stock's day closing at the session close); the engine sees only closed bars of that timeframe,
//! each also stored, and every minute as `FeedEvent::Mark` (for the daily loss limit and the stops, which
//! watch prices between two bars of the timeframe). A bucket closes on its last minute, on a later bucket's first minute, or
//! `CLOSE_GRACE` after its end when its last minute never comes (a quiet symbol; only while the stream is
//! live, never during a backfill). A minute arriving after its bucket closed is stored but not
//! aggregated again. A period that closed with bars of some symbols but not of others gets
//! `FeedEvent::NoBar` for the others, so the engine decides on the rest (it carries their last close).
//!
//! At start `LiveBars::resume` reads the store: the last stored minute of each symbol (the feed's first
//! backfill starts just after it, at most `MAX_BACKFILL` back), the minutes of a bucket still open
//! (rebuilt, so a restart mid-bucket loses none), and the last stored bar of the timeframe (never
//! emitted twice).

use super::{Aggregator, FeedError, FeedEvent, MarketFeed};
use crate::domain::{Bar, Symbol, Timeframe};
use crate::store::Store;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// How long after a bucket's end its last minute bar is waited for.
pub(super) const CLOSE_GRACE: Duration = Duration::seconds(15);

/// `CLOSE_GRACE`, and on a fast simulated clock at least a quarter of a wall second (a minute's way from
/// the socket to the aggregator takes wall time, however fast the clock runs).
fn close_grace() -> Duration {
    CLOSE_GRACE.max(crate::clock::sim_span(std::time::Duration::from_millis(250)))
}
/// The longest gap a start backfills (a store last written months ago starts here).
pub(super) const MAX_BACKFILL: Duration = Duration::days(7);

/// Where the feed resumes: the last stored minute per symbol and, for symbols without one, where the
/// first backfill starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resume {
    pub last_minute: HashMap<Symbol, DateTime<Utc>>,
    pub backfill_from: DateTime<Utc>,
}

/// The feed seen by the engine: stored minute bars in, stored bars of the timeframe out.
pub(crate) struct LiveBars<F> {
    inner: F,
    store: Store,
    symbols: Vec<Symbol>,
    /// `None` for a 1Min timeframe: minute bars go to the engine as they are.
    agg: Option<Aggregator>,
    /// Periods that closed for some symbols (by start): when they end and which symbols had a bar. Once
    /// `CLOSE_GRACE` past the end, the symbols without one get `FeedEvent::NoBar`.
    periods: BTreeMap<DateTime<Utc>, (DateTime<Utc>, BTreeSet<Symbol>)>,
    ready: VecDeque<FeedEvent>,
    /// The stream is live (after `Connected`, before `Disconnected`): buckets are closed by the clock only
    /// then, never while a backfill is still delivering their minutes.
    live: bool,
    /// Set once a store write failed (logged once; bars keep flowing to the engine).
    store_failed: bool,
}

impl LiveBars<()> {
    /// Reads the store for `symbols` at `now` (see the module doc) and returns the path with its buckets
    /// rebuilt, and where the feed must resume; `over` then puts it over the feed started from that.
    pub(crate) fn resume(
        store: Store,
        symbols: &[Symbol],
        timeframe: Timeframe,
        now: DateTime<Utc>,
    ) -> anyhow::Result<(LiveBars<()>, Resume)> {
        let mut agg = if timeframe == Timeframe::MIN1 { None } else { Some(Aggregator::new(timeframe)?) };
        let floor = now - MAX_BACKFILL;
        let mut last_minute = HashMap::new();
        let mut done_at_start = Vec::new();
        for s in symbols {
            // A period already stored (streamed, fetched or imported) is never emitted again, whether or
            // not its minutes are stored: the engine warmed up on it.
            if let (Some(agg), Some(done)) = (agg.as_mut(), store.last_bar_time(s, timeframe)?) {
                agg.mark_emitted(s, done);
            }
            let Some(last) = store.last_bar_time(s, Timeframe::MIN1)? else { continue };
            if last < floor {
                log::info!(
                    "feed: the last stored minute bar of {s} is {last}; backfilling only the last {} days",
                    MAX_BACKFILL.num_days()
                );
                continue;
            }
            last_minute.insert(s.clone(), last);
            let Some(agg) = agg.as_mut() else { continue };
            // The minutes of the bucket still open at the stop: rebuilt (a bucket they complete is
            // stored and delivered now, as it would have been).
            let from = agg.bucket_start(last);
            for m in store.bars(s, Timeframe::MIN1, from, last)? {
                done_at_start.extend(agg.push(&m)?);
            }
        }
        let mut path = LiveBars {
            inner: (),
            store,
            symbols: symbols.to_vec(),
            agg,
            periods: BTreeMap::new(),
            ready: VecDeque::new(),
            live: false,
            store_failed: false,
        };
        for b in done_at_start {
            path.emit(b);
        }
        Ok((path, Resume { last_minute, backfill_from: floor }))
    }

    /// The calendar's early closes (New York date → close), where a stock's day bar closes.
    pub(crate) fn set_early_closes(&mut self, closes: BTreeMap<chrono::NaiveDate, chrono::NaiveTime>) {
        if let Some(agg) = self.agg.as_mut() {
            agg.set_early_closes(closes);
        }
    }

    pub(crate) fn over<F>(self, inner: F) -> LiveBars<F> {
        let LiveBars { store, symbols, agg, periods, ready, live, store_failed, .. } = self;
        LiveBars { inner, store, symbols, agg, periods, ready, live, store_failed }
    }
}

impl<F> LiveBars<F> {
    fn put(&mut self, bar: &Bar) {
        if let Err(e) = self.store.put_bars(std::slice::from_ref(bar)) {
            if !self.store_failed {
                log::error!("feed: cannot store the {} bar of {} at {}: {e}", bar.timeframe, bar.symbol, bar.t);
            }
            self.store_failed = true;
        }
    }

    /// A closed bar of the timeframe: stored, noted in its period, queued for the engine.
    fn emit(&mut self, bar: Bar) {
        self.put(&bar);
        let end = self.agg.as_ref().map_or(bar.close_time(), |a| a.bucket_end(&bar.symbol, bar.t));
        let period = self.periods.entry(bar.t).or_insert((end, BTreeSet::new()));
        period.0 = period.0.max(end);
        period.1.insert(bar.symbol.clone());
        self.ready.push_back(FeedEvent::Bar(bar));
    }

    /// Stores a feed event's bar and queues what the engine sees.
    fn take(&mut self, ev: FeedEvent) {
        match ev {
            FeedEvent::Bar(b) if b.timeframe == Timeframe::MIN1 => {
                self.put(&b);
                let Some(agg) = self.agg.as_mut() else {
                    self.emit(b);
                    return;
                };
                // Every minute marks the account to market (the daily loss limit, the stops), whatever
                // the timeframe; the bucket it closes, if any, follows.
                let pushed = agg.push(&b);
                self.ready.push_back(FeedEvent::Mark(b.clone()));
                match pushed {
                    Ok(done) => done.into_iter().for_each(|d| self.emit(d)),
                    Err(e) => log::warn!("feed: {} bar of {} at {} not aggregated: {e}", b.timeframe, b.symbol, b.t),
                }
            }
            FeedEvent::BarUpdated(b) => {
                // The stored minute is corrected; a bucket already closed keeps what the engine saw.
                self.put(&b);
                if self.agg.is_none() {
                    self.ready.push_back(FeedEvent::BarUpdated(b));
                }
            }
            other => {
                match other {
                    FeedEvent::Connected { .. } => self.live = true,
                    FeedEvent::Disconnected { .. } => self.live = false,
                    _ => {}
                }
                self.ready.push_back(other)
            }
        }
    }

    /// When the clock next has something to close: an open bucket or a period to settle, `CLOSE_GRACE`
    /// after its end; only while live.
    fn next_due(&self) -> Option<DateTime<Utc>> {
        if !self.live {
            return None;
        }
        let bucket = self.agg.as_ref().and_then(Aggregator::next_due);
        let period = self.periods.values().map(|(end, _)| *end).min();
        bucket.into_iter().chain(period).min().map(|t| t + close_grace())
    }

    /// Closes the buckets due at `now`, then settles the periods that ended: a symbol without a bar in one
    /// gets `NoBar`.
    fn close_due(&mut self, now: DateTime<Utc>) {
        let cutoff = now - close_grace();
        if let Some(agg) = self.agg.as_mut() {
            let due = agg.close_due(cutoff);
            due.into_iter().for_each(|d| self.emit(d));
        }
        let ended: Vec<DateTime<Utc>> =
            self.periods.iter().filter(|(_, (end, _))| *end <= cutoff).map(|(t, _)| *t).collect();
        for t in ended {
            let Some((_, had)) = self.periods.remove(&t) else { continue };
            for s in self.symbols.iter().filter(|s| !had.contains(*s)) {
                self.ready.push_back(FeedEvent::NoBar { symbol: s.clone(), t });
            }
        }
    }
}

impl<F: MarketFeed + Send> MarketFeed for LiveBars<F> {
    /// Cancellation-safe: an event taken from the inner feed is queued before the next await.
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Ok(ev);
            }
            let ev = match self.next_due() {
                Some(t) => {
                    let wait = crate::clock::wall_span(t - crate::clock::now());
                    tokio::select! {
                        biased;
                        ev = self.inner.next() => ev?,
                        _ = tokio::time::sleep(wait) => {
                            self.close_due(crate::clock::now());
                            continue;
                        }
                    }
                }
                None => self.inner.next().await?,
            };
            self.take(ev);
        }
    }
}

#[cfg(test)]
mod tests;

//! `Aggregator`: 1Min bars into a longer timeframe, aligned to the exchange's clock (New York): 5Min,
//! 15Min and 1Hour buckets start at whole multiples of the period since New York midnight (so a 1Hour
//! bar at 09:00 holds 09:30-09:59 on a regular session), 1Day buckets are stamped New York midnight as
//! Alpaca stamps daily bars. A stock's day bucket holds the regular session only (09:30 to the close:
//! 16:00, or the early close the calendar gives with `set_early_closes`); a crypto day runs midnight to
//! midnight.
//!
//! A bucket is emitted once: when its last minute arrives, when a bar of a later bucket arrives, or with
//! `close_due` once the clock has passed its end. Minutes of a bucket already emitted (late, or after a
//! stock's close) are dropped, so a period never yields two bars.

use crate::calendar::{REGULAR_CLOSE, REGULAR_OPEN};
use crate::domain::{Bar, BarError, Symbol, Timeframe};
use chrono::{DateTime, Duration, NaiveDate, NaiveTime, TimeZone, Timelike, Utc};
use chrono_tz::America::New_York;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum AggregateError {
    #[error("cannot aggregate into {0}: use minutes, hours or 1Day")]
    Unsupported(Timeframe),
    #[error("aggregated bar refused: {0}")]
    Bar(#[from] BarError),
}

#[derive(Debug)]
pub(crate) struct Aggregator {
    target: Timeframe,
    open: HashMap<Symbol, Bar>,
    /// The start of the last bucket emitted per symbol.
    emitted: HashMap<Symbol, DateTime<Utc>>,
    /// Sessions that close before 16:00 New York (the calendar's early closes).
    early_closes: BTreeMap<NaiveDate, NaiveTime>,
}

/// New York wall time on `day`; a time inside a DST gap falls back to the same time in UTC.
fn new_york(day: NaiveDate, time: NaiveTime) -> DateTime<Utc> {
    let naive = day.and_time(time);
    New_York.from_local_datetime(&naive).earliest().map_or_else(|| naive.and_utc(), |d| d.to_utc())
}

impl Aggregator {
    pub(crate) fn new(target: Timeframe) -> Result<Self, AggregateError> {
        match target {
            Timeframe::Minutes(_) | Timeframe::Hours(_) | Timeframe::Days(1) => {
                Ok(Aggregator { target, open: HashMap::new(), emitted: HashMap::new(), early_closes: BTreeMap::new() })
            }
            other => Err(AggregateError::Unsupported(other)),
        }
    }

    /// Early closes (New York date → close time), e.g. from Alpaca's `/v2/calendar`.
    pub(crate) fn set_early_closes(&mut self, closes: BTreeMap<NaiveDate, NaiveTime>) {
        self.early_closes = closes;
    }

    /// The start of the bucket holding time `t`.
    pub(crate) fn bucket_start(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        let local = t.with_timezone(&New_York);
        let period = match self.target {
            Timeframe::Minutes(n) => u32::from(n),
            Timeframe::Hours(n) => u32::from(n) * 60,
            _ => 24 * 60,
        };
        let minute_of_day = local.hour() * 60 + local.minute();
        let start = minute_of_day / period * period;
        let naive = local.date_naive().and_time(NaiveTime::MIN) + Duration::minutes(i64::from(start));
        // A bucket start inside a DST gap does not exist; fall back to the bar's own minute.
        New_York.from_local_datetime(&naive).earliest().map_or(t, |d| d.to_utc())
    }

    /// When the bucket starting at `start` closes for `symbol`: its period's end; for a stock's day, the
    /// session close; for a crypto day, the next New York midnight.
    pub(crate) fn bucket_end(&self, symbol: &Symbol, start: DateTime<Utc>) -> DateTime<Utc> {
        match self.target {
            Timeframe::Days(_) => {
                let day = start.with_timezone(&New_York).date_naive();
                if symbol.is_crypto() {
                    new_york(day.succ_opt().unwrap_or(day), NaiveTime::MIN)
                } else {
                    new_york(day, self.early_closes.get(&day).copied().unwrap_or(REGULAR_CLOSE))
                }
            }
            tf => start + Duration::seconds(tf.seconds()),
        }
    }

    /// Whether a minute belongs in its bucket at all: a stock's day holds the regular session only.
    fn in_session(&self, bar: &Bar, start: DateTime<Utc>) -> bool {
        if !matches!(self.target, Timeframe::Days(_)) || bar.symbol.is_crypto() {
            return true;
        }
        let day = start.with_timezone(&New_York).date_naive();
        bar.t >= new_york(day, REGULAR_OPEN) && bar.t < self.bucket_end(&bar.symbol, start)
    }

    /// Adds a 1Min bar (bars of a symbol in time order); returns the buckets it completed (the previous
    /// one when this bar starts a later bucket, and this bar's own when it is the bucket's last minute).
    pub(crate) fn push(&mut self, bar: &Bar) -> Result<Vec<Bar>, AggregateError> {
        let start = self.bucket_start(bar.t);
        if self.emitted.get(&bar.symbol).is_some_and(|e| start <= *e) || !self.in_session(bar, start) {
            return Ok(Vec::new());
        }
        let mut done = Vec::new();
        let merged = match self.open.remove(&bar.symbol) {
            Some(cur) if cur.t == start => Bar::new(
                cur.symbol.clone(),
                self.target,
                start,
                cur.o,
                cur.h.max(bar.h),
                cur.l.min(bar.l),
                bar.c,
                cur.v + bar.v,
            )?,
            other => {
                if let Some(prev) = other {
                    self.emitted.insert(prev.symbol.clone(), prev.t);
                    done.push(prev);
                }
                Bar::new(bar.symbol.clone(), self.target, start, bar.o, bar.h, bar.l, bar.c, bar.v)?
            }
        };
        if bar.close_time() >= self.bucket_end(&bar.symbol, start) {
            self.emitted.insert(merged.symbol.clone(), merged.t);
            done.push(merged);
        } else {
            self.open.insert(bar.symbol.clone(), merged);
        }
        Ok(done)
    }

    /// Emits every open bucket that ends at or before `now`, in symbol order.
    pub(crate) fn close_due(&mut self, now: DateTime<Utc>) -> Vec<Bar> {
        let mut due: Vec<Symbol> =
            self.open.iter().filter(|(s, b)| self.bucket_end(s, b.t) <= now).map(|(s, _)| s.clone()).collect();
        due.sort();
        let bars: Vec<Bar> = due.into_iter().filter_map(|s| self.open.remove(&s)).collect();
        for b in &bars {
            self.emitted.insert(b.symbol.clone(), b.t);
        }
        bars
    }

    /// The earliest end among the open buckets: when `close_due` will next have something to emit.
    pub(crate) fn next_due(&self) -> Option<DateTime<Utc>> {
        self.open.iter().map(|(s, b)| self.bucket_end(s, b.t)).min()
    }

    /// Marks the bucket starting at `start` as emitted for `symbol` (it is already stored): its minutes
    /// are dropped if they arrive again.
    pub(crate) fn mark_emitted(&mut self, symbol: &Symbol, start: DateTime<Utc>) {
        let e = self.emitted.entry(symbol.clone()).or_insert(start);
        *e = (*e).max(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1Min bar at `hh:mm` New York time on 2024-05-01 (UTC-4), price `p`.
    fn m(hh: u32, mm: u32, p: f64) -> Bar {
        let t = New_York.with_ymd_and_hms(2024, 5, 1, hh, mm, 0).unwrap().to_utc();
        Bar::new(Symbol::new("AAPL").unwrap(), Timeframe::MIN1, t, p, p + 1.0, p - 1.0, p + 0.5, 10.0).unwrap()
    }

    fn run(tf: Timeframe, bars: &[Bar]) -> Vec<Bar> {
        let mut a = Aggregator::new(tf).unwrap();
        let mut out: Vec<Bar> = bars.iter().flat_map(|b| a.push(b).unwrap()).collect();
        out.extend(a.close_due(DateTime::<Utc>::MAX_UTC));
        out
    }

    #[test]
    fn five_minute_buckets_from_the_open() {
        let bars: Vec<Bar> = (30..45).map(|mm| m(9, mm, f64::from(mm))).collect();
        let out = run(Timeframe::Minutes(5), &bars);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].t, New_York.with_ymd_and_hms(2024, 5, 1, 9, 30, 0).unwrap().to_utc());
        assert_eq!((out[0].o, out[0].h, out[0].l, out[0].c, out[0].v), (30.0, 35.0, 29.0, 34.5, 50.0));
        assert_eq!(out[2].t.timestamp() - out[0].t.timestamp(), 600);
        assert_eq!(out[0].timeframe, Timeframe::Minutes(5));
    }

    #[test]
    fn hour_buckets_align_to_the_clock_hour_and_days_to_new_york_midnight() {
        let bars: Vec<Bar> = (30..90).map(|i| m(9 + i / 60, i % 60, 100.0)).collect();
        let out = run(Timeframe::Hours(1), &bars);
        assert_eq!(out.iter().map(|b| b.v).collect::<Vec<_>>(), [300.0, 300.0], "09:30-09:59 and 10:00-10:29");
        assert_eq!(out[0].t, New_York.with_ymd_and_hms(2024, 5, 1, 9, 0, 0).unwrap().to_utc());
        let day = run(Timeframe::DAY1, &bars);
        assert_eq!(day.len(), 1);
        assert_eq!(day[0].t.to_rfc3339(), "2024-05-01T04:00:00+00:00", "stamped like Alpaca's daily bars");
        assert_eq!(day[0].v, 600.0);
    }

    #[test]
    fn close_due_waits_for_the_bucket_end() {
        let mut a = Aggregator::new(Timeframe::Minutes(15)).unwrap();
        assert!(a.push(&m(9, 30, 5.0)).unwrap().is_empty());
        assert!(a.close_due(m(9, 44, 5.0).t).is_empty());
        assert_eq!(a.close_due(m(9, 45, 5.0).t).len(), 1);
        assert!(Aggregator::new(Timeframe::Weeks(1)).is_err());
    }

    #[test]
    fn a_bucket_closes_on_its_last_minute_and_is_never_emitted_twice() {
        let mut a = Aggregator::new(Timeframe::Minutes(15)).unwrap();
        for mm in 30..44 {
            assert!(a.push(&m(9, mm, 5.0)).unwrap().is_empty());
        }
        let done = a.push(&m(9, 44, 6.0)).unwrap();
        assert_eq!(done.len(), 1, "09:44 is the 09:30 bucket's last minute");
        assert_eq!((done[0].c, done[0].v), (6.5, 150.0));
        assert!(a.next_due().is_none());
        assert!(a.push(&m(9, 44, 7.0)).unwrap().is_empty(), "a late minute of an emitted bucket is dropped");
        a.mark_emitted(&Symbol::new("AAPL").unwrap(), m(9, 45, 5.0).t);
        assert!(a.push(&m(9, 50, 7.0)).unwrap().is_empty(), "a bucket marked as stored is not rebuilt");
    }

    #[test]
    fn a_stock_day_holds_the_regular_session_and_closes_early_on_the_calendar() {
        let mut a = Aggregator::new(Timeframe::DAY1).unwrap();
        assert!(a.push(&m(8, 0, 2.0)).unwrap().is_empty(), "pre-market");
        assert!(a.push(&m(9, 30, 100.0)).unwrap().is_empty());
        let end = a.next_due().unwrap();
        assert_eq!(end, New_York.with_ymd_and_hms(2024, 5, 1, 16, 0, 0).unwrap().to_utc());
        let done = a.push(&m(15, 59, 110.0)).unwrap();
        assert_eq!(done.len(), 1, "the session's last minute closes the day");
        assert_eq!((done[0].o, done[0].h, done[0].v), (100.0, 111.0, 20.0), "pre-market left out");
        assert!(a.push(&m(16, 5, 120.0)).unwrap().is_empty(), "after-hours minutes make no second day bar");

        let mut b = Aggregator::new(Timeframe::DAY1).unwrap();
        let day = NaiveDate::from_ymd_opt(2024, 5, 1).unwrap();
        b.set_early_closes(BTreeMap::from([(day, NaiveTime::from_hms_opt(13, 0, 0).unwrap())]));
        assert!(b.push(&m(9, 30, 100.0)).unwrap().is_empty());
        assert_eq!(b.push(&m(12, 59, 101.0)).unwrap().len(), 1, "an early close ends the day at 13:00");
        assert!(b.close_due(DateTime::<Utc>::MAX_UTC).is_empty());

        let btc = Symbol::new("BTC/USD").unwrap();
        let crypto = |hh, p: f64| {
            let t = New_York.with_ymd_and_hms(2024, 5, 1, hh, 0, 0).unwrap().to_utc();
            Bar::new(btc.clone(), Timeframe::MIN1, t, p, p, p, p, 1.0).unwrap()
        };
        let mut c = Aggregator::new(Timeframe::DAY1).unwrap();
        assert!(c.push(&crypto(2, 1.0)).unwrap().is_empty() && c.push(&crypto(20, 2.0)).unwrap().is_empty());
        assert_eq!(c.next_due().unwrap(), New_York.with_ymd_and_hms(2024, 5, 2, 0, 0, 0).unwrap().to_utc());
    }
}

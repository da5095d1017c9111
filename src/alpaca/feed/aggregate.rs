//! `Aggregator`: 1Min bars into a longer timeframe, aligned to the exchange's clock (New York): 5Min,
//! 15Min and 1Hour buckets start at whole multiples of the period since New York midnight (so a 1Hour
//! bar at 09:00 holds 09:30-09:59 on a regular session), 1Day buckets are stamped New York midnight as
//! Alpaca stamps daily bars. A bucket is emitted when a bar of a later bucket arrives or, with
//! `close_due`, once the clock has passed its end.

use crate::domain::{Bar, BarError, Symbol, Timeframe};
use chrono::{DateTime, Duration, NaiveTime, TimeZone, Timelike, Utc};
use chrono_tz::America::New_York;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AggregateError {
    #[error("cannot aggregate into {0}: use minutes, hours or 1Day")]
    Unsupported(Timeframe),
    #[error("aggregated bar refused: {0}")]
    Bar(#[from] BarError),
}

#[derive(Debug)]
pub struct Aggregator {
    target: Timeframe,
    open: HashMap<Symbol, Bar>,
}

impl Aggregator {
    pub fn new(target: Timeframe) -> Result<Self, AggregateError> {
        match target {
            Timeframe::Minutes(_) | Timeframe::Hours(_) | Timeframe::Days(1) => {
                Ok(Aggregator { target, open: HashMap::new() })
            }
            other => Err(AggregateError::Unsupported(other)),
        }
    }

    /// The start of the bucket holding time `t`.
    pub fn bucket_start(&self, t: DateTime<Utc>) -> DateTime<Utc> {
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

    /// Adds a 1Min bar (bars of a symbol in time order); returns the bucket it completed, if any.
    pub fn push(&mut self, bar: &Bar) -> Result<Option<Bar>, AggregateError> {
        let start = self.bucket_start(bar.t);
        let fresh = || Bar::new(bar.symbol.clone(), self.target, start, bar.o, bar.h, bar.l, bar.c, bar.v);
        match self.open.get_mut(&bar.symbol) {
            Some(cur) if cur.t == start => {
                *cur = Bar::new(
                    cur.symbol.clone(),
                    self.target,
                    start,
                    cur.o,
                    cur.h.max(bar.h),
                    cur.l.min(bar.l),
                    bar.c,
                    cur.v + bar.v,
                )?;
                Ok(None)
            }
            Some(cur) => Ok(Some(std::mem::replace(cur, fresh()?))),
            None => {
                self.open.insert(bar.symbol.clone(), fresh()?);
                Ok(None)
            }
        }
    }

    /// Emits every open bucket that ends at or before `now` (`Days` buckets end at the next New York
    /// midnight), in symbol order.
    pub fn close_due(&mut self, now: DateTime<Utc>) -> Vec<Bar> {
        let target = self.target;
        let end = |b: &Bar| match target {
            Timeframe::Days(_) => {
                let next = b.t.with_timezone(&New_York).date_naive().succ_opt().unwrap_or(b.t.date_naive());
                New_York
                    .from_local_datetime(&next.and_time(NaiveTime::MIN))
                    .earliest()
                    .map_or(b.close_time(), |d| d.to_utc())
            }
            _ => b.close_time(),
        };
        let mut due: Vec<Symbol> = self.open.iter().filter(|(_, b)| end(b) <= now).map(|(s, _)| s.clone()).collect();
        due.sort();
        due.into_iter().filter_map(|s| self.open.remove(&s)).collect()
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
        let mut out: Vec<Bar> = bars.iter().filter_map(|b| a.push(b).unwrap()).collect();
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
        assert!(a.push(&m(9, 30, 5.0)).unwrap().is_none());
        assert!(a.close_due(m(9, 44, 5.0).t).is_empty());
        assert_eq!(a.close_due(m(9, 45, 5.0).t).len(), 1);
        assert!(Aggregator::new(Timeframe::Weeks(1)).is_err());
    }
}

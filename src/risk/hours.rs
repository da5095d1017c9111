//! Market hours for stock orders: NYSE regular hours, 09:30-16:00 America/New_York on weekdays, or the
//! extended session 04:00-20:00 when `risk.extended_hours = true`. Crypto trades around the clock.
//!
//! **Daily and weekly bars** are not checked: such a decision is taken at (or after) the close and its
//! market order fills in the next session, so the check would only stop every daily replay and backtest.
//! The check applies to intraday timeframes (minutes, hours), against the clock's now, when the order is
//! sent. Exchange holidays are not known here (no calendar): on a holiday the broker refuses or queues the
//! order.

use crate::domain::Timeframe;
use chrono::{DateTime, Datelike, NaiveTime, Timelike, Utc, Weekday};
use chrono_tz::America::New_York;

/// The trading day an instant belongs to in New York (the date the daily loss limit counts from).
pub fn trading_day(now: DateTime<Utc>) -> chrono::NaiveDate {
    now.with_timezone(&New_York).date_naive()
}

/// Which session window applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    Regular,
    Extended,
}

impl Session {
    pub fn name(self) -> &'static str {
        match self {
            Session::Regular => "regular",
            Session::Extended => "extended",
        }
    }

    fn window(self) -> (NaiveTime, NaiveTime) {
        let t = |h, m| NaiveTime::from_hms_opt(h, m, 0).unwrap_or(NaiveTime::MIN);
        match self {
            Session::Regular => (t(9, 30), t(16, 0)),
            Session::Extended => (t(4, 0), t(20, 0)),
        }
    }
}

/// Whether a stock order may be sent at `now`: a weekday in New York, within the session's window
/// (open inclusive, close exclusive).
pub fn stock_market_open(now: DateTime<Utc>, session: Session) -> bool {
    let ny = now.with_timezone(&New_York);
    if matches!(ny.weekday(), Weekday::Sat | Weekday::Sun) {
        return false;
    }
    let (open, close) = session.window();
    let t = NaiveTime::from_hms_opt(ny.hour(), ny.minute(), ny.second()).unwrap_or(NaiveTime::MIN);
    t >= open && t < close
}

/// Whether the hours check applies to decisions on bars of this timeframe (intraday only).
pub fn hours_apply(tf: Timeframe) -> bool {
    matches!(tf, Timeframe::Minutes(_) | Timeframe::Hours(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn ny(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        New_York.with_ymd_and_hms(y, mo, d, h, mi, 0).single().unwrap().to_utc()
    }

    #[test]
    fn regular_hours_on_weekdays_in_new_york_time() {
        // Monday 2024-03-11 (after the DST change) and Monday 2024-01-08 (standard time).
        for (y, m, d) in [(2024, 3, 11), (2024, 1, 8)] {
            assert!(!stock_market_open(ny(y, m, d, 9, 29), Session::Regular));
            assert!(stock_market_open(ny(y, m, d, 9, 30), Session::Regular));
            assert!(stock_market_open(ny(y, m, d, 15, 59), Session::Regular));
            assert!(!stock_market_open(ny(y, m, d, 16, 0), Session::Regular));
            assert!(stock_market_open(ny(y, m, d, 4, 0), Session::Extended));
            assert!(!stock_market_open(ny(y, m, d, 20, 0), Session::Extended));
        }
        // Saturday.
        assert!(!stock_market_open(ny(2024, 3, 9, 12, 0), Session::Regular));
        assert!(!stock_market_open(ny(2024, 3, 9, 12, 0), Session::Extended));
    }

    #[test]
    fn the_trading_day_is_new_yorks_date() {
        // 03:00 UTC on the 12th is 23:00 on the 11th in New York (EDT).
        let t = Utc.with_ymd_and_hms(2024, 3, 12, 3, 0, 0).unwrap();
        assert_eq!(trading_day(t), chrono::NaiveDate::from_ymd_opt(2024, 3, 11).unwrap());
        assert!(hours_apply(Timeframe::MIN1) && !hours_apply(Timeframe::DAY1));
    }
}

//! Market hours for stock orders, on the exchange calendar (`crate::calendar`): a trading day's regular
//! session (09:30 to 16:00 America/New_York, 13:00 on an early close), or its extended session (04:00-20:00,
//! to 17:00 on an early close) when `risk.extended_hours = true`. No stock order goes out on a holiday or a
//! weekend, where Alpaca would queue it for the next open. Crypto trades around the clock.
//!
//! **Daily and weekly bars** are not checked: such a decision is taken at (or after) the close and its
//! market order fills in the next session, so the check would only stop every daily replay and backtest.
//! The check applies to intraday timeframes (minutes, hours), against the clock's now, when the order is
//! sent.

use crate::domain::Timeframe;
use chrono::{DateTime, Utc};
use chrono_tz::America::New_York;

pub(crate) use crate::calendar::Session;

/// The trading day an instant belongs to in New York (the date the daily loss limit counts from).
pub(crate) fn trading_day(now: DateTime<Utc>) -> chrono::NaiveDate {
    now.with_timezone(&New_York).date_naive()
}

/// Whether the hours check applies to decisions on bars of this timeframe (intraday only).
pub(crate) fn hours_apply(tf: Timeframe) -> bool {
    matches!(tf, Timeframe::Minutes(_) | Timeframe::Hours(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_trading_day_is_new_yorks_date() {
        // 03:00 UTC on the 12th is 23:00 on the 11th in New York (EDT).
        let t = Utc.with_ymd_and_hms(2024, 3, 12, 3, 0, 0).unwrap();
        assert_eq!(trading_day(t), chrono::NaiveDate::from_ymd_opt(2024, 3, 11).unwrap());
        assert!(hours_apply(Timeframe::MIN1) && !hours_apply(Timeframe::DAY1));
    }
}

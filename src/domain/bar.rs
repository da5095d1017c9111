//! `Bar`: one OHLCV bar of one symbol, checked at construction so that nothing downstream sees a NaN,
//! a negative volume or a high below the low.

use super::{Symbol, Timeframe};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One OHLCV bar. `t` is the bar's open time (Alpaca's convention), in UTC. Prices are split-adjusted
/// before a bar is built (see `data::import`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// The instrument the bar is of.
    pub symbol: Symbol,
    /// The bar's length (one minute, one day, ...); with `t` it fixes the bar's close time.
    pub timeframe: Timeframe,
    /// The bar's open time, in UTC.
    pub t: DateTime<Utc>,
    /// The first trade's price in the bar, in dollars per unit; finite, above zero, within `[l, h]`.
    pub o: f64,
    /// The highest trade price in the bar, in dollars per unit; finite, not below `l`.
    pub h: f64,
    /// The lowest trade price in the bar, in dollars per unit; finite and above zero.
    pub l: f64,
    /// The last trade's price in the bar, in dollars per unit; the price features and fills use.
    pub c: f64,
    /// The units traded during the bar (shares, or coins for crypto); finite and not negative.
    pub v: f64,
}

/// Why `Bar::new` refused a bar: the first of its checks that failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BarError {
    /// A price is NaN, infinite, zero or negative.
    #[error("{field} is {value}: prices must be finite and above zero")]
    BadPrice {
        /// Which price: "open", "high", "low" or "close".
        field: &'static str,
        /// The refused price.
        value: f64,
    },
    /// The volume (the refused value) is NaN, infinite or negative.
    #[error("volume is {0}: must be finite and not negative")]
    BadVolume(f64),
    /// The high lies below the low.
    #[error("high {h} is below low {l}")]
    HighBelowLow {
        /// The bar's high.
        h: f64,
        /// The bar's low.
        l: f64,
    },
    /// The open or the close lies outside `[low, high]` by more than the rounding tolerance.
    #[error("{field} {value} lies outside the bar's range [{l}, {h}]")]
    OutsideRange {
        /// Which price: "open" or "close".
        field: &'static str,
        /// The price outside the range.
        value: f64,
        /// The bar's low.
        l: f64,
        /// The bar's high.
        h: f64,
    },
}

impl Bar {
    /// Builds a checked bar. Open and close must lie within [low, high] up to a relative tolerance of 1e-9
    /// (adjusted data carries rounding), beyond which the bar is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        symbol: Symbol,
        timeframe: Timeframe,
        t: DateTime<Utc>,
        o: f64,
        h: f64,
        l: f64,
        c: f64,
        v: f64,
    ) -> Result<Self, BarError> {
        for (field, value) in [("open", o), ("high", h), ("low", l), ("close", c)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(BarError::BadPrice { field, value });
            }
        }
        if !(v.is_finite() && v >= 0.0) {
            return Err(BarError::BadVolume(v));
        }
        if h < l {
            return Err(BarError::HighBelowLow { h, l });
        }
        let tol = h * 1e-9;
        for (field, value) in [("open", o), ("close", c)] {
            if value > h + tol || value < l - tol {
                return Err(BarError::OutsideRange { field, value, l, h });
            }
        }
        Ok(Bar { symbol, timeframe, t, o, h, l, c, v })
    }

    /// The time the bar closes (open time plus the timeframe's length).
    pub fn close_time(&self) -> DateTime<Utc> {
        self.t + chrono::Duration::seconds(self.timeframe.seconds())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    #[test]
    fn checks_prices_volume_and_range() {
        let s = Symbol::new("AAPL").unwrap();
        let tf = Timeframe::DAY1;
        assert!(Bar::new(s.clone(), tf, t0(), 10.0, 11.0, 9.0, 10.5, 100.0).is_ok());
        assert!(matches!(
            Bar::new(s.clone(), tf, t0(), f64::NAN, 11.0, 9.0, 10.5, 1.0),
            Err(BarError::BadPrice { field: "open", .. })
        ));
        assert!(matches!(Bar::new(s.clone(), tf, t0(), 10.0, 11.0, 9.0, 10.5, -1.0), Err(BarError::BadVolume(_))));
        assert!(matches!(
            Bar::new(s.clone(), tf, t0(), 10.0, 9.0, 11.0, 10.0, 1.0),
            Err(BarError::HighBelowLow { .. })
        ));
        assert!(matches!(
            Bar::new(s, tf, t0(), 10.0, 11.0, 9.0, 12.0, 1.0),
            Err(BarError::OutsideRange { field: "close", .. })
        ));
    }
}

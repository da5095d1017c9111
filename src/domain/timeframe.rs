//! `Timeframe`: the bar length, in Alpaca's spelling (`1Min`, `5Min`, `15Min`, `1Hour`, `1Day`, ...).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A bar length. Minute and hour bars are aligned to the clock; day bars to the trading session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Timeframe {
    /// 1 to 59 minutes (`5Min`).
    Minutes(u16),
    /// 1 to 23 hours (`1Hour`).
    Hours(u16),
    /// One trading day (`1Day`); only 1 is accepted.
    Days(u16),
    /// One week (`1Week`); only 1 is accepted.
    Weeks(u16),
}

/// Text that is not a timeframe Alpaca serves; holds the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timeframe {0:?} is not understood: use e.g. 1Min, 5Min, 15Min, 1Hour, 1Day or 1Week")]
pub struct TimeframeError(pub String);

impl Timeframe {
    /// One-minute bars: what the live stream delivers and the store keeps.
    pub const MIN1: Timeframe = Timeframe::Minutes(1);
    /// Daily bars.
    pub const DAY1: Timeframe = Timeframe::Days(1);

    /// Reads Alpaca's spelling (`15Min`, `1Hour`, `1Day`, `1Week`) or the short one (`15T`, `15m`, `1H`,
    /// `1D`, `1W`), within Alpaca's limits: 1-59 minutes, 1-23 hours, one day, one week.
    pub fn parse(s: &str) -> Result<Self, TimeframeError> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u16 = num.parse().map_err(|_| TimeframeError(s.to_string()))?;
        let tf = match unit {
            "Min" | "T" | "m" => Timeframe::Minutes(n),
            "Hour" | "H" | "h" => Timeframe::Hours(n),
            "Day" | "D" | "d" => Timeframe::Days(n),
            "Week" | "W" | "w" => Timeframe::Weeks(n),
            _ => return Err(TimeframeError(s.to_string())),
        };
        // Alpaca's limits: 1-59 minutes, 1-23 hours, one day, one week.
        let ok = match tf {
            Timeframe::Minutes(n) => (1..=59).contains(&n),
            Timeframe::Hours(n) => (1..=23).contains(&n),
            Timeframe::Days(n) | Timeframe::Weeks(n) => n == 1,
        };
        if ok { Ok(tf) } else { Err(TimeframeError(s.to_string())) }
    }

    /// Nominal length in seconds (a day bar is 86,400 s even though a session is shorter).
    pub fn seconds(self) -> i64 {
        match self {
            Timeframe::Minutes(n) => i64::from(n) * 60,
            Timeframe::Hours(n) => i64::from(n) * 3600,
            Timeframe::Days(n) => i64::from(n) * 86_400,
            Timeframe::Weeks(n) => i64::from(n) * 7 * 86_400,
        }
    }

    /// Stable one-byte tag used in store keys.
    pub fn tag(self) -> u8 {
        match self {
            Timeframe::Minutes(_) => b'm',
            Timeframe::Hours(_) => b'h',
            Timeframe::Days(_) => b'd',
            Timeframe::Weeks(_) => b'w',
        }
    }
}

impl fmt::Display for Timeframe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Timeframe::Minutes(n) => write!(f, "{n}Min"),
            Timeframe::Hours(n) => write!(f, "{n}Hour"),
            Timeframe::Days(n) => write!(f, "{n}Day"),
            Timeframe::Weeks(n) => write!(f, "{n}Week"),
        }
    }
}

impl std::str::FromStr for Timeframe {
    type Err = TimeframeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timeframe::parse(s)
    }
}

impl TryFrom<String> for Timeframe {
    type Error = TimeframeError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Timeframe::parse(&s)
    }
}

impl From<Timeframe> for String {
    fn from(t: Timeframe) -> String {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_alpaca_spellings_and_round_trips() {
        for s in ["1Min", "5Min", "15Min", "1Hour", "4Hour", "1Day", "1Week"] {
            assert_eq!(Timeframe::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Timeframe::parse("15Min").unwrap().seconds(), 900);
    }

    #[test]
    fn rejects_out_of_range_and_garbage() {
        for s in ["0Min", "60Min", "24Hour", "2Day", "Min", "5Sec", ""] {
            assert!(Timeframe::parse(s).is_err(), "{s}");
        }
    }
}

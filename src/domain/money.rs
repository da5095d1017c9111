//! Decimal money on the order path: `Price` (> 0) and `Qty` (> 0). Positions and cash, which may be zero
//! or negative, are plain `Decimal`s.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a `Price` or a `Qty` could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MoneyError {
    /// A price (the refused value) was zero or negative.
    #[error("price {0} must be above zero")]
    NonPositivePrice(Decimal),
    /// A quantity (the refused value) was zero or negative.
    #[error("quantity {0} must be above zero")]
    NonPositiveQty(Decimal),
    /// An `f64` (the refused value) was NaN or infinite.
    #[error("{0} is not a finite number")]
    NotFinite(f64),
    /// Text (the refused text) that does not parse as a decimal number.
    #[error("{0:?} is not a decimal number")]
    Parse(String),
}

/// A price per unit, strictly positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "Decimal", into = "Decimal")]
pub struct Price(Decimal);

/// A quantity of units in an order, strictly positive (fractional where the asset allows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "Decimal", into = "Decimal")]
pub struct Qty(Decimal);

macro_rules! positive_decimal {
    ($ty:ident, $err:ident) => {
        impl $ty {
            /// Checks an exact decimal: refused unless strictly above zero.
            pub fn new(d: Decimal) -> Result<Self, MoneyError> {
                if d > Decimal::ZERO { Ok($ty(d)) } else { Err(MoneyError::$err(d)) }
            }

            /// From an `f64` (a model output or a feature), refusing NaN and infinities.
            pub fn from_f64(x: f64) -> Result<Self, MoneyError> {
                if !x.is_finite() {
                    return Err(MoneyError::NotFinite(x));
                }
                // The shortest text that round-trips (0.1 is 0.1, not 0.1000000000000000055...), else the
                // binary value exactly.
                let d = x
                    .to_string()
                    .parse::<Decimal>()
                    .ok()
                    .or_else(|| Decimal::from_f64_retain(x))
                    .ok_or(MoneyError::NotFinite(x))?;
                Self::new(d.normalize())
            }

            /// The exact decimal value (dollars per unit for a `Price`, units for a `Qty`).
            pub fn get(self) -> Decimal {
                self.0
            }
        }

        impl TryFrom<Decimal> for $ty {
            type Error = MoneyError;
            fn try_from(d: Decimal) -> Result<Self, MoneyError> {
                $ty::new(d)
            }
        }

        impl From<$ty> for Decimal {
            fn from(v: $ty) -> Decimal {
                v.0
            }
        }

        impl std::str::FromStr for $ty {
            type Err = MoneyError;
            fn from_str(s: &str) -> Result<Self, MoneyError> {
                let d: Decimal = s.trim().parse().map_err(|_| MoneyError::Parse(s.to_string()))?;
                $ty::new(d)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

positive_decimal!(Price, NonPositivePrice);
positive_decimal!(Qty, NonPositiveQty);

impl Price {
    /// Notional value of `qty` units at this price.
    pub fn notional(self, qty: Qty) -> Decimal {
        self.0 * qty.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn constructors_are_checked() {
        assert!(Price::new(Decimal::ZERO).is_err());
        assert!(Qty::from_str("-1").is_err());
        assert!(Qty::from_f64(f64::NAN).is_err());
        assert!(Price::from_str("abc").is_err());
        let p = Price::from_str("187.25").unwrap();
        let q = Qty::from_str("2.5").unwrap();
        assert_eq!(p.notional(q), Decimal::from_str("468.125").unwrap());
    }

    #[test]
    fn serde_refuses_non_positive() {
        assert!(serde_json::from_str::<Price>("\"0\"").is_err());
        assert_eq!(serde_json::from_str::<Qty>("\"3\"").unwrap().get(), Decimal::from(3));
    }
}

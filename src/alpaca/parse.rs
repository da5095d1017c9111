//! Conversion from `wire` types into domain types, once, with errors that name the field. Frames are
//! parsed message by message: a bad message becomes a `ParseError` in the outcome (and a log line), the
//! rest of the frame is still delivered, and an unknown `T`/`stream` is skipped. Nothing here panics on
//! any input (the property tests in `parse/tests.rs` and the `fuzz/` targets check that).

mod market;
mod rest;
mod updates;

pub use market::{market_frame, market_message};
pub use rest::{account, asset, bars_page, calendar_day, clock, order, order_value, position};
pub use updates::{updates_frame, updates_message};

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::str::FromStr;

/// Why a message from Alpaca could not be turned into a domain value.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON, or not the shape of the message expected.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A field's value is not what Alpaca documents (a bad number, time or enum value).
    #[error("field {field}: {value:?} {reason}")]
    Field {
        /// The JSON field, as Alpaca names it.
        field: &'static str,
        /// Its value as received.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The message held a bar that breaks the bar rules (e.g. high below low).
    #[error("bad bar: {0}")]
    Bar(#[from] crate::domain::BarError),
    /// The message held a symbol tradebot cannot use.
    #[error("bad symbol: {0}")]
    Symbol(#[from] crate::domain::SymbolError),
    /// The message held an order id that is not a valid id.
    #[error("bad order id: {0}")]
    Id(#[from] crate::domain::IdError),
}

/// What a frame held: the items understood, the messages skipped as unknown, and the ones refused.
#[derive(Debug)]
pub struct Frame<T> {
    /// The messages understood, in frame order.
    pub items: Vec<T>,
    /// Messages skipped because their `T` or `stream` is not one tradebot knows.
    pub unknown: usize,
    /// One error for each message refused.
    pub errors: Vec<ParseError>,
}

impl<T> Default for Frame<T> {
    fn default() -> Self {
        Frame { items: Vec::new(), unknown: 0, errors: Vec::new() }
    }
}

impl<T> Frame<T> {
    fn push(&mut self, r: Result<Option<T>, ParseError>) {
        match r {
            Ok(Some(item)) => self.items.push(item),
            Ok(None) => self.unknown += 1,
            Err(e) => {
                log::warn!("alpaca: skipped a malformed message: {e}");
                self.errors.push(e);
            }
        }
    }
}

fn field_err(field: &'static str, value: &str, reason: impl Into<String>) -> ParseError {
    let value: String = value.chars().take(64).collect();
    ParseError::Field { field, value, reason: reason.into() }
}

/// RFC 3339 with 0 to 9 fractional digits and any offset, into UTC.
pub fn time(field: &'static str, s: &str) -> Result<DateTime<Utc>, ParseError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| field_err(field, s, format!("is not an RFC 3339 time: {e}")))
}

fn opt_time(field: &'static str, s: &Option<String>) -> Result<Option<DateTime<Utc>>, ParseError> {
    s.as_deref().map(|s| time(field, s)).transpose()
}

/// The largest magnitude a broker number may have: 10^12 (a trillion dollars or units), far beyond any
/// account, so that the order manager's sums and products of quantities and prices (up to ~10^24) never
/// overflow a `Decimal` (~7.9 x 10^28), which would panic.
pub const MAX_ABS: Decimal = Decimal::from_parts(3_567_587_328, 232, 0, false, 0);

/// A decimal sent as a JSON string, within `MAX_ABS`.
pub fn decimal(field: &'static str, s: &str) -> Result<Decimal, ParseError> {
    let d = Decimal::from_str(s.trim())
        .or_else(|_| Decimal::from_scientific(s.trim()))
        .map_err(|_| field_err(field, s, "is not a decimal number"))?;
    if d.abs() > MAX_ABS {
        return Err(field_err(field, s, "is out of range (magnitude above 10^12)"));
    }
    Ok(d)
}

fn opt_decimal(field: &'static str, s: &Option<String>) -> Result<Option<Decimal>, ParseError> {
    s.as_deref().filter(|s| !s.is_empty()).map(|s| decimal(field, s)).transpose()
}

fn finite(field: &'static str, x: f64) -> Result<f64, ParseError> {
    if x.is_finite() { Ok(x) } else { Err(field_err(field, &x.to_string(), "is not finite")) }
}

#[cfg(test)]
mod tests;

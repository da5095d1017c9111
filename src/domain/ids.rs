//! Order identifiers: our deterministic `ClientOrderId` and the broker's `OrderId`.

use super::Symbol;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why an order id was refused (from our own store, the control socket or the broker's wire).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A `ClientOrderId` was empty.
    #[error("client_order_id is empty")]
    Empty,
    /// A `ClientOrderId` (the refused text) exceeds Alpaca's 48-character limit.
    #[error("client_order_id {0:?} is longer than 48 characters")]
    TooLong(String),
    /// A `ClientOrderId` (the refused text) holds a character outside `[A-Za-z0-9_.-]`.
    #[error("client_order_id {0:?} may hold only A-Z, a-z, 0-9, '-', '_' and '.'")]
    BadChar(String),
    /// A broker `OrderId` was empty or only whitespace.
    #[error("order id is empty")]
    EmptyOrderId,
}

/// Our id for an order, at most 48 characters of `[A-Za-z0-9_.-]`. Derived deterministically from the
/// decision that caused the order, so a resend after a crash carries the same id and the broker refuses
/// the duplicate instead of trading twice.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClientOrderId(String);

impl ClientOrderId {
    /// The longest `client_order_id` Alpaca accepts, in characters.
    pub const MAX_LEN: usize = 48;

    /// Checks an id read back from the store, the wire or a person: non-empty, at most `MAX_LEN`
    /// characters, only `[A-Za-z0-9_.-]`.
    pub fn new(s: &str) -> Result<Self, IdError> {
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > Self::MAX_LEN {
            return Err(IdError::TooLong(s.to_string()));
        }
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(IdError::BadChar(s.to_string()));
        }
        Ok(ClientOrderId(s.to_string()))
    }

    /// `tb-{strategy}-{symbol}-{bar unix seconds}-{seq}`; the strategy's letters and digits, and when
    /// there are more than 8, their first 4 and 4 hex digits of their CRC-32 (so "momentum-fast" and
    /// "momentum-slow" do not collide); the symbol's `/` becomes `_`. The longest possible result (8-char
    /// strategy, 15-char symbol, 11-digit time, u16 sequence) is 45 characters.
    pub fn derive(strategy: &str, symbol: &Symbol, bar_time: DateTime<Utc>, seq: u16) -> Self {
        let full: String = strategy.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let strat = match full.len() {
            0 => "s".to_string(),
            1..=8 => full,
            _ => format!("{}{:04x}", &full[..4], crc32fast::hash(full.as_bytes()) & 0xffff),
        };
        let sym = symbol.as_str().replace('/', "_");
        ClientOrderId(format!("tb-{strat}-{sym}-{}-{seq}", bar_time.timestamp()))
    }

    /// The id as sent to the broker in `client_order_id`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ClientOrderId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        ClientOrderId::new(&s)
    }
}

impl From<ClientOrderId> for String {
    fn from(c: ClientOrderId) -> String {
        c.0
    }
}

impl fmt::Display for ClientOrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The broker's id for an order (Alpaca: a UUID). Opaque to us; only checked to be non-empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OrderId(String);

impl OrderId {
    /// Wraps the broker's id as received; refuses only an empty or all-whitespace one.
    pub fn new(s: &str) -> Result<Self, IdError> {
        if s.trim().is_empty() { Err(IdError::EmptyOrderId) } else { Ok(OrderId(s.to_string())) }
    }

    /// The id exactly as the broker sent it (the `id` of Alpaca's order object).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OrderId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        OrderId::new(&s)
    }
}

impl From<OrderId> for String {
    fn from(c: OrderId) -> String {
        c.0
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn checks_length_and_charset() {
        assert!(ClientOrderId::new("").is_err());
        assert!(ClientOrderId::new(&"a".repeat(48)).is_ok());
        assert!(matches!(ClientOrderId::new(&"a".repeat(49)), Err(IdError::TooLong(_))));
        assert!(matches!(ClientOrderId::new("a b"), Err(IdError::BadChar(_))));
        assert!(OrderId::new(" ").is_err());
    }

    #[test]
    fn derive_is_deterministic_and_distinct() {
        let s = Symbol::new("BTC/USD").unwrap();
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let a = ClientOrderId::derive("ppo", &s, t, 0);
        assert_eq!(a, ClientOrderId::derive("ppo", &s, t, 0));
        assert_eq!(a.as_str(), "tb-ppo-BTC_USD-1700000000-0");
        assert_ne!(a, ClientOrderId::derive("ppo", &s, t, 1));
        // Long names keep 4 letters and a hash: no collision between names sharing 8 first letters.
        let fast = ClientOrderId::derive("momentum-fast", &s, t, 0);
        let slow = ClientOrderId::derive("momentum-slow", &s, t, 0);
        assert_ne!(fast, slow);
        assert!(fast.as_str().starts_with("tb-mome") && fast.as_str().len() == slow.as_str().len(), "{fast}");
        assert!(ClientOrderId::derive("engine", &s, t, 0).as_str().starts_with("tb-engine-"), "short names unchanged");
    }

    proptest! {
        #[test]
        fn derived_ids_always_valid(strategy in ".{0,40}", sym in "[A-Z]{1,7}(/[A-Z]{1,7})?", secs in 0i64..=99_999_999_999, seq: u16) {
            let s = Symbol::new(&sym).unwrap();
            let t = DateTime::from_timestamp(secs, 0).unwrap();
            let id = ClientOrderId::derive(&strategy, &s, t, seq);
            prop_assert!(ClientOrderId::new(id.as_str()).is_ok(), "{}", id);
        }
    }
}

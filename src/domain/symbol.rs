//! `Symbol`: a checked ticker (stocks `AAPL`, `BRK.B`; crypto pairs `BTC/USD`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A ticker symbol: 1 to 15 characters of `A-Z`, `0-9`, `.`, `/` and `-`, starting with a letter or digit.
/// Lower-case input is upper-cased, so `aapl` and `AAPL` are the same symbol.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Symbol(String);

/// Why text is not a symbol at all (from the config, the store, a CSV file or the wire).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SymbolError {
    /// The text was empty or only whitespace.
    #[error("symbol is empty")]
    Empty,
    /// The symbol (upper-cased) exceeds `Symbol::MAX_LEN` characters.
    #[error("symbol {0:?} is longer than 15 characters")]
    TooLong(String),
    /// The text as given holds a character outside `A-Z 0-9 . / -`, or starts with `.`, `/` or `-`.
    #[error("symbol {0:?} has a character outside A-Z, 0-9, '.', '/', '-'")]
    BadChar(String),
}

/// A symbol that is valid but not written as Alpaca writes its asset class; the message is the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpellingError {
    /// A crypto pair written with a dash (`BTC-USD`) instead of Alpaca's slash.
    #[error("crypto symbols are written {base}/{quote} (Alpaca's pair naming): write \"{base}/{quote}\"")]
    CryptoDash {
        /// The pair's first part, the coin traded (`BTC`).
        base: String,
        /// The pair's second part, the currency it is priced in (`USD`).
        quote: String,
    },
    /// A stock's share class written with a dash (`BRK-B`); holds the dotted spelling to write (`BRK.B`).
    #[error(
        "Alpaca writes a stock's share class with a dot: write \"{0}\"; crypto pairs are written BASE/QUOTE, e.g. \"BTC/USD\""
    )]
    ShareClass(String),
    /// Something with a slash that is not `BASE/QUOTE` with a known quote currency (`BTC/USD/X`, `BTC/EUR`).
    #[error("crypto pairs are written BASE/QUOTE with the quote one of {}, e.g. \"BTC/USD\"", CRYPTO_QUOTES.join(", "))]
    CryptoPair,
}

/// The quote currencies of Alpaca's crypto pairs (`BTC/USD`, `ETH/BTC`, `SOL/USDT`).
const CRYPTO_QUOTES: [&str; 4] = ["USD", "USDT", "USDC", "BTC"];

impl Symbol {
    /// The longest symbol accepted, in characters.
    pub const MAX_LEN: usize = 15;

    /// Checks and normalizes a symbol: trimmed, upper-cased, then held to the rules above.
    pub fn new(raw: &str) -> Result<Self, SymbolError> {
        let s = raw.trim().to_ascii_uppercase();
        if s.is_empty() {
            return Err(SymbolError::Empty);
        }
        if s.len() > Self::MAX_LEN {
            return Err(SymbolError::TooLong(s));
        }
        let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if !first_ok || !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-')) {
            return Err(SymbolError::BadChar(raw.to_string()));
        }
        Ok(Symbol(s))
    }

    /// The normalized symbol (upper case), as sent to Alpaca and used as a store key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Crypto pairs (`BTC/USD`) trade around the clock; stocks follow the exchange calendar.
    pub fn is_crypto(&self) -> bool {
        self.0.contains('/')
    }

    /// Whether the symbol is written as Alpaca writes its asset class, or the fix: crypto pairs as
    /// `BASE/QUOTE` (`BTC/USD`, not `BTC-USD` or `BTC/USD/X`), stocks with a dot before a share class
    /// (`BRK.B`, not `BRK-B`). Checked where a person writes symbols (the config); stored bars keep
    /// whatever their source called them.
    pub fn alpaca_spelling(&self) -> Result<(), SpellingError> {
        let s = self.0.as_str();
        let quote_of = |q: &str| CRYPTO_QUOTES.contains(&q);
        if let Some((base, quote)) = s.split_once('-') {
            let alnum = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_alphanumeric());
            if quote_of(quote) && alnum(base) {
                return Err(SpellingError::CryptoDash { base: base.to_string(), quote: quote.to_string() });
            }
            return Err(SpellingError::ShareClass(s.replace('-', ".")));
        }
        if let Some((base, quote)) = s.split_once('/') {
            let letters = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_alphanumeric());
            if !letters(base) || !quote_of(quote) {
                return Err(SpellingError::CryptoPair);
            }
        }
        Ok(())
    }
}

impl TryFrom<String> for Symbol {
    type Error = SymbolError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Symbol::new(&s)
    }
}

impl From<Symbol> for String {
    fn from(s: Symbol) -> String {
        s.0
    }
}

impl std::str::FromStr for Symbol {
    type Err = SymbolError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Symbol::new(s)
    }
}

/// Symbols as people read them in a message: `AAPL, MSFT, IBM`.
pub fn symbol_list(symbols: &[Symbol]) -> String {
    symbols.iter().map(Symbol::as_str).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_stocks_and_crypto_and_uppercases() {
        assert_eq!(Symbol::new("aapl").unwrap().as_str(), "AAPL");
        assert_eq!(Symbol::new("BRK.B").unwrap().as_str(), "BRK.B");
        assert!(Symbol::new("BTC/USD").unwrap().is_crypto());
        assert!(!Symbol::new("MSFT").unwrap().is_crypto());
    }

    #[test]
    fn rejects_bad_symbols() {
        assert_eq!(Symbol::new(" "), Err(SymbolError::Empty));
        assert!(matches!(Symbol::new("ABCDEFGHIJKLMNOP"), Err(SymbolError::TooLong(_))));
        assert!(matches!(Symbol::new("AA PL"), Err(SymbolError::BadChar(_))));
        assert!(matches!(Symbol::new("/USD"), Err(SymbolError::BadChar(_))));
    }
}

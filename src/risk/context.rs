//! What the risk checks need to know besides the order: the account (equity, cash, positions with their
//! last prices), the bar and the clock, whether the decision's inputs were finite, and each symbol's asset
//! rules (tradable, fractionable, minimum order size, quantity and price increments; crypto or stock: the
//! daemon reads them from Alpaca's assets endpoint).

use crate::domain::{Symbol, Timeframe};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashMap};

/// One symbol's holding as the engine knows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Holding {
    /// Units held (negative when short).
    pub qty: Decimal,
    /// The last price seen (the last bar's close).
    pub price: f64,
}

/// The broker's rules for one symbol.
#[derive(Debug, Clone, PartialEq)]
pub struct AssetRules {
    pub tradable: bool,
    pub fractionable: bool,
    pub min_order_size: Option<Decimal>,
    /// Quantities must be whole multiples of this (Alpaca's `min_trade_increment`, crypto pairs).
    pub min_trade_increment: Option<Decimal>,
    /// Limit prices must be whole multiples of this (Alpaca's `price_increment`).
    pub price_increment: Option<Decimal>,
    /// Crypto trades around the clock, takes `gtc` orders and a $1 minimum; stocks follow the exchange's
    /// hours and take `day` orders.
    pub crypto: bool,
}

impl AssetRules {
    /// What is assumed for a symbol with no asset record (simulated broker, backtests): tradable, whole
    /// units for stocks, fractional for crypto, no minimum size or increment; crypto when its name is a
    /// pair (`BTC/USD`, Alpaca's naming).
    pub fn assumed(symbol: &Symbol) -> Self {
        let crypto = symbol.is_crypto();
        AssetRules {
            tradable: true,
            fractionable: crypto,
            min_order_size: None,
            min_trade_increment: None,
            price_increment: None,
            crypto,
        }
    }
}

/// Everything around one order that the checks look at.
#[derive(Debug, Clone, Copy)]
pub struct RiskContext<'a> {
    pub equity: Decimal,
    pub cash: Decimal,
    /// Holdings by symbol; a symbol absent here is flat. The ordered symbol's entry gives its held units.
    pub positions: &'a BTreeMap<Symbol, Holding>,
    /// When the bar the decision was taken on closed (`Bar::close_time`).
    pub bar_time: DateTime<Utc>,
    pub timeframe: Timeframe,
    /// The engine clock's now (wall clock live, bar clock in replays and backtests).
    pub now: DateTime<Utc>,
    /// False when any feature or model output of the decision was NaN or infinite.
    pub inputs_finite: bool,
    /// Per-symbol rules; a symbol absent here gets `AssetRules::assumed`.
    pub assets: &'a HashMap<Symbol, AssetRules>,
}

impl RiskContext<'_> {
    pub fn held(&self, symbol: &Symbol) -> Decimal {
        self.positions.get(symbol).map_or(Decimal::ZERO, |h| h.qty)
    }

    pub fn rules(&self, symbol: &Symbol) -> AssetRules {
        self.assets.get(symbol).cloned().unwrap_or_else(|| AssetRules::assumed(symbol))
    }
}

/// `x` as a decimal, `None` when it is not finite. Shortest round-trip text, so 0.05 is exactly 0.05.
pub(super) fn dec(x: f64) -> Option<Decimal> {
    if !x.is_finite() {
        return None;
    }
    x.to_string().parse::<Decimal>().ok().or_else(|| Decimal::from_f64_retain(x))
}

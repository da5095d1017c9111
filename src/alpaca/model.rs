//! Account-level facts the trading REST API returns, in domain terms: account, clock, trading days,
//! assets, positions. Built by `parse` from `wire::rest`.

use crate::domain::Symbol;
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;

#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    pub id: String,
    pub status: String,
    pub cash: Decimal,
    pub buying_power: Decimal,
    pub equity: Decimal,
    /// Any of trading_blocked, account_blocked, trade_suspended_by_user.
    pub blocked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MarketClock {
    pub timestamp: DateTime<Utc>,
    pub is_open: bool,
    pub next_open: DateTime<Utc>,
    pub next_close: DateTime<Utc>,
}

/// One trading day; open and close are exchange (New York) wall-clock times converted to UTC.
#[derive(Debug, Clone, PartialEq)]
pub struct TradingDay {
    pub date: NaiveDate,
    pub open: DateTime<Utc>,
    pub close: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Asset {
    pub symbol: Symbol,
    pub class: String,
    pub tradable: bool,
    pub fractionable: bool,
    pub shortable: bool,
    pub min_order_size: Option<Decimal>,
    pub min_trade_increment: Option<Decimal>,
    pub price_increment: Option<Decimal>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    /// As Alpaca names it: crypto positions without the pair's slash (`BTCUSD`), unlike orders and assets.
    pub symbol: Symbol,
    /// `us_equity` or `crypto`.
    pub class: String,
    /// Negative when short.
    pub qty: Decimal,
    pub avg_entry_price: Decimal,
    pub market_value: Option<Decimal>,
    pub current_price: Option<Decimal>,
}

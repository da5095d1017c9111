//! Account-level facts the trading REST API returns, in domain terms: account, clock, trading days,
//! assets, positions. Built by `parse` from `wire::rest`.

use crate::domain::Symbol;
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;

/// The trading account (GET `/v2/account`), as the risk checks and `status` use it.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    /// Alpaca's account id (a UUID).
    pub id: String,
    /// Alpaca's account `status` as sent, e.g. `ACTIVE`, `ONBOARDING`.
    pub status: String,
    /// Cash balance, in dollars (negative when on margin).
    pub cash: Decimal,
    /// What Alpaca lets the account spend on new orders now, in dollars.
    pub buying_power: Decimal,
    /// Cash plus the market value of the positions, in dollars.
    pub equity: Decimal,
    /// Any of trading_blocked, account_blocked, trade_suspended_by_user.
    pub blocked: bool,
}

/// The market clock (GET `/v2/clock`): whether the US stock market is open now, and its next open and close.
#[derive(Debug, Clone, PartialEq)]
pub struct MarketClock {
    /// Alpaca's time when it answered (UTC).
    pub timestamp: DateTime<Utc>,
    /// Whether the stock market is in its regular session at `timestamp`.
    pub is_open: bool,
    /// The start of the next regular session (UTC).
    pub next_open: DateTime<Utc>,
    /// The end of the current regular session, or of the next one when closed (UTC).
    pub next_close: DateTime<Utc>,
}

/// One trading day; open and close are exchange (New York) wall-clock times converted to UTC.
#[derive(Debug, Clone, PartialEq)]
pub struct TradingDay {
    /// The exchange date of the session (New York).
    pub date: NaiveDate,
    /// When the regular session opens (UTC).
    pub open: DateTime<Utc>,
    /// When it closes (UTC; early on half days).
    pub close: DateTime<Utc>,
}

/// One instrument Alpaca lists (GET `/v2/assets/{symbol}`): what may be traded and in what sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Asset {
    /// The instrument's symbol, crypto pairs with their slash (`BTC/USD`).
    pub symbol: Symbol,
    /// Alpaca's asset class: `us_equity` or `crypto`.
    pub class: String,
    /// Whether Alpaca accepts orders for it at all.
    pub tradable: bool,
    /// Whether orders may be for fractions of a share (or coin).
    pub fractionable: bool,
    /// Whether it may be sold short.
    pub shortable: bool,
    /// Smallest order quantity (crypto), in units; `None` when Alpaca gives none.
    pub min_order_size: Option<Decimal>,
    /// Step of order quantities (crypto), in units; `None` when Alpaca gives none.
    pub min_trade_increment: Option<Decimal>,
    /// Step of limit and stop prices (crypto), in dollars; `None` when Alpaca gives none.
    pub price_increment: Option<Decimal>,
}

/// One open position as the broker (Alpaca) reports it (GET `/v2/positions`), for reconciliation and `status`; the
/// trading core's own position, the one the execution rule keeps, is `exec::Position`.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerPosition {
    /// As Alpaca names it: crypto positions without the pair's slash (`BTCUSD`), unlike orders and assets.
    pub symbol: Symbol,
    /// `us_equity` or `crypto`.
    pub class: String,
    /// Negative when short.
    pub qty: Decimal,
    /// Average price paid for the units held, in dollars per unit.
    pub avg_entry_price: Decimal,
    /// Value of the position at `current_price`, in dollars (negative when short); `None` when Alpaca sends none.
    pub market_value: Option<Decimal>,
    /// Alpaca's last price for the instrument, in dollars; `None` when Alpaca sends none.
    pub current_price: Option<Decimal>,
}

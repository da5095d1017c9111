//! Trading REST (`/v2/...`) and market-data REST objects. Decimals are JSON strings and stay `String`s
//! here; absent values are `null`. Conversion and checking happen in `parse`.

use super::market::Bar;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Error body: `{"code": 40310000, "message": "..."}`; `code` is sometimes missing, extra fields appear.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    #[serde(default)]
    pub message: String,
}

/// `GET /v2/account`. Money fields are strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub id: String,
    #[serde(default)]
    pub account_number: Option<String>,
    pub status: String,
    #[serde(default)]
    pub crypto_status: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
    pub cash: String,
    pub buying_power: String,
    #[serde(default)]
    pub regt_buying_power: Option<String>,
    #[serde(default)]
    pub daytrading_buying_power: Option<String>,
    #[serde(default)]
    pub non_marginable_buying_power: Option<String>,
    #[serde(default)]
    pub portfolio_value: Option<String>,
    pub equity: String,
    #[serde(default)]
    pub last_equity: Option<String>,
    #[serde(default)]
    pub long_market_value: Option<String>,
    #[serde(default)]
    pub short_market_value: Option<String>,
    #[serde(default)]
    pub initial_margin: Option<String>,
    #[serde(default)]
    pub maintenance_margin: Option<String>,
    #[serde(default)]
    pub multiplier: Option<String>,
    #[serde(default)]
    pub daytrade_count: Option<i64>,
    #[serde(default)]
    pub pattern_day_trader: Option<bool>,
    #[serde(default)]
    pub trading_blocked: Option<bool>,
    #[serde(default)]
    pub transfers_blocked: Option<bool>,
    #[serde(default)]
    pub account_blocked: Option<bool>,
    #[serde(default)]
    pub trade_suspended_by_user: Option<bool>,
    #[serde(default)]
    pub shorting_enabled: Option<bool>,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// `GET /v2/clock`; times carry the US/Eastern offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub timestamp: String,
    pub is_open: bool,
    pub next_open: String,
    pub next_close: String,
}

/// One element of `GET /v2/calendar`: `open`/`close` `HH:MM` ET, `session_*` `HHMM`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarDay {
    pub date: String,
    pub open: String,
    pub close: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_open: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_close: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settlement_date: Option<String>,
}

/// `GET /v2/assets` / `GET /v2/assets/{symbol}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Asset {
    pub id: String,
    pub class: String,
    #[serde(default)]
    pub exchange: String,
    pub symbol: String,
    #[serde(default)]
    pub name: String,
    pub status: String,
    pub tradable: bool,
    #[serde(default)]
    pub marginable: bool,
    #[serde(default)]
    pub shortable: bool,
    #[serde(default)]
    pub easy_to_borrow: bool,
    #[serde(default)]
    pub fractionable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_order_size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_trade_increment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_increment: Option<String>,
}

/// The order object (REST replies and the `order` of trade updates).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: String,
    pub client_order_id: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub submitted_at: Option<String>,
    #[serde(default)]
    pub filled_at: Option<String>,
    #[serde(default)]
    pub expired_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub canceled_at: Option<String>,
    #[serde(default)]
    pub failed_at: Option<String>,
    #[serde(default)]
    pub replaced_at: Option<String>,
    #[serde(default)]
    pub replaced_by: Option<String>,
    #[serde(default)]
    pub replaces: Option<String>,
    #[serde(default)]
    pub asset_id: Option<String>,
    pub symbol: String,
    #[serde(default)]
    pub asset_class: Option<String>,
    #[serde(default)]
    pub notional: Option<String>,
    #[serde(default)]
    pub qty: Option<String>,
    #[serde(default)]
    pub filled_qty: Option<String>,
    #[serde(default)]
    pub filled_avg_price: Option<String>,
    #[serde(default)]
    pub order_class: Option<String>,
    #[serde(default)]
    pub order_type: Option<String>,
    #[serde(rename = "type")]
    pub kind: OrderType,
    pub side: Side,
    pub time_in_force: TimeInForce,
    #[serde(default)]
    pub limit_price: Option<String>,
    #[serde(default)]
    pub stop_price: Option<String>,
    pub status: OrderStatus,
    #[serde(default)]
    pub extended_hours: bool,
    #[serde(default)]
    pub legs: Option<Vec<Order>>,
    #[serde(default)]
    pub trail_percent: Option<String>,
    #[serde(default)]
    pub trail_price: Option<String>,
    #[serde(default)]
    pub hwm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_intent: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    #[default]
    New,
    PartiallyFilled,
    Filled,
    DoneForDay,
    Canceled,
    Expired,
    Replaced,
    PendingCancel,
    PendingReplace,
    PendingReview,
    Accepted,
    PendingNew,
    AcceptedForBidding,
    Stopped,
    Rejected,
    Suspended,
    Calculated,
    Held,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    #[default]
    Buy,
    Sell,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderType {
    #[default]
    Market,
    Limit,
    Stop,
    StopLimit,
    TrailingStop,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeInForce {
    #[default]
    Day,
    Gtc,
    Opg,
    Cls,
    Ioc,
    Fok,
    #[serde(other)]
    Unknown,
}

/// `POST /v2/orders` body (only the fields tradebot sends; decimals as strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderRequest {
    pub symbol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notional: Option<String>,
    pub side: Side,
    #[serde(rename = "type")]
    pub kind: OrderType,
    pub time_in_force: TimeInForce,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_price: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_price: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_hours: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_order_id: Option<String>,
}

/// `GET /v2/positions[/{symbol}]`; short quantities are negative.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub asset_id: String,
    pub symbol: String,
    #[serde(default)]
    pub exchange: String,
    #[serde(default)]
    pub asset_class: String,
    #[serde(default)]
    pub asset_marginable: Option<bool>,
    pub avg_entry_price: String,
    pub qty: String,
    #[serde(default)]
    pub qty_available: Option<String>,
    pub side: String,
    #[serde(default)]
    pub market_value: Option<String>,
    #[serde(default)]
    pub cost_basis: Option<String>,
    #[serde(default)]
    pub unrealized_pl: Option<String>,
    #[serde(default)]
    pub unrealized_plpc: Option<String>,
    #[serde(default)]
    pub unrealized_intraday_pl: Option<String>,
    #[serde(default)]
    pub unrealized_intraday_plpc: Option<String>,
    #[serde(default)]
    pub current_price: Option<String>,
    #[serde(default)]
    pub lastday_price: Option<String>,
    #[serde(default)]
    pub change_today: Option<String>,
}

/// One element of a 207 multi-status reply (`DELETE /v2/orders`, `DELETE /v2/positions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// `GET /v2/stocks/bars?symbols=..` (and crypto): bars keyed by symbol, ordered by symbol then time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BarsPage {
    #[serde(default)]
    pub bars: BTreeMap<String, Vec<Bar>>,
    #[serde(default)]
    pub next_page_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

//! Trading REST (`/v2/...`) and market-data REST objects. Decimals are JSON strings and stay `String`s
//! here; absent values are `null`. Conversion and checking happen in `parse`.

use super::market::Bar;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Error body: `{"code": 40310000, "message": "..."}`; `code` is sometimes missing, extra fields appear.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Alpaca's numeric error code, e.g. 40310000; absent on some errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// What Alpaca says went wrong.
    #[serde(default)]
    pub message: String,
}

/// `GET /v2/account`. Money fields are strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// The account's id (a UUID).
    pub id: String,
    /// The account number shown to people, e.g. `PA...` for paper.
    #[serde(default)]
    pub account_number: Option<String>,
    /// `ACTIVE`, `ONBOARDING`, ...; only `ACTIVE` may trade.
    pub status: String,
    /// The account's crypto trading status (`ACTIVE`, ...).
    #[serde(default)]
    pub crypto_status: Option<String>,
    /// The account's currency, `USD`.
    #[serde(default)]
    pub currency: Option<String>,
    /// Cash, in dollars (a decimal string; negative on margin).
    pub cash: String,
    /// What may be spent on new orders now, in dollars (a decimal string).
    pub buying_power: String,
    /// Reg T buying power, in dollars (a decimal string).
    #[serde(default)]
    pub regt_buying_power: Option<String>,
    /// Day-trading buying power, in dollars (a decimal string).
    #[serde(default)]
    pub daytrading_buying_power: Option<String>,
    /// Buying power for non-marginable assets (crypto), in dollars (a decimal string).
    #[serde(default)]
    pub non_marginable_buying_power: Option<String>,
    /// Deprecated: the same as `equity`.
    #[serde(default)]
    pub portfolio_value: Option<String>,
    /// Cash plus positions' market value, in dollars (a decimal string).
    pub equity: String,
    /// Equity at the previous close, in dollars (a decimal string).
    #[serde(default)]
    pub last_equity: Option<String>,
    /// Market value of the long positions, in dollars (a decimal string).
    #[serde(default)]
    pub long_market_value: Option<String>,
    /// Market value of the short positions, in dollars (a decimal string).
    #[serde(default)]
    pub short_market_value: Option<String>,
    /// Initial margin requirement, in dollars (a decimal string).
    #[serde(default)]
    pub initial_margin: Option<String>,
    /// Maintenance margin requirement, in dollars (a decimal string).
    #[serde(default)]
    pub maintenance_margin: Option<String>,
    /// Buying power multiplier: `"1"` cash, `"2"` margin, `"4"` pattern day trader.
    #[serde(default)]
    pub multiplier: Option<String>,
    /// Day trades in the last five trading days.
    #[serde(default)]
    pub daytrade_count: Option<i64>,
    /// Whether the account is flagged as a pattern day trader.
    #[serde(default)]
    pub pattern_day_trader: Option<bool>,
    /// True when the account may not place orders.
    #[serde(default)]
    pub trading_blocked: Option<bool>,
    /// True when the account may not move money in or out.
    #[serde(default)]
    pub transfers_blocked: Option<bool>,
    /// True when the whole account is blocked.
    #[serde(default)]
    pub account_blocked: Option<bool>,
    /// True when the owner suspended trading themselves.
    #[serde(default)]
    pub trade_suspended_by_user: Option<bool>,
    /// Whether the account may sell short.
    #[serde(default)]
    pub shorting_enabled: Option<bool>,
    /// When the account was opened, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// `GET /v2/clock`; times carry the US/Eastern offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// Alpaca's time now, RFC 3339 with the US/Eastern offset.
    pub timestamp: String,
    /// Whether the stock market is in its regular session now.
    pub is_open: bool,
    /// The next regular session's start, RFC 3339, US/Eastern offset.
    pub next_open: String,
    /// The current or next regular session's end, RFC 3339, US/Eastern offset.
    pub next_close: String,
}

/// One element of `GET /v2/calendar`: `open`/`close` `HH:MM` ET, `session_*` `HHMM`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarDay {
    /// The exchange date, `YYYY-MM-DD`.
    pub date: String,
    /// The regular session's open, `HH:MM` New York time.
    pub open: String,
    /// The regular session's close, `HH:MM` New York time (early on half days).
    pub close: String,
    /// The extended session's start, `HHMM` New York time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_open: Option<String>,
    /// The extended session's end, `HHMM` New York time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_close: Option<String>,
    /// The date trades of this day settle, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settlement_date: Option<String>,
}

/// `GET /v2/assets` / `GET /v2/assets/{symbol}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Asset {
    /// The asset's id (a UUID).
    pub id: String,
    /// `us_equity` or `crypto` (JSON `class`).
    pub class: String,
    /// The listing exchange, e.g. `NASDAQ`, `CRYPTO`.
    #[serde(default)]
    pub exchange: String,
    /// The symbol; crypto pairs with their slash (`BTC/USD`).
    pub symbol: String,
    /// The asset's name, e.g. `Apple Inc. Common Stock`.
    #[serde(default)]
    pub name: String,
    /// `active` or `inactive`.
    pub status: String,
    /// Whether Alpaca accepts orders for it.
    pub tradable: bool,
    /// Whether it may be bought on margin.
    #[serde(default)]
    pub marginable: bool,
    /// Whether it may be sold short.
    #[serde(default)]
    pub shortable: bool,
    /// Whether shares are easy to borrow for shorting.
    #[serde(default)]
    pub easy_to_borrow: bool,
    /// Whether orders may be for fractions of a unit.
    #[serde(default)]
    pub fractionable: bool,
    /// Crypto: the smallest order quantity, in units (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_order_size: Option<String>,
    /// Crypto: the step of order quantities, in units (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_trade_increment: Option<String>,
    /// Crypto: the step of prices, in dollars (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_increment: Option<String>,
}

/// The order object (REST replies and the `order` of trade updates).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// Alpaca's order id (a UUID).
    pub id: String,
    /// The id the client gave the order (tradebot's own ids, or Alpaca's when none was given).
    pub client_order_id: String,
    /// When the order was created, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// When the order last changed, RFC 3339.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// When the order was submitted, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub submitted_at: Option<String>,
    /// When the order filled completely, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub filled_at: Option<String>,
    /// When the order expired, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub expired_at: Option<String>,
    /// When the order will expire if still working, RFC 3339.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// When the order was canceled, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub canceled_at: Option<String>,
    /// When the order failed, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub failed_at: Option<String>,
    /// When the order was replaced, RFC 3339; `null` if it has not.
    #[serde(default)]
    pub replaced_at: Option<String>,
    /// The id of the order that replaced this one.
    #[serde(default)]
    pub replaced_by: Option<String>,
    /// The id of the order this one replaced.
    #[serde(default)]
    pub replaces: Option<String>,
    /// The asset's id (a UUID).
    #[serde(default)]
    pub asset_id: Option<String>,
    /// The symbol; crypto pairs with their slash (`BTC/USD`).
    pub symbol: String,
    /// `us_equity`, `us_option` or `crypto`.
    #[serde(default)]
    pub asset_class: Option<String>,
    /// For a dollar-amount order: the amount, in dollars (a decimal string); `null` for a quantity order.
    #[serde(default)]
    pub notional: Option<String>,
    /// For a quantity order: units ordered (a decimal string); `null` for a notional order.
    #[serde(default)]
    pub qty: Option<String>,
    /// Units filled so far (a decimal string).
    #[serde(default)]
    pub filled_qty: Option<String>,
    /// Average fill price, in dollars (a decimal string); `null` before any fill.
    #[serde(default)]
    pub filled_avg_price: Option<String>,
    /// `simple`, `bracket`, `oco`, `oto`, `mleg`, or `""`; tradebot only reads simple orders.
    #[serde(default)]
    pub order_class: Option<String>,
    /// Deprecated duplicate of `type`.
    #[serde(default)]
    pub order_type: Option<String>,
    /// The order type (JSON `type`).
    #[serde(rename = "type")]
    pub kind: OrderType,
    /// Buy or sell.
    pub side: Side,
    /// How long the order works.
    pub time_in_force: TimeInForce,
    /// The limit price, in dollars (a decimal string); for limit orders.
    #[serde(default)]
    pub limit_price: Option<String>,
    /// The stop price, in dollars (a decimal string); for stop orders.
    #[serde(default)]
    pub stop_price: Option<String>,
    /// Where the order stands.
    pub status: OrderStatus,
    /// Whether it may fill in extended hours.
    #[serde(default)]
    pub extended_hours: bool,
    /// The legs of a multi-leg order; `null` for simple orders.
    #[serde(default)]
    pub legs: Option<Vec<Order>>,
    /// Trailing stops: the trail, in percent (a decimal string).
    #[serde(default)]
    pub trail_percent: Option<String>,
    /// Trailing stops: the trail, in dollars (a decimal string).
    #[serde(default)]
    pub trail_price: Option<String>,
    /// Trailing stops: the high-water mark, in dollars (a decimal string).
    #[serde(default)]
    pub hwm: Option<String>,
    /// `buy_to_open`, `sell_to_close`, ... (options mostly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_intent: Option<String>,
}

/// An order's `status`, as Alpaca spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// `new`: received and working.
    #[default]
    New,
    /// `partially_filled`: part filled, the rest still working.
    PartiallyFilled,
    /// `filled`: filled completely.
    Filled,
    /// `done_for_day`: no more fills today.
    DoneForDay,
    /// `canceled`: canceled; nothing more fills.
    Canceled,
    /// `expired`: its time in force ran out.
    Expired,
    /// `replaced`: replaced by another order.
    Replaced,
    /// `pending_cancel`: a cancel was asked for and is pending.
    PendingCancel,
    /// `pending_replace`: a replace was asked for and is pending.
    PendingReplace,
    /// `pending_review`: held for review by Alpaca.
    PendingReview,
    /// `accepted`: accepted by Alpaca, not yet routed.
    Accepted,
    /// `pending_new`: received, being routed.
    PendingNew,
    /// `accepted_for_bidding`: accepted for an auction.
    AcceptedForBidding,
    /// `stopped`: a trade is guaranteed for it.
    Stopped,
    /// `rejected`: refused; nothing fills.
    Rejected,
    /// `suspended`: suspended; cannot trade.
    Suspended,
    /// `calculated`: filled, final figures being calculated.
    Calculated,
    /// `held`: waiting for a trigger (e.g. a bracket's exit legs).
    Held,
    /// Any other status: the order still parses, is kept as working, and its status text is logged.
    #[serde(other)]
    Unknown,
}

/// An order's `side`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// `buy`.
    #[default]
    Buy,
    /// `sell`.
    Sell,
    /// Any other side: `parse` refuses it.
    #[serde(other)]
    Unknown,
}

/// An order's `type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderType {
    /// `market`: fill at the best price available.
    #[default]
    Market,
    /// `limit`: fill at `limit_price` or better.
    Limit,
    /// `stop`: becomes a market order at `stop_price`.
    Stop,
    /// `stop_limit`: becomes a limit order at `stop_price`.
    StopLimit,
    /// `trailing_stop`: a stop that trails the price by `trail_price` or `trail_percent`.
    TrailingStop,
    /// Any other type: kept so the order parses.
    #[serde(other)]
    Unknown,
}

/// An order's `time_in_force`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeInForce {
    /// `day`: canceled at the end of the regular session.
    #[default]
    Day,
    /// `gtc`: good till canceled.
    Gtc,
    /// `opg`: only in the opening auction.
    Opg,
    /// `cls`: only in the closing auction.
    Cls,
    /// `ioc`: immediate or cancel.
    Ioc,
    /// `fok`: fill or kill, all at once or nothing.
    Fok,
    /// Any other value: kept so the order parses.
    #[serde(other)]
    Unknown,
}

/// `POST /v2/orders` body (only the fields tradebot sends; decimals as strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderRequest {
    /// The symbol; crypto pairs with their slash.
    pub symbol: String,
    /// Units to trade (a decimal string); exactly one of `qty` and `notional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qty: Option<String>,
    /// Dollars to trade (a decimal string), for a notional order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notional: Option<String>,
    /// Buy or sell.
    pub side: Side,
    /// Market or limit (JSON `type`).
    #[serde(rename = "type")]
    pub kind: OrderType,
    /// How long it works.
    pub time_in_force: TimeInForce,
    /// For limit orders: the limit price in dollars (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_price: Option<String>,
    /// For stop orders: the stop price in dollars (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_price: Option<String>,
    /// Allow fills in extended hours (limit day orders only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_hours: Option<bool>,
    /// The client's own id for the order; Alpaca refuses one used before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_order_id: Option<String>,
}

/// `GET /v2/positions[/{symbol}]`; short quantities are negative. Parsed into `model::BrokerPosition`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The asset's id (a UUID).
    pub asset_id: String,
    /// The symbol; crypto without the pair's slash (`BTCUSD`).
    pub symbol: String,
    /// The listing exchange.
    #[serde(default)]
    pub exchange: String,
    /// `us_equity` or `crypto`.
    #[serde(default)]
    pub asset_class: String,
    /// Whether the asset is marginable.
    #[serde(default)]
    pub asset_marginable: Option<bool>,
    /// Average price paid per unit held, in dollars (a decimal string).
    pub avg_entry_price: String,
    /// Units held (a decimal string); negative when short.
    pub qty: String,
    /// Units not held for open orders (a decimal string).
    #[serde(default)]
    pub qty_available: Option<String>,
    /// `long` or `short`.
    pub side: String,
    /// Value at `current_price`, in dollars (a decimal string).
    #[serde(default)]
    pub market_value: Option<String>,
    /// What the units held cost, in dollars (a decimal string).
    #[serde(default)]
    pub cost_basis: Option<String>,
    /// Unrealised profit or loss, in dollars (a decimal string).
    #[serde(default)]
    pub unrealized_pl: Option<String>,
    /// Unrealised profit or loss as a fraction of cost (a decimal string; 0.05 = 5%).
    #[serde(default)]
    pub unrealized_plpc: Option<String>,
    /// Today's unrealised profit or loss, in dollars (a decimal string).
    #[serde(default)]
    pub unrealized_intraday_pl: Option<String>,
    /// Today's unrealised profit or loss as a fraction (a decimal string).
    #[serde(default)]
    pub unrealized_intraday_plpc: Option<String>,
    /// Alpaca's last price, in dollars (a decimal string).
    #[serde(default)]
    pub current_price: Option<String>,
    /// The previous close, in dollars (a decimal string).
    #[serde(default)]
    pub lastday_price: Option<String>,
    /// Today's price change as a fraction (a decimal string).
    #[serde(default)]
    pub change_today: Option<String>,
}

/// One element of a 207 multi-status reply (`DELETE /v2/orders`, `DELETE /v2/positions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiStatus {
    /// The order's id (order cancels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The position's symbol (position closes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The HTTP status of this item (200 = done).
    pub status: u16,
    /// The item's reply body: the order, or the error (`code`, `message`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// `GET /v2/stocks/bars?symbols=..` (and crypto): bars keyed by symbol, ordered by symbol then time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BarsPage {
    /// symbol → that symbol's bars on this page, in time order.
    #[serde(default)]
    pub bars: BTreeMap<String, Vec<Bar>>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[serde(default)]
    pub next_page_token: Option<String>,
    /// Crypto pages: the quote currency, `USD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

//! Trading REST endpoints (`/v2/...`), one type each. Inputs use domain types; outputs are parsed.

use super::{Endpoint, RestError, decode};
use crate::alpaca::event::BrokerOrder;
use crate::alpaca::model::{Account, Asset, BrokerPosition, MarketClock, TradingDay};
use crate::alpaca::parse;
use crate::alpaca::wire::rest as w;
use crate::domain::{ClientOrderId, OrderId, Price, Qty, Side, Symbol};
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use reqwest::Method;
use rust_decimal::Decimal;

/// Symbols go into paths without the `/` of crypto pairs (`BTC/USD` → `BTCUSD`, which Alpaca accepts).
fn path_symbol(s: &Symbol) -> String {
    s.as_str().replace('/', "")
}

fn list<W: serde::de::DeserializeOwned, T>(
    name: &'static str,
    body: &[u8],
    f: fn(W) -> Result<T, parse::ParseError>,
) -> Result<Vec<T>, RestError> {
    decode(name, body, |v: Vec<W>| v.into_iter().map(f).collect())
}

/// A list reply read element by element: what parsed, and what did not (an options order, a multi-leg
/// order, a status this build does not know, ...), each named by its id or symbol with the reason. One
/// foreign element never fails the whole list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listed<T> {
    /// The elements that parsed, in reply order.
    pub items: Vec<T>,
    /// The elements left out, and why.
    pub skipped: Vec<Skipped>,
}

/// One list element that could not be read as ours.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Skipped {
    /// Its `id`, else its `symbol`, else its position in the list.
    pub key: String,
    /// Why it could not be read.
    pub reason: String,
}

fn lenient<W: serde::de::DeserializeOwned, T>(
    name: &'static str,
    body: &[u8],
    f: fn(W) -> Result<T, parse::ParseError>,
) -> Result<Listed<T>, RestError> {
    decode(name, body, |v: Vec<serde_json::Value>| {
        let mut out = Listed { items: Vec::with_capacity(v.len()), skipped: Vec::new() };
        for (i, el) in v.into_iter().enumerate() {
            let key = ["id", "symbol"]
                .iter()
                .find_map(|k| el.get(*k).and_then(|x| x.as_str()).filter(|x| !x.is_empty()).map(String::from))
                .unwrap_or_else(|| format!("element {i}"));
            match serde_json::from_value::<W>(el).map_err(parse::ParseError::from).and_then(f) {
                Ok(t) => out.items.push(t),
                Err(e) => out.skipped.push(Skipped { key, reason: e.to_string() }),
            }
        }
        Ok(out)
    })
}

/// `GET /v2/account`: the trading account.
pub struct GetAccount;
impl Endpoint for GetAccount {
    type Input = ();
    type Output = Account;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/account";
    fn path(_: &()) -> String {
        "/v2/account".into()
    }
    fn parse(_: &(), body: &[u8]) -> Result<Account, RestError> {
        decode(Self::NAME, body, parse::account)
    }
}

/// `GET /v2/clock`: whether the market is open, and its next open and close.
pub struct GetClock;
impl Endpoint for GetClock {
    type Input = ();
    type Output = MarketClock;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/clock";
    fn path(_: &()) -> String {
        "/v2/clock".into()
    }
    fn parse(_: &(), body: &[u8]) -> Result<MarketClock, RestError> {
        decode(Self::NAME, body, parse::clock)
    }
}

/// Trading days from `.0` to `.1`, inclusive.
pub struct GetCalendar;
impl Endpoint for GetCalendar {
    type Input = (NaiveDate, NaiveDate);
    type Output = Vec<TradingDay>;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/calendar";
    fn path(_: &Self::Input) -> String {
        "/v2/calendar".into()
    }
    fn query(i: &Self::Input) -> Vec<(&'static str, String)> {
        vec![("start", i.0.to_string()), ("end", i.1.to_string())]
    }
    fn parse(_: &Self::Input, body: &[u8]) -> Result<Self::Output, RestError> {
        list(Self::NAME, body, parse::calendar_day)
    }
}

/// Active assets of a class (`us_equity` or `crypto`).
pub struct ListAssets;
impl Endpoint for ListAssets {
    type Input = String;
    type Output = Vec<Asset>;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/assets";
    fn path(_: &String) -> String {
        "/v2/assets".into()
    }
    fn query(class: &String) -> Vec<(&'static str, String)> {
        vec![("status", "active".into()), ("asset_class", class.clone())]
    }
    fn parse(_: &String, body: &[u8]) -> Result<Self::Output, RestError> {
        list(Self::NAME, body, parse::asset)
    }
}

/// `GET /v2/assets/{symbol}`: one instrument and what may be traded of it.
pub struct GetAsset;
impl Endpoint for GetAsset {
    type Input = Symbol;
    type Output = Asset;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/assets/{symbol}";
    fn path(s: &Symbol) -> String {
        format!("/v2/assets/{}", path_symbol(s))
    }
    fn parse(_: &Symbol, body: &[u8]) -> Result<Asset, RestError> {
        decode(Self::NAME, body, parse::asset)
    }
}

/// How long an order stays working (Alpaca's `time_in_force`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeInForce {
    /// `day`: canceled at the end of the regular session if not filled.
    Day,
    /// `gtc`: good till canceled (crypto orders must use it or `ioc`).
    Gtc,
    /// `ioc`: immediate or cancel; what does not fill at once is canceled.
    Ioc,
}

/// The order type (Alpaca's `type`), with its limit price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OrderKind {
    /// `market`: fill at the best price available.
    Market,
    /// `limit`: fill at this price in dollars (`limit_price`) or better.
    Limit(Price),
}

/// What we send to `POST /v2/orders`: always with our own client_order_id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOrder {
    /// The instrument (`symbol`; crypto pairs with their slash).
    pub symbol: Symbol,
    /// `buy` or `sell` (`side`).
    pub side: Side,
    /// Units to trade (`qty`), > 0; fractional where the asset allows it.
    pub qty: Qty,
    /// Market or limit (`type`, `limit_price`).
    pub kind: OrderKind,
    /// How long it stays working (`time_in_force`).
    pub time_in_force: TimeInForce,
    /// Our id for the order (`client_order_id`): Alpaca refuses one ever used before.
    pub client_order_id: ClientOrderId,
}

impl NewOrder {
    fn wire(&self) -> w::OrderRequest {
        let (kind, limit_price) = match self.kind {
            OrderKind::Market => (w::OrderType::Market, None),
            OrderKind::Limit(p) => (w::OrderType::Limit, Some(p.to_string())),
        };
        w::OrderRequest {
            symbol: self.symbol.to_string(),
            qty: Some(self.qty.to_string()),
            notional: None,
            side: match self.side {
                Side::Buy => w::Side::Buy,
                Side::Sell => w::Side::Sell,
            },
            kind,
            time_in_force: match self.time_in_force {
                TimeInForce::Day => w::TimeInForce::Day,
                TimeInForce::Gtc => w::TimeInForce::Gtc,
                TimeInForce::Ioc => w::TimeInForce::Ioc,
            },
            limit_price,
            stop_price: None,
            extended_hours: None,
            client_order_id: Some(self.client_order_id.to_string()),
        }
    }

    /// Whether a broker order is this one (same symbol, side and quantity): used when a resend finds the
    /// client_order_id already taken.
    pub fn matches(&self, o: &BrokerOrder) -> bool {
        o.symbol == self.symbol && o.side == self.side && o.qty == Some(self.qty.get())
    }
}

/// `POST /v2/orders`. Not idempotent: never retried after a 5xx or timeout (see `RestClient::submit_order`).
pub struct SubmitOrder;
impl Endpoint for SubmitOrder {
    type Input = NewOrder;
    type Output = BrokerOrder;
    const METHOD: Method = Method::POST;
    const IDEMPOTENT: bool = false;
    const NAME: &'static str = "POST /v2/orders";
    fn path(_: &NewOrder) -> String {
        "/v2/orders".into()
    }
    fn client_order_id(o: &NewOrder) -> Option<&str> {
        Some(o.client_order_id.as_str())
    }
    fn body(o: &NewOrder) -> Option<serde_json::Value> {
        serde_json::to_value(o.wire()).ok()
    }
    fn parse(_: &NewOrder, body: &[u8]) -> Result<BrokerOrder, RestError> {
        decode(Self::NAME, body, parse::order)
    }
}

/// `GET /v2/orders/{id}`: one order by Alpaca's id.
pub struct GetOrder;
impl Endpoint for GetOrder {
    type Input = OrderId;
    type Output = BrokerOrder;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/orders/{id}";
    fn path(id: &OrderId) -> String {
        format!("/v2/orders/{id}")
    }
    fn parse(_: &OrderId, body: &[u8]) -> Result<BrokerOrder, RestError> {
        decode(Self::NAME, body, parse::order)
    }
}

/// `GET /v2/orders:by_client_order_id`: one order by our client_order_id.
pub struct GetOrderByClientId;
impl Endpoint for GetOrderByClientId {
    type Input = ClientOrderId;
    type Output = BrokerOrder;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/orders:by_client_order_id";
    fn path(_: &ClientOrderId) -> String {
        "/v2/orders:by_client_order_id".into()
    }
    fn query(id: &ClientOrderId) -> Vec<(&'static str, String)> {
        vec![("client_order_id", id.to_string())]
    }
    fn parse(_: &ClientOrderId, body: &[u8]) -> Result<BrokerOrder, RestError> {
        decode(Self::NAME, body, parse::order)
    }
}

/// Which orders `GET /v2/orders` lists (its `status` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderFilter {
    /// `open`: orders still working.
    Open,
    /// `closed`: filled, canceled, expired or rejected orders.
    Closed,
    /// `all`: both.
    All,
}

/// The parameters of one `GET /v2/orders` page.
#[derive(Debug, Clone, PartialEq)]
pub struct ListOrdersQuery {
    /// Open, closed or all orders (`status`).
    pub status: OrderFilter,
    /// 1 to 500.
    pub limit: u32,
    /// Only orders submitted after this instant (exclusive).
    pub after: Option<DateTime<Utc>>,
    /// Only these symbols (`symbols`, comma-joined); empty for all.
    pub symbols: Vec<Symbol>,
    /// Oldest first (`asc`, for paging forward with `after`) or newest first (Alpaca's default).
    pub oldest_first: bool,
}

/// `GET /v2/orders`: one page of orders, read leniently (see `Listed`).
pub struct ListOrders;
impl Endpoint for ListOrders {
    type Input = ListOrdersQuery;
    type Output = Listed<BrokerOrder>;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/orders";
    fn path(_: &ListOrdersQuery) -> String {
        "/v2/orders".into()
    }
    fn query(q: &ListOrdersQuery) -> Vec<(&'static str, String)> {
        let status = match q.status {
            OrderFilter::Open => "open",
            OrderFilter::Closed => "closed",
            OrderFilter::All => "all",
        };
        let mut v = vec![("status", status.to_string()), ("limit", q.limit.clamp(1, 500).to_string())];
        if let Some(a) = q.after {
            v.push(("after", a.to_rfc3339_opts(SecondsFormat::AutoSi, true)));
        }
        if !q.symbols.is_empty() {
            v.push(("symbols", q.symbols.iter().map(Symbol::as_str).collect::<Vec<_>>().join(",")));
        }
        if q.oldest_first {
            v.push(("direction", "asc".into()));
        }
        v
    }
    fn parse(_: &ListOrdersQuery, body: &[u8]) -> Result<Self::Output, RestError> {
        lenient(Self::NAME, body, parse::order_value)
    }
}

/// `DELETE /v2/orders/{id}` → 204. Idempotent: a second cancel changes nothing.
pub struct CancelOrder;
impl Endpoint for CancelOrder {
    type Input = OrderId;
    type Output = ();
    const METHOD: Method = Method::DELETE;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "DELETE /v2/orders/{id}";
    fn path(id: &OrderId) -> String {
        format!("/v2/orders/{id}")
    }
    fn parse(_: &OrderId, _: &[u8]) -> Result<(), RestError> {
        Ok(())
    }
}

/// The outcome for one order or position of a 207 multi-status reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemStatus {
    /// The order's Alpaca id, for order cancels.
    pub id: Option<String>,
    /// The position's symbol, for position closes.
    pub symbol: Option<String>,
    /// The HTTP status of this item's outcome (200 = done).
    pub status: u16,
}

fn multi(name: &'static str, body: &[u8]) -> Result<Vec<ItemStatus>, RestError> {
    decode(name, body, |v: Vec<w::MultiStatus>| {
        Ok(v.into_iter().map(|m| ItemStatus { id: m.id, symbol: m.symbol, status: m.status }).collect())
    })
}

/// `DELETE /v2/orders` → 207 with one status per order.
pub struct CancelAllOrders;
impl Endpoint for CancelAllOrders {
    type Input = ();
    type Output = Vec<ItemStatus>;
    const METHOD: Method = Method::DELETE;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "DELETE /v2/orders";
    fn path(_: &()) -> String {
        "/v2/orders".into()
    }
    fn parse(_: &(), body: &[u8]) -> Result<Self::Output, RestError> {
        multi(Self::NAME, body)
    }
}

/// `GET /v2/positions`: every open position, read leniently (see `Listed`).
pub struct ListPositions;
impl Endpoint for ListPositions {
    type Input = ();
    type Output = Listed<BrokerPosition>;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/positions";
    fn path(_: &()) -> String {
        "/v2/positions".into()
    }
    fn parse(_: &(), body: &[u8]) -> Result<Self::Output, RestError> {
        lenient(Self::NAME, body, parse::position)
    }
}

/// `GET /v2/positions/{symbol}`: one open position.
pub struct GetPosition;
impl Endpoint for GetPosition {
    type Input = Symbol;
    type Output = BrokerPosition;
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/positions/{symbol}";
    fn path(s: &Symbol) -> String {
        format!("/v2/positions/{}", path_symbol(s))
    }
    fn parse(_: &Symbol, body: &[u8]) -> Result<BrokerPosition, RestError> {
        decode(Self::NAME, body, parse::position)
    }
}

/// `DELETE /v2/positions/{symbol}[?qty=]` → the closing order. Not idempotent (a partial close twice
/// sells twice).
pub struct ClosePosition;
impl Endpoint for ClosePosition {
    type Input = (Symbol, Option<Decimal>);
    type Output = BrokerOrder;
    const METHOD: Method = Method::DELETE;
    const IDEMPOTENT: bool = false;
    const NAME: &'static str = "DELETE /v2/positions/{symbol}";
    fn path(i: &Self::Input) -> String {
        format!("/v2/positions/{}", path_symbol(&i.0))
    }
    fn query(i: &Self::Input) -> Vec<(&'static str, String)> {
        i.1.map(|q| vec![("qty", q.to_string())]).unwrap_or_default()
    }
    fn parse(_: &Self::Input, body: &[u8]) -> Result<BrokerOrder, RestError> {
        decode(Self::NAME, body, parse::order)
    }
}

/// `DELETE /v2/positions?cancel_orders=true` → 207 with one status per position.
pub struct CloseAllPositions;
impl Endpoint for CloseAllPositions {
    type Input = ();
    type Output = Vec<ItemStatus>;
    const METHOD: Method = Method::DELETE;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "DELETE /v2/positions";
    fn path(_: &()) -> String {
        "/v2/positions".into()
    }
    fn query(_: &()) -> Vec<(&'static str, String)> {
        vec![("cancel_orders", "true".into())]
    }
    fn parse(_: &(), body: &[u8]) -> Result<Self::Output, RestError> {
        multi(Self::NAME, body)
    }
}

//! REST objects into domain types: orders, account, clock, calendar, assets, positions, bars pages.

use super::market::rest_bar;
use super::{ParseError, decimal, field_err, opt_decimal, opt_time, time};
use crate::alpaca::event::BrokerOrder;
use crate::alpaca::model::{Account, Asset, BrokerPosition, MarketClock, TradingDay};
use crate::alpaca::wire::rest as w;
use crate::domain::{Bar, ClientOrderId, OrderId, OrderStatus, Side, Symbol, Timeframe};
use chrono::{NaiveDate, NaiveTime, TimeZone};
use chrono_tz::America::New_York;

/// An order from the trading API (GET/POST `/v2/orders`) in domain terms; errors name the bad field.
pub fn order(o: w::Order) -> Result<BrokerOrder, ParseError> {
    order_with_status_text(o, None)
}

/// An order from its JSON, keeping the status text as Alpaca wrote it (a status this build does not know
/// is named in the log and kept in `BrokerOrder::broker_status`).
pub fn order_value(v: serde_json::Value) -> Result<BrokerOrder, ParseError> {
    let text = v.get("status").and_then(|s| s.as_str()).map(String::from);
    order_with_status_text(serde_json::from_value(v)?, text.as_deref())
}

/// `order`, with the status as written when known (`order_value`, `updates`).
pub(super) fn order_with_status_text(o: w::Order, text: Option<&str>) -> Result<BrokerOrder, ParseError> {
    let side = match o.side {
        w::Side::Buy => Side::Buy,
        w::Side::Sell => Side::Sell,
        w::Side::Unknown => return Err(field_err("side", "", "is not buy or sell")),
    };
    let status = status(o.status, &o.filled_qty)?;
    let broker_status = match (o.status, text) {
        (w::OrderStatus::Unknown, Some(t)) => t.chars().take(64).collect::<String>(),
        _ => serde_json::to_value(o.status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
    };
    if o.status == w::OrderStatus::Unknown {
        log::warn!(
            "alpaca: order {} ({} {}) has status {broker_status:?}, which this tradebot does not know; it is kept \
             as working ({status:?}) until the broker reports an end",
            o.id,
            o.client_order_id,
            o.symbol
        );
    }
    Ok(BrokerOrder {
        id: OrderId::new(&o.id)?,
        client_order_id: ClientOrderId::new(&o.client_order_id).ok(),
        symbol: Symbol::new(&o.symbol)?,
        side,
        qty: opt_decimal("qty", &o.qty)?,
        notional: opt_decimal("notional", &o.notional)?,
        filled_qty: opt_decimal("filled_qty", &o.filled_qty)?.unwrap_or_default(),
        filled_avg_price: opt_decimal("filled_avg_price", &o.filled_avg_price)?,
        limit_price: opt_decimal("limit_price", &o.limit_price)?,
        status,
        broker_status,
        created_at: opt_time("created_at", &o.created_at)?,
        raw_client_order_id: o.client_order_id,
    })
}

/// Alpaca's 18 statuses onto our lifecycle. Working states that are neither filled nor canceled map to
/// `Accepted` (or `PartiallyFilled` when something has filled); so does a status this build does not know
/// (a new one): the broker still holds the order, and an order it holds is never forgotten here.
fn status(s: w::OrderStatus, filled: &Option<String>) -> Result<OrderStatus, ParseError> {
    use w::OrderStatus as A;
    let part = opt_decimal("filled_qty", filled)?.is_some_and(|q| q > rust_decimal::Decimal::ZERO);
    let working = if part { OrderStatus::PartiallyFilled } else { OrderStatus::Accepted };
    Ok(match s {
        A::PendingNew => OrderStatus::PendingNew,
        A::PartiallyFilled => OrderStatus::PartiallyFilled,
        A::Filled => OrderStatus::Filled,
        A::Canceled => OrderStatus::Canceled,
        A::Expired => OrderStatus::Expired,
        A::Replaced => OrderStatus::Replaced,
        A::Rejected => OrderStatus::Rejected,
        A::PendingCancel => OrderStatus::PendingCancel,
        A::New
        | A::Accepted
        | A::AcceptedForBidding
        | A::PendingReview
        | A::PendingReplace
        | A::DoneForDay
        | A::Stopped
        | A::Suspended
        | A::Calculated
        | A::Held
        | A::Unknown => working,
    })
}

/// The account (GET `/v2/account`) in domain terms; errors name the bad field.
pub fn account(a: w::Account) -> Result<Account, ParseError> {
    Ok(Account {
        cash: decimal("cash", &a.cash)?,
        buying_power: decimal("buying_power", &a.buying_power)?,
        equity: decimal("equity", &a.equity)?,
        blocked: a.trading_blocked.unwrap_or(false)
            || a.account_blocked.unwrap_or(false)
            || a.trade_suspended_by_user.unwrap_or(false),
        id: a.id,
        status: a.status,
    })
}

/// The market clock (GET `/v2/clock`) in domain terms, times converted to UTC.
pub fn clock(c: w::Clock) -> Result<MarketClock, ParseError> {
    Ok(MarketClock {
        timestamp: time("timestamp", &c.timestamp)?,
        is_open: c.is_open,
        next_open: time("next_open", &c.next_open)?,
        next_close: time("next_close", &c.next_close)?,
    })
}

/// One day of GET `/v2/calendar`, its New York open and close converted to UTC.
pub fn calendar_day(d: w::CalendarDay) -> Result<TradingDay, ParseError> {
    let date =
        NaiveDate::parse_from_str(&d.date, "%Y-%m-%d").map_err(|_| field_err("date", &d.date, "is not YYYY-MM-DD"))?;
    let at = |field: &'static str, hm: &str| {
        let t = NaiveTime::parse_from_str(hm, "%H:%M").map_err(|_| field_err(field, hm, "is not HH:MM"))?;
        New_York
            .from_local_datetime(&date.and_time(t))
            .single()
            .map(|t| t.to_utc())
            .ok_or_else(|| field_err(field, hm, "does not exist in New York on that date"))
    };
    Ok(TradingDay { date, open: at("open", &d.open)?, close: at("close", &d.close)? })
}

/// An asset (GET `/v2/assets/{symbol}`) in domain terms; errors name the bad field.
pub fn asset(a: w::Asset) -> Result<Asset, ParseError> {
    Ok(Asset {
        symbol: Symbol::new(&a.symbol)?,
        tradable: a.tradable && a.status == "active",
        fractionable: a.fractionable,
        shortable: a.shortable,
        min_order_size: opt_decimal("min_order_size", &a.min_order_size)?,
        min_trade_increment: opt_decimal("min_trade_increment", &a.min_trade_increment)?,
        price_increment: opt_decimal("price_increment", &a.price_increment)?,
        class: a.class,
    })
}

/// A position (GET `/v2/positions`) in domain terms; errors name the bad field.
pub fn position(p: w::Position) -> Result<BrokerPosition, ParseError> {
    Ok(BrokerPosition {
        symbol: Symbol::new(&p.symbol)?,
        class: p.asset_class,
        qty: decimal("qty", &p.qty)?,
        avg_entry_price: decimal("avg_entry_price", &p.avg_entry_price)?,
        market_value: opt_decimal("market_value", &p.market_value)?,
        current_price: opt_decimal("current_price", &p.current_price)?,
    })
}

/// A bars page into domain bars (ordered by symbol then time, as Alpaca sends them) and the next token.
pub fn bars_page(p: w::BarsPage, tf: Timeframe) -> Result<(Vec<Bar>, Option<String>), ParseError> {
    let mut out = Vec::new();
    for (sym, bars) in &p.bars {
        let symbol = Symbol::new(sym)?;
        for b in bars {
            out.push(rest_bar(symbol.clone(), tf, b)?);
        }
    }
    Ok((out, p.next_page_token.filter(|t| !t.is_empty())))
}

//! Market-data frames (`[{"T":..},..]`) into `StreamItem`s.

use super::{Frame, ParseError, field_err, finite, time};
use crate::alpaca::event::TradingStatus;
use crate::alpaca::event::{
    BarKind, BookLevel, Channels, MarketEvent, Quote, StreamBar, StreamControl, StreamItem, Trade,
};
use crate::alpaca::wire::market as w;
use crate::domain::{Bar, Side, Symbol, Timeframe};
use serde::Deserialize;

/// Parses one frame (text or binary payload). A frame is a JSON array; a lone object is accepted too.
/// Invalid JSON makes the whole frame one error; otherwise each element stands alone.
pub fn market_frame(payload: &[u8]) -> Frame<StreamItem> {
    let mut frame = Frame::default();
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(serde_json::Value::Array(msgs)) => {
            for m in msgs {
                frame.push(market_message(m));
            }
        }
        Ok(obj @ serde_json::Value::Object(_)) => frame.push(market_message(obj)),
        Ok(other) => frame.push(Err(field_err("frame", &other.to_string(), "is neither an array nor an object"))),
        Err(e) => frame.push(Err(ParseError::Json(e))),
    }
    frame
}

/// Parses one message of a frame. `Ok(None)`: an unknown `T`, skipped.
pub fn market_message(v: serde_json::Value) -> Result<Option<StreamItem>, ParseError> {
    let msg = w::StreamMsg::deserialize(v)?;
    let ev = |e| Ok(Some(StreamItem::Market(e)));
    match msg {
        w::StreamMsg::Success { msg } => Ok(Some(StreamItem::Control(match msg.as_str() {
            "connected" => StreamControl::Connected,
            "authenticated" => StreamControl::Authenticated,
            _ => StreamControl::Success(msg),
        }))),
        w::StreamMsg::Error { code, msg } => Ok(Some(StreamItem::Control(StreamControl::Error { code, msg }))),
        w::StreamMsg::Subscription(s) => Ok(Some(StreamItem::Control(StreamControl::Subscription(channels(&s))))),
        w::StreamMsg::Bar(b) => ev(MarketEvent::Bar(bar(b, BarKind::Minute)?)),
        w::StreamMsg::UpdatedBar(b) => ev(MarketEvent::Bar(bar(b, BarKind::Updated)?)),
        w::StreamMsg::DailyBar(b) => ev(MarketEvent::Bar(bar(b, BarKind::Daily)?)),
        w::StreamMsg::Trade(t) => ev(MarketEvent::Trade(trade(t)?)),
        w::StreamMsg::Quote(q) => ev(MarketEvent::Quote(quote(q)?)),
        w::StreamMsg::Status(s) => ev(MarketEvent::Status(TradingStatus {
            symbol: Symbol::new(&s.symbol)?,
            time: time("t", &s.t)?,
            code: s.sc,
            message: s.sm,
            reason_code: s.rc,
            reason_message: s.rm,
        })),
        w::StreamMsg::Luld(l) => ev(MarketEvent::Luld {
            symbol: Symbol::new(&l.symbol)?,
            time: time("t", &l.t)?,
            limit_up: finite("u", l.u)?,
            limit_down: finite("d", l.d)?,
            indicator: l.i,
        }),
        w::StreamMsg::Imbalance(i) => ev(MarketEvent::Imbalance {
            symbol: Symbol::new(&i.symbol)?,
            time: time("t", &i.t)?,
            price: finite("p", i.p)?,
        }),
        w::StreamMsg::Correction(c) => ev(MarketEvent::Correction {
            symbol: Symbol::new(&c.symbol)?,
            time: time("t", &c.t)?,
            original_id: c.oi,
            corrected_id: c.ci,
            price: finite("cp", c.cp)?,
            size: finite("cs", c.cs)?,
        }),
        w::StreamMsg::CancelError(x) => ev(MarketEvent::TradeCancel {
            symbol: Symbol::new(&x.symbol)?,
            time: time("t", &x.t)?,
            trade_id: x.i,
            is_error: x.a == "E",
        }),
        w::StreamMsg::OrderBook(o) => ev(MarketEvent::OrderBook {
            symbol: Symbol::new(&o.symbol)?,
            time: time("t", &o.t)?,
            bids: levels(&o.b)?,
            asks: levels(&o.a)?,
            reset: o.r,
        }),
        w::StreamMsg::News(n) => ev(MarketEvent::News {
            id: n.id,
            headline: n.headline,
            symbols: n.symbols,
            created_at: time("created_at", &n.created_at)?,
        }),
        w::StreamMsg::Unknown => Ok(None),
    }
}

fn channels(s: &w::Subscription) -> Channels {
    let set = |v: &Vec<String>| v.iter().cloned().collect();
    Channels {
        trades: set(&s.trades),
        quotes: set(&s.quotes),
        bars: set(&s.bars),
        updated_bars: set(&s.updated_bars),
        daily_bars: set(&s.daily_bars),
        statuses: set(&s.statuses),
    }
}

fn bar(b: w::Bar, kind: BarKind) -> Result<StreamBar, ParseError> {
    let sym = b.symbol.as_deref().ok_or_else(|| field_err("S", "", "is missing"))?;
    let tf = if kind == BarKind::Daily { Timeframe::DAY1 } else { Timeframe::MIN1 };
    Ok(StreamBar { kind, bar: rest_bar(Symbol::new(sym)?, tf, &b)?, trade_count: b.n, vwap: b.vw })
}

/// A wire bar (stream or REST) into a checked domain bar.
pub(super) fn rest_bar(symbol: Symbol, tf: Timeframe, b: &w::Bar) -> Result<Bar, ParseError> {
    Ok(Bar::new(symbol, tf, time("t", &b.t)?, b.o, b.h, b.l, b.c, b.v)?)
}

fn trade(t: w::Trade) -> Result<Trade, ParseError> {
    let taker_side = match t.taker_side.as_deref() {
        Some("B") => Some(Side::Buy),
        Some("S") => Some(Side::Sell),
        _ => None,
    };
    Ok(Trade {
        symbol: Symbol::new(&t.symbol)?,
        time: time("t", &t.time)?,
        price: finite("p", t.price)?,
        size: finite("s", t.size)?,
        id: t.id,
        exchange: t.exchange,
        conditions: t.conditions.unwrap_or_default(),
        tape: t.tape,
        taker_side,
    })
}

fn quote(q: w::Quote) -> Result<Quote, ParseError> {
    Ok(Quote {
        symbol: Symbol::new(&q.symbol)?,
        time: time("t", &q.time)?,
        bid_price: finite("bp", q.bid_price)?,
        bid_size: finite("bs", q.bid_size)?,
        ask_price: finite("ap", q.ask_price)?,
        ask_size: finite("as", q.ask_size)?,
    })
}

fn levels(v: &[w::BookLevel]) -> Result<Vec<BookLevel>, ParseError> {
    v.iter().map(|l| Ok(BookLevel { price: finite("p", l.p)?, size: finite("s", l.s)? })).collect()
}

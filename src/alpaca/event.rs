//! What the Alpaca streams mean, in domain terms: `MarketEvent` (bars, trades, quotes, statuses, ...),
//! the stream's control messages, and `OrderUpdate` from trade_updates. No serde here: these are built
//! by `parse` from the wire types and consumed by the feed, the broker and the engine.

use crate::domain::{Bar, Side, Symbol};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// Which bar channel a streamed bar came from. An `Updated` bar replaces the `Minute` bar of the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarKind {
    Minute,
    Updated,
    Daily,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StreamBar {
    pub kind: BarKind,
    pub bar: Bar,
    pub trade_count: Option<u64>,
    pub vwap: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trade {
    pub symbol: Symbol,
    pub time: DateTime<Utc>,
    pub price: f64,
    pub size: f64,
    pub id: Option<u64>,
    pub exchange: Option<String>,
    pub conditions: Vec<String>,
    pub tape: Option<String>,
    /// Crypto only: the taker's side.
    pub taker_side: Option<Side>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Quote {
    pub symbol: Symbol,
    pub time: DateTime<Utc>,
    pub bid_price: f64,
    pub bid_size: f64,
    pub ask_price: f64,
    pub ask_size: f64,
}

/// A trading status change: `code` `H` = halted, `T` = trading resumed (UTP codes).
#[derive(Debug, Clone, PartialEq)]
pub struct TradingStatus {
    pub symbol: Symbol,
    pub time: DateTime<Utc>,
    pub code: String,
    pub message: String,
    pub reason_code: String,
    pub reason_message: String,
}

impl TradingStatus {
    pub fn is_halt(&self) -> bool {
        self.code == "H"
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BookLevel {
    pub price: f64,
    pub size: f64,
}

/// Everything a market-data stream can tell about the market.
#[derive(Debug, Clone, PartialEq)]
pub enum MarketEvent {
    Bar(StreamBar),
    Trade(Trade),
    Quote(Quote),
    Status(TradingStatus),
    Luld {
        symbol: Symbol,
        time: DateTime<Utc>,
        limit_up: f64,
        limit_down: f64,
        indicator: String,
    },
    Imbalance {
        symbol: Symbol,
        time: DateTime<Utc>,
        price: f64,
    },
    Correction {
        symbol: Symbol,
        time: DateTime<Utc>,
        original_id: u64,
        corrected_id: u64,
        price: f64,
        size: f64,
    },
    /// A trade was canceled (`is_error` false) or was an error (`is_error` true).
    TradeCancel {
        symbol: Symbol,
        time: DateTime<Utc>,
        trade_id: u64,
        is_error: bool,
    },
    OrderBook {
        symbol: Symbol,
        time: DateTime<Utc>,
        bids: Vec<BookLevel>,
        asks: Vec<BookLevel>,
        reset: bool,
    },
    News {
        id: i64,
        headline: String,
        symbols: Vec<String>,
        created_at: DateTime<Utc>,
    },
}

/// The channels a market-data stream reports as subscribed (the whole current set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Channels {
    pub trades: BTreeSet<String>,
    pub quotes: BTreeSet<String>,
    pub bars: BTreeSet<String>,
    pub updated_bars: BTreeSet<String>,
    pub daily_bars: BTreeSet<String>,
    pub statuses: BTreeSet<String>,
}

impl Channels {
    /// True when every channel asked for here is in `reply` (the server may add more, e.g. corrections).
    pub fn is_covered_by(&self, reply: &Channels) -> bool {
        self.trades.is_subset(&reply.trades)
            && self.quotes.is_subset(&reply.quotes)
            && self.bars.is_subset(&reply.bars)
            && self.updated_bars.is_subset(&reply.updated_bars)
            && self.daily_bars.is_subset(&reply.daily_bars)
            && self.statuses.is_subset(&reply.statuses)
    }
}

/// Control messages of a market-data stream: connected, authenticated, the subscription, errors.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamControl {
    Connected,
    Authenticated,
    /// A `success` message with any other text.
    Success(String),
    Error {
        code: i64,
        msg: String,
    },
    Subscription(Channels),
}

/// One element of a market-data frame.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    Control(StreamControl),
    Market(MarketEvent),
}

pub use crate::domain::{BrokerOrder, Fill, OrderUpdate, UpdateKind};

/// One trade_updates message.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdatesItem {
    Authorized,
    /// Refused; `action` says what was refused (`authenticate` or `listen`).
    Unauthorized {
        action: String,
    },
    Listening(Vec<String>),
    Update(Box<OrderUpdate>),
}

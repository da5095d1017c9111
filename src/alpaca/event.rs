//! What the Alpaca streams mean, in domain terms: `MarketEvent` (bars, trades, quotes, statuses, ...),
//! the stream's control messages, and `OrderUpdate` from trade_updates. No serde here: these are built
//! by `parse` from the wire types and consumed by the feed, the broker and the engine.

use crate::domain::{Bar, Side, Symbol};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// Which bar channel a streamed bar came from. An `Updated` bar replaces the `Minute` bar of the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarKind {
    /// A minute bar (`b`), sent just after each minute ends.
    Minute,
    /// A corrected minute bar (`u`), sent when a late trade changed a minute already sent.
    Updated,
    /// The day so far (`d`), re-sent every minute after the open.
    Daily,
}

/// One bar from a market-data stream (`b`, `u` or `d` message) with the extras Alpaca sends with it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamBar {
    /// Which channel it came from.
    pub kind: BarKind,
    /// The bar itself: symbol, start time (UTC), OHLC in dollars, volume.
    pub bar: Bar,
    /// Trades in the bar (`n`); `None` when Alpaca left it out.
    pub trade_count: Option<u64>,
    /// Volume-weighted average price of the bar, in dollars (`vw`); `None` when Alpaca left it out.
    pub vwap: Option<f64>,
}

/// One trade print from the `trades` channel (`t` message).
#[derive(Debug, Clone, PartialEq)]
pub struct Trade {
    /// The instrument traded (`S`).
    pub symbol: Symbol,
    /// When it traded (`t`, UTC).
    pub time: DateTime<Utc>,
    /// Price, in dollars per unit (`p`).
    pub price: f64,
    /// Units traded (`s`): whole shares for stocks, fractional for crypto.
    pub size: f64,
    /// The venue's trade id (`i`), which corrections and cancels refer to; `None` when absent.
    pub id: Option<u64>,
    /// Stocks only: the exchange code (`x`).
    pub exchange: Option<String>,
    /// Stocks only: the trade condition codes (`c`); empty for crypto.
    pub conditions: Vec<String>,
    /// Stocks only: the SIP tape (`z`: `A`, `B`, `C`, ...).
    pub tape: Option<String>,
    /// Crypto only: the taker's side.
    pub taker_side: Option<Side>,
}

/// The best bid and ask from the `quotes` channel (`q` message).
#[derive(Debug, Clone, PartialEq)]
pub struct Quote {
    /// The instrument quoted (`S`).
    pub symbol: Symbol,
    /// When the quote was made (`t`, UTC).
    pub time: DateTime<Utc>,
    /// Best bid, in dollars (`bp`).
    pub bid_price: f64,
    /// Size at the best bid (`bs`): round lots for stocks, units for crypto.
    pub bid_size: f64,
    /// Best ask, in dollars (`ap`).
    pub ask_price: f64,
    /// Size at the best ask (`as`): round lots for stocks, units for crypto.
    pub ask_size: f64,
}

/// A trading status change: `code` `H` = halted, `T` = trading resumed (UTP codes).
#[derive(Debug, Clone, PartialEq)]
pub struct TradingStatus {
    /// The stock whose status changed (`S`).
    pub symbol: Symbol,
    /// When it changed (`t`, UTC).
    pub time: DateTime<Utc>,
    /// The status code (`sc`), e.g. `H` or `T`.
    pub code: String,
    /// The status in words (`sm`).
    pub message: String,
    /// Why it changed: the reason code (`rc`).
    pub reason_code: String,
    /// The reason in words (`rm`).
    pub reason_message: String,
}

impl TradingStatus {
    /// True when trading in the stock is halted (`code` `H`): no new orders should go to it.
    pub fn is_halt(&self) -> bool {
        self.code == "H"
    }
}

/// One price level of a crypto order book (`o` message, `{"p":…,"s":…}`).
#[derive(Debug, Clone, PartialEq)]
pub struct BookLevel {
    /// The level's price, in dollars.
    pub price: f64,
    /// Units offered at it; 0 means the level is gone.
    pub size: f64,
}

/// Everything a market-data stream can tell about the market.
#[derive(Debug, Clone, PartialEq)]
pub enum MarketEvent {
    /// A bar (`b`, `u`, `d`).
    Bar(StreamBar),
    /// A trade (`t`).
    Trade(Trade),
    /// A best bid and ask (`q`).
    Quote(Quote),
    /// A halt or resume (`s`).
    Status(TradingStatus),
    /// New limit-up/limit-down price bands for a stock (`l`).
    Luld {
        /// The stock (`S`).
        symbol: Symbol,
        /// When the bands were set (`t`, UTC).
        time: DateTime<Utc>,
        /// The upper band, in dollars (`u`).
        limit_up: f64,
        /// The lower band, in dollars (`d`).
        limit_down: f64,
        /// The LULD indicator as sent (`i`).
        indicator: String,
    },
    /// An order imbalance at an auction (`i`).
    Imbalance {
        /// The stock (`S`).
        symbol: Symbol,
        /// When it was published (`t`, UTC).
        time: DateTime<Utc>,
        /// The reference price, in dollars (`p`).
        price: f64,
    },
    /// A trade reported earlier was corrected (`c`).
    Correction {
        /// The stock (`S`).
        symbol: Symbol,
        /// When the correction was made (`t`, UTC).
        time: DateTime<Utc>,
        /// The id of the trade corrected (`oi`).
        original_id: u64,
        /// The id of the trade that replaces it (`ci`).
        corrected_id: u64,
        /// The corrected price, in dollars (`cp`).
        price: f64,
        /// The corrected size, in shares (`cs`).
        size: f64,
    },
    /// A trade was canceled (`is_error` false) or was an error (`is_error` true).
    TradeCancel {
        /// The stock (`S`).
        symbol: Symbol,
        /// When it was canceled (`t`, UTC).
        time: DateTime<Utc>,
        /// The id of the trade canceled (`i`).
        trade_id: u64,
        /// True for an error (`a` `E`), false for a cancel (`a` `C`).
        is_error: bool,
    },
    /// A crypto order-book update (`o`): the levels changed, or the whole book when `reset`.
    OrderBook {
        /// The pair (`S`, e.g. `BTC/USD`).
        symbol: Symbol,
        /// When the book changed (`t`, UTC).
        time: DateTime<Utc>,
        /// Bid levels changed (`b`).
        bids: Vec<BookLevel>,
        /// Ask levels changed (`a`).
        asks: Vec<BookLevel>,
        /// True when this is the whole book, replacing what was held (`r`).
        reset: bool,
    },
    /// A news article (`n`, news stream).
    News {
        /// Alpaca's article id.
        id: i64,
        /// The article's headline.
        headline: String,
        /// The symbols the article is tagged with, as Alpaca sends them.
        symbols: Vec<String>,
        /// When the article was published (UTC).
        created_at: DateTime<Utc>,
    },
}

/// The channels a market-data stream reports as subscribed (the whole current set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Channels {
    /// Symbols subscribed to trades (`*` = all).
    pub trades: BTreeSet<String>,
    /// Symbols subscribed to quotes.
    pub quotes: BTreeSet<String>,
    /// Symbols subscribed to minute bars.
    pub bars: BTreeSet<String>,
    /// Symbols subscribed to corrected minute bars (`updatedBars`).
    pub updated_bars: BTreeSet<String>,
    /// Symbols subscribed to daily bars (`dailyBars`).
    pub daily_bars: BTreeSet<String>,
    /// Symbols subscribed to trading statuses.
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
    /// The `success` message `connected`, sent on connect before authentication.
    Connected,
    /// The `success` message `authenticated`: the keys were accepted.
    Authenticated,
    /// A `success` message with any other text.
    Success(String),
    /// An `error` message (bad keys, too many connections, bad subscription, ...).
    Error {
        /// Alpaca's error code (e.g. 402 auth failed, 406 connection limit exceeded).
        code: i64,
        /// Alpaca's message for it.
        msg: String,
    },
    /// A `subscription` message: the whole set of channels now subscribed.
    Subscription(Channels),
}

/// One element of a market-data frame.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// A control message.
    Control(StreamControl),
    /// Market data.
    Market(MarketEvent),
}

pub use crate::domain::{BrokerOrder, Fill, OrderUpdate, UpdateKind};

/// One trade_updates message.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdatesItem {
    /// The keys were accepted (`authorization` with status `authorized`).
    Authorized,
    /// Refused; `action` says what was refused (`authenticate` or `listen`).
    Unauthorized {
        /// The action refused, as Alpaca names it.
        action: String,
    },
    /// The streams now listened to (`listening`), e.g. `trade_updates`.
    Listening(Vec<String>),
    /// An order's event: new, fill, partial fill, canceled, ...
    Update(Box<OrderUpdate>),
}

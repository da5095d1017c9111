//! Market data as the trading core takes it, whatever its source: the [`MarketFeed`] trait, the
//! counterpart of the brokers' `Broker` trait on the way in. Alpaca's stream (`alpaca::feed::AlpacaFeed`), the daemon's bar path
//! (`feed::LiveBars`) and the test doubles implement it; Alpaca's own message types stop at its
//! adapter. Bar aggregation into the configured timeframe ([`Aggregator`]) lives here too: it serves any
//! minute-bar source (`LiveBars`), not Alpaca's adapter alone.

mod aggregate;
mod live_bars;

pub(crate) use aggregate::Aggregator;
pub(crate) use live_bars::LiveBars;

use crate::domain::{Bar, Symbol};
use chrono::{DateTime, Utc};
use std::future::Future;

/// What a feed delivers.
#[derive(Debug, Clone, PartialEq)]
pub enum FeedEvent {
    /// A closed minute bar, each (symbol, time) once, in time order per symbol.
    Bar(Bar),
    /// A minute bar between two bars of a longer timeframe (`LiveBars`, after it is stored): prices
    /// for marking to market, the daily loss limit and the trailing stops, never a decision.
    Mark(Bar),
    /// A late correction of a bar already delivered: replaces it.
    BarUpdated(Bar),
    /// The period starting at `t` closed with bars of other symbols but none of `symbol` (a quiet or
    /// halted stock): its last close is carried (`LiveBars`).
    NoBar { symbol: Symbol, t: DateTime<Utc> },
    /// The exchange changed a symbol's trading status (a halt, a resumption).
    Status { symbol: Symbol, t: DateTime<Utc>, halted: bool, detail: String },
    /// The stream is (again) live; `backfilled` bars were fetched to close the gap.
    Connected { backfilled: usize },
    /// The connection was lost; a reconnect follows.
    Disconnected { reason: String },
}

/// Why a feed gave no event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum FeedError {
    /// A finite feed ended (a replay), or its owner stopped it.
    #[error("market data feed stopped")]
    Stopped,
    /// The feed cannot go on (refused keys, a refused subscription, its task gone): the run stops.
    #[error("{0}")]
    Fatal(String),
    /// The feed recovers by itself (it reconnects).
    #[error("{0}")]
    Transient(String),
}

impl FeedError {
    /// Fatal errors (and the end of the feed) end the run; the rest are logged and the feed read on.
    pub(crate) fn is_fatal(&self) -> bool {
        !matches!(self, FeedError::Transient(_))
    }
}

/// A source of market events: the Alpaca stream, the daemon's bar path over it, a test double.
pub(crate) trait MarketFeed {
    /// The next event. Cancellation-safe for implementations backed by a channel (as `AlpacaFeed` is).
    fn next(&mut self) -> impl Future<Output = Result<FeedEvent, FeedError>> + Send;
}

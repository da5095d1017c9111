//! Market data over Alpaca's WebSocket behind the [`MarketFeed`] trait (`crate::feed`).
//!
//! A background task owns the socket: connect → `connected` → auth → subscribe (the reply is checked
//! against what was asked) → gap backfill over REST → stream. Any loss (close, error, no frame within
//! `silence_timeout` although we ping every `ping_interval`) tears the socket down and reconnects with
//! exponential backoff and jitter; 406 (connection limit) waits the same way, never spins. Bars pass a
//! [`BarGate`] so the consumer sees every minute bar exactly once and in time order per symbol, whether
//! it came from the stream or the backfill.

mod gate;
mod session;
#[cfg(test)]
mod tests;

pub use gate::BarGate;

use crate::alpaca::backoff::Backoff;
use crate::alpaca::rest::{RestClient, RestError};
use crate::config::Secret;
use crate::domain::Symbol;
use crate::feed::{FeedError, FeedEvent, MarketFeed};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;
use url::Url;

/// What went wrong on Alpaca's stream; the runner sees it as a `crate::feed::FeedError`.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Alpaca refused the keys (error 402): fatal until the keys are fixed.
    #[error("market data stream {url}: authentication failed ({msg}); check APCA_API_KEY_ID / APCA_API_SECRET_KEY")]
    Auth {
        /// The stream's URL.
        url: String,
        /// Alpaca's message.
        msg: String,
    },
    /// Alpaca refused the session for good: 405 (symbol limit) or 409 to 413 (plan, feed or scope); fatal.
    #[error("market data stream {url}: refused: {code} {msg}")]
    Refused {
        /// The stream's URL.
        url: String,
        /// Alpaca's error code.
        code: i64,
        /// Alpaca's message.
        msg: String,
    },
    /// Alpaca's `subscription` reply lacks a channel or symbol asked for: fatal.
    #[error("market data stream {url}: the subscription reply does not cover what was asked: {detail}")]
    Subscription {
        /// The stream's URL.
        url: String,
        /// What was asked for and not granted.
        detail: String,
    },
    /// Alpaca kept answering 406 (connection limit exceeded) on reconnect: another client holds the stream.
    #[error("market data stream: connection limit (406) did not clear")]
    ConnectionLimit,
    /// The connection dropped, timed out, went silent or got another error code; the feed reconnects and
    /// backfills the gap.
    #[error("market data stream: {0}")]
    Lost(String),
    /// The REST backfill of missed bars failed.
    #[error("market data backfill: {0}")]
    Backfill(#[from] RestError),
    /// The feed was stopped (its handle dropped or shut down).
    #[error("market data feed stopped")]
    Stopped,
    /// The stream's background task ended without a fatal error to report (it should never): the feed
    /// cannot go on.
    #[error("market data stream: its task ended unexpectedly")]
    Died,
}

impl StreamError {
    /// Fatal errors end the feed; the rest are handled by reconnecting.
    pub fn is_fatal(&self) -> bool {
        match self {
            StreamError::Auth { .. }
            | StreamError::Refused { .. }
            | StreamError::Subscription { .. }
            | StreamError::Stopped
            | StreamError::Died => true,
            // The session sends only backfill errors it cannot recover from (an invalid bar in a page).
            StreamError::Backfill(e) => !e.is_recoverable(),
            StreamError::ConnectionLimit | StreamError::Lost(_) => false,
        }
    }
}

/// How to connect to one of Alpaca's market-data streams and what to ask it for.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// e.g. `wss://stream.data.alpaca.markets/v2/iex`.
    pub url: Url,
    /// The API key id sent in the `auth` message (`APCA_API_KEY_ID`).
    pub key_id: Secret,
    /// The API secret sent in the `auth` message (`APCA_API_SECRET_KEY`).
    pub secret_key: Secret,
    /// The symbols whose minute and updated bars (and statuses, with `statuses`) are subscribed.
    pub symbols: Vec<Symbol>,
    /// Ask for trading statuses (halts) too.
    pub statuses: bool,
    /// How often a WebSocket ping is sent to keep the connection alive.
    pub ping_interval: Duration,
    /// No frame at all (data, control or pong) for this long: the socket is dead.
    pub silence_timeout: Duration,
    /// Connect, handshake and each send must finish within this.
    pub io_timeout: Duration,
    /// The delays between reconnect attempts.
    pub backoff: Backoff,
    /// Backfill from here at the first connect, for symbols without an entry in `resume` (`None`: only
    /// fill gaps after reconnects).
    pub backfill_from: Option<DateTime<Utc>>,
    /// The last minute bar already held per symbol (the daemon's store): the first backfill starts just
    /// after it and no bar up to it is delivered again.
    pub resume: HashMap<Symbol, DateTime<Utc>>,
    /// `iex` or `sip` for the REST backfill.
    pub rest_feed: Option<String>,
}

impl StreamConfig {
    /// Defaults: ping 10 s, silence 30 s, I/O 10 s, backoff 0.5 s doubling to 60 s; trading statuses
    /// for stocks (the crypto stream has none).
    pub fn new(url: Url, key_id: Secret, secret_key: Secret, symbols: Vec<Symbol>) -> Self {
        let statuses = !symbols.iter().any(Symbol::is_crypto);
        StreamConfig {
            url,
            key_id,
            secret_key,
            symbols,
            statuses,
            ping_interval: Duration::from_secs(10),
            silence_timeout: Duration::from_secs(30),
            io_timeout: Duration::from_secs(10),
            backoff: Backoff::STREAM,
            backfill_from: None,
            resume: HashMap::new(),
            rest_feed: None,
        }
    }
}

impl StreamConfig {
    /// The daemon's stream URL and symbols, with `request_timeout` as the I/O timeout.
    pub fn from_config(c: &crate::config::Config, creds: &crate::config::Credentials) -> Self {
        let mut f = StreamConfig::new(
            c.alpaca.stream_url.clone(),
            creds.key_id.clone(),
            creds.secret_key.clone(),
            c.market.symbols.clone(),
        );
        f.io_timeout = c.alpaca.request_timeout;
        f
    }
}

/// The Alpaca market-data feed. Dropping it stops the background task at its next step.
pub struct AlpacaFeed {
    rx: mpsc::Receiver<Result<FeedEvent, StreamError>>,
    task: tokio::task::JoinHandle<()>,
}

impl AlpacaFeed {
    /// Starts the background task; `rest` is used for the gap backfill.
    pub fn start(cfg: StreamConfig, rest: RestClient) -> AlpacaFeed {
        let (tx, rx) = mpsc::channel(1024);
        let task = tokio::spawn(session::run(cfg, rest, tx));
        AlpacaFeed { rx, task }
    }
}

impl AlpacaFeed {
    /// The next event, with Alpaca's error. Cancellation-safe.
    pub async fn recv(&mut self) -> Result<FeedEvent, StreamError> {
        // A live stream never ends on its own: its task ending is fatal, not the end of a finite feed.
        self.rx.recv().await.unwrap_or(Err(StreamError::Died))
    }
}

impl MarketFeed for AlpacaFeed {
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        Ok(self.recv().await?)
    }
}

impl From<StreamError> for FeedError {
    fn from(e: StreamError) -> FeedError {
        match e {
            StreamError::Stopped => FeedError::Stopped,
            e if e.is_fatal() => FeedError::Fatal(e.to_string()),
            e => FeedError::Transient(e.to_string()),
        }
    }
}

impl Drop for AlpacaFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

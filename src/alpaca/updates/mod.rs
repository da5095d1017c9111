//! The trade_updates stream: order events from Alpaca. A background task connects, authenticates (the
//! current `auth` form), listens to `trade_updates`, and forwards every update; text and binary frames
//! both work (paper sends binary). Lost connections (close, error, silence despite pings) reconnect with
//! backoff and jitter; after every reconnect a `Connected { reconnect: true }` tells the order manager
//! to reconcile over REST, since events may have been missed; new orders should wait for it.

mod session;
#[cfg(test)]
mod tests;

use crate::alpaca::backoff::Backoff;
use crate::alpaca::event::OrderUpdate;
use crate::config::Secret;
use std::time::Duration;
use tokio::sync::mpsc;
use url::Url;

/// What the trade_updates stream tells the broker task: order events and the connection's ups and downs.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdatesEvent {
    /// An order event (`new`, `fill`, `partial_fill`, `canceled`, ...), parsed.
    Order(Box<OrderUpdate>),
    /// Listening. `reconnect`: not the first connection, so reconcile open orders before trading on.
    Connected {
        /// True on every connection after the first: updates may have been missed while down.
        reconnect: bool,
    },
    /// The connection was lost; the stream reconnects with backoff on its own.
    Disconnected {
        /// Why it was lost, for the log.
        reason: String,
    },
}

/// Why the trade_updates stream ended for good (anything else is retried).
#[derive(Debug, thiserror::Error)]
pub enum UpdatesError {
    #[error(
        "trade_updates stream {url}: the API keys were refused; check APCA_API_KEY_ID / APCA_API_SECRET_KEY \
         and that they belong to this environment (paper or live)"
    )]
    /// Alpaca answered the `auth` message with `unauthorized`.
    Auth {
        /// The stream's URL.
        url: String,
    },
    /// The stream's task ended (its handle was dropped or it was shut down).
    #[error("trade_updates stream stopped")]
    Stopped,
}

/// How to connect to the trade_updates stream.
#[derive(Debug, Clone)]
pub struct UpdatesConfig {
    /// `wss://paper-api.alpaca.markets/stream`.
    pub url: Url,
    /// The API key id sent in the `auth` action (`APCA_API_KEY_ID`).
    pub key_id: Secret,
    /// The API secret sent in the `auth` action (`APCA_API_SECRET_KEY`).
    pub secret_key: Secret,
    /// How often a WebSocket ping is sent to keep the connection alive.
    pub ping_interval: Duration,
    /// No frame at all (update, control or pong) for this long: the socket is dead and is reconnected.
    pub silence_timeout: Duration,
    /// Connect, handshake and each send must finish within this.
    pub io_timeout: Duration,
    /// The delays between reconnect attempts.
    pub backoff: Backoff,
}

impl UpdatesConfig {
    /// Settings for `url` with these keys and the defaults: ping every 10 s, dead after 30 s of silence,
    /// 10 s I/O timeout, the streams' backoff.
    pub fn new(url: Url, key_id: Secret, secret_key: Secret) -> Self {
        UpdatesConfig {
            url,
            key_id,
            secret_key,
            ping_interval: Duration::from_secs(10),
            silence_timeout: Duration::from_secs(30),
            io_timeout: Duration::from_secs(10),
            backoff: Backoff::STREAM,
        }
    }
}

impl UpdatesConfig {
    /// The daemon's trade_updates URL, with `request_timeout` as the I/O timeout.
    pub fn from_config(c: &crate::config::Config, creds: &crate::config::Credentials) -> Self {
        let mut u =
            UpdatesConfig::new(c.alpaca.trade_updates_url.clone(), creds.key_id.clone(), creds.secret_key.clone());
        u.io_timeout = c.alpaca.request_timeout;
        u
    }
}

/// A running trade_updates stream. Dropping it stops the task.
pub struct TradeUpdates {
    rx: mpsc::Receiver<Result<UpdatesEvent, UpdatesError>>,
    task: tokio::task::JoinHandle<()>,
}

impl TradeUpdates {
    /// Connects in a background task (authenticate, then listen to `trade_updates`) and reconnects it on
    /// loss until stopped or the keys are refused.
    pub fn start(cfg: UpdatesConfig) -> TradeUpdates {
        let (tx, rx) = mpsc::channel(1024);
        TradeUpdates { rx, task: tokio::spawn(session::run(cfg, tx)) }
    }

    /// The next event. Cancellation-safe (a channel receive).
    pub async fn next(&mut self) -> Result<UpdatesEvent, UpdatesError> {
        self.rx.recv().await.unwrap_or(Err(UpdatesError::Stopped))
    }
}

impl Drop for TradeUpdates {
    fn drop(&mut self) {
        self.task.abort();
    }
}

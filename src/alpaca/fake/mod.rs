//! A fake Alpaca for tests and local runs: real HTTP and real WebSockets on `127.0.0.1`, speaking the
//! protocol of `shared/alpaca-protocol.md`, with its own account (`book`), a bar store for the data REST
//! API and the streams, a log of what clients sent, and faults on demand.
//!
//! - `rest`: trading REST and data REST (`bars`: bars with `next_page_token`), behind a gate that checks
//!   keys, logs every request and injects queued [`Fault`]s.
//! - `market_ws`: the market-data stream (`/v2/{iex,sip,test}`, `/v1beta3/crypto/us`).
//! - `updates_ws`: the trade_updates stream (`/stream`).
//! - `market`: a seeded synthetic market (minute bars on the fake's clock, orders filling at the next bar).
//! - `rules`: Alpaca's order rules the book applies to every new order (time in force per asset class,
//!   crypto quantity steps and minimums, wash-trade prevention), with Alpaca's status codes and messages.

mod bars;
mod book;
mod market;
mod market_ws;
mod rest;
pub mod rules;
mod updates_ws;

pub use book::Book;
pub use market::MarketSpec;

use crate::alpaca::wire::market as wm;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::broadcast;
use url::Url;

/// An Alpaca error response: the status and the JSON body `{"code", "message"}`.
fn error(status: u16, code: Option<i64>, message: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let s = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (s, axum::Json(crate::alpaca::wire::rest::ErrorBody { code, message: message.into() })).into_response()
}

/// The API key id the fake accepts (unless `Shared::keys` is changed).
pub const KEY_ID: &str = "PKFAKEKEYID";
/// The API secret the fake accepts (unless `Shared::keys` is changed).
pub const SECRET_KEY: &str = "fakesecretkey";

/// A fault the REST gate applies to the next request(s), in queue order.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// HTTP 429 with `Retry-After` and `X-RateLimit-*` headers.
    RateLimited {
        /// The wait the reply asks for, in seconds (`Retry-After`).
        retry_after_secs: u64,
    },
    /// HTTP 500 before doing anything.
    ServerError,
    /// Carry the request out, then answer 500 anyway (the ambiguous case for an order POST).
    ServerErrorAfterProcessing,
    /// Wait this long before handling the request.
    Slow(Duration),
    /// Fill the held orders (`Book::fill_held`), then handle the request: a fill landing between two calls.
    FillHeld,
}

/// What a client sent over REST, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The HTTP method, e.g. `GET`.
    pub method: String,
    /// The URL path, e.g. `/v2/orders`.
    pub path: String,
    /// The raw query string (empty when none).
    pub query: String,
    /// When it arrived, on the runtime's clock.
    pub at: tokio::time::Instant,
}

/// Commands to the open trade_updates sockets.
#[derive(Debug, Clone)]
pub(crate) enum UpdCmd {
    Msg(String),
    Drop,
}

/// Commands to the open market-data sockets.
#[derive(Debug, Clone)]
pub(crate) enum WsCmd {
    /// A bar for subscribers of its symbol.
    Bar(wm::Bar),
    /// Any frame, to every authenticated socket.
    Raw(String),
    /// Close the TCP connection without a close frame.
    Drop,
    /// Stop sending and stop reading (no pongs) for this long, then close: a half-dead socket (it counts
    /// against the connection limit meanwhile, as at Alpaca).
    Silence(Duration),
}

/// The fake's whole state, behind one lock: the account, the bar store, queued faults, the connection limits
/// and counters, and a log of everything clients sent.
#[derive(Debug)]
pub struct Shared {
    /// The account, its positions and orders.
    pub book: Book,
    /// symbol → 1Min bars in time order, served by the data REST API.
    pub bars: BTreeMap<String, Vec<wm::Bar>>,
    /// Faults for the next REST requests, applied one per request in order.
    pub faults: VecDeque<Fault>,
    /// Faults for the next order POSTs only (`POST /v2/orders`), before those of `faults`.
    pub order_faults: VecDeque<Fault>,
    /// Until then every REST request is answered 429 with only `X-RateLimit-Reset` (as Alpaca does). On the
    /// runtime's clock, so that a test on paused time waits the window out at once.
    pub rate_limited_until: Option<tokio::time::Instant>,
    /// Every REST request received, in order.
    pub requests: Vec<Recorded>,
    /// Text of every frame market-data clients sent, in order.
    pub market_received: Vec<String>,
    /// Text of every frame trade_updates clients sent, in order.
    pub updates_received: Vec<String>,
    /// Market-data connections accepted so far (the 406 refusals not counted).
    pub market_connections: usize,
    /// Market-data connections open now (what the connection limit counts).
    pub market_active: usize,
    /// trade_updates connections accepted so far.
    pub updates_connections: usize,
    /// Market-data connections refused with 406.
    pub market_refused: usize,
    /// Market-data connections cut off with 407 (`slow client`): their client fell further behind than
    /// the fake's buffer holds.
    pub market_slow_clients: usize,
    /// More simultaneous market-data connections than this get 406.
    pub max_market_connections: usize,
    /// Refuse the next N market-data connections with 406 even under the limit.
    pub refuse_next_connections: usize,
    /// The (key id, secret) pair accepted by the REST gate and both streams.
    pub keys: (String, String),
}

/// A running fake Alpaca. Dropping it stops the server.
pub struct FakeAlpaca {
    /// Where it listens (`127.0.0.1` and the port bound).
    pub addr: SocketAddr,
    state: Arc<Mutex<Shared>>,
    market_tx: broadcast::Sender<WsCmd>,
    updates_tx: broadcast::Sender<UpdCmd>,
    task: tokio::task::JoinHandle<()>,
    market: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

#[derive(Clone)]
pub(crate) struct App {
    pub state: Arc<Mutex<Shared>>,
    pub market_tx: broadcast::Sender<WsCmd>,
    pub updates_tx: broadcast::Sender<UpdCmd>,
}

impl App {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl FakeAlpaca {
    /// Starts on `127.0.0.1:port` (0 = any free port) with $100,000 cash and the keys [`KEY_ID`] /
    /// [`SECRET_KEY`]. Cancellation-safe (nothing is listening until it returns).
    pub async fn start(port: u16) -> std::io::Result<FakeAlpaca> {
        let state = Arc::new(Mutex::new(Shared {
            book: Book::new(Decimal::from(100_000)),
            bars: BTreeMap::new(),
            faults: VecDeque::new(),
            order_faults: VecDeque::new(),
            rate_limited_until: None,
            requests: Vec::new(),
            market_received: Vec::new(),
            updates_received: Vec::new(),
            market_connections: 0,
            market_active: 0,
            updates_connections: 0,
            market_refused: 0,
            market_slow_clients: 0,
            max_market_connections: 1,
            refuse_next_connections: 0,
            keys: (KEY_ID.into(), SECRET_KEY.into()),
        }));
        let (market_tx, _) = broadcast::channel(4096);
        let (updates_tx, _) = broadcast::channel(1024);
        let app = App { state: state.clone(), market_tx: market_tx.clone(), updates_tx: updates_tx.clone() };
        let router = rest::router(app.clone()).merge(market_ws::router(app.clone())).merge(updates_ws::router(app));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        // Each frame leaves at once, as the clients' sockets send theirs: with Nagle's algorithm a frame
        // written while the one before waits for the client's delayed ACK is held up to 40 ms, which a
        // test on paused time sees as a socket with nothing to read (its clock jumps to the next timer).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
            if let Err(e) = tcp.set_nodelay(true) {
                log::warn!("fake alpaca: TCP_NODELAY: {e}");
            }
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                log::error!("fake alpaca: server stopped: {e}");
            }
        });
        Ok(FakeAlpaca { addr, state, market_tx, updates_tx, task, market: Mutex::new(Vec::new()) })
    }

    /// The fake's state, for a test to read or change directly (a poisoned lock is taken over).
    pub fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `http://127.0.0.1:PORT/`: the trading and the data base URL.
    pub fn http_url(&self) -> Url {
        Url::parse(&format!("http://{}/", self.addr))
            .unwrap_or_else(|_| unreachable!("a socket address is a valid host"))
    }

    /// `ws://127.0.0.1:PORT/{path}`, e.g. `v2/iex` or `stream`.
    pub fn ws_url(&self, path: &str) -> Url {
        Url::parse(&format!("ws://{}/{path}", self.addr))
            .unwrap_or_else(|_| unreachable!("a socket address is a valid host"))
    }

    /// The `[alpaca]` section of a config pointed at this fake, its market stream on `stream_path`
    /// (`v2/iex`, `v1beta3/crypto/us`, ...), with a 2 s request timeout; other keys may follow it.
    pub fn alpaca_section(&self, stream_path: &str) -> String {
        format!(
            "[alpaca]\ntrading_url = \"{http}\"\ndata_url = \"{http}\"\nstream_url = \"{market}\"\ntrade_updates_url = \"{updates}\"\nrequest_timeout_secs = 2\n",
            http = self.http_url(),
            market = self.ws_url(stream_path),
            updates = self.ws_url("stream"),
        )
    }

    /// A REST configuration for this fake: both hosts on it, its keys, a 5 s timeout, the default retry
    /// policy and Alpaca's limits. Tests override what they exercise with struct-update syntax.
    pub fn rest_config(&self) -> crate::alpaca::rest::RestConfig {
        use crate::alpaca::rest::{RateLimit, RestConfig, RetryPolicy};
        RestConfig {
            trading_url: self.http_url(),
            data_url: self.http_url(),
            key_id: crate::config::Secret::new(KEY_ID),
            secret_key: crate::config::Secret::new(SECRET_KEY),
            timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            trading_limit: RateLimit::TRADING,
            data_limit: RateLimit::DATA_FREE,
        }
    }

    /// Runs a synthetic market (see `market`) on `clock` (the wall clock when `None`) until the fake stops.
    pub fn run_market(&self, spec: MarketSpec, clock: Option<crate::clock::SimClock>) {
        let app =
            App { state: self.state.clone(), market_tx: self.market_tx.clone(), updates_tx: self.updates_tx.clone() };
        self.market.lock().unwrap_or_else(|p| p.into_inner()).push(tokio::spawn(market::run(app, spec, clock)));
    }

    /// Sets `symbol`'s last price in dollars: market orders fill at it and positions are valued at it.
    pub fn set_price(&self, symbol: &str, price: Decimal) {
        self.lock().book.prices.insert(symbol.into(), price);
    }

    /// Queues a fault for the next REST request (after those already queued).
    pub fn push_fault(&self, f: Fault) {
        self.lock().faults.push_back(f);
    }

    /// Queues a fault for the next order POST, whatever requests come before it.
    pub fn push_order_fault(&self, f: Fault) {
        self.lock().order_faults.push_back(f);
    }

    /// Answers every REST request 429 for `d` from now, with `X-RateLimit-Reset` at the window's end and
    /// no `Retry-After`: Alpaca's per-minute window, as a client meets it.
    pub fn rate_limit_for(&self, d: Duration) {
        self.lock().rate_limited_until = tokio::time::Instant::now().checked_add(d);
    }

    /// Adds a bar to the REST store (the symbol's price becomes its close) and streams it to subscribers.
    pub fn publish_bar(&self, symbol: &str, bar: wm::Bar) {
        let mut rest_bar = bar.clone();
        rest_bar.symbol = None;
        {
            let mut s = self.lock();
            if let Some(p) = Decimal::from_f64_retain(bar.c) {
                s.book.prices.insert(symbol.into(), p);
            }
            s.bars.entry(symbol.into()).or_default().push(rest_bar);
        }
        let _ = self.market_tx.send(WsCmd::Bar(wm::Bar { symbol: Some(symbol.into()), ..bar }));
    }

    /// Adds bars to the REST store only (history the stream never sent).
    pub fn store_bars(&self, symbol: &str, bars: Vec<wm::Bar>) {
        self.lock().bars.entry(symbol.into()).or_default().extend(bars);
    }

    /// Sends a raw frame to every authenticated market-data socket.
    pub fn send_market_raw(&self, frame: &str) {
        let _ = self.market_tx.send(WsCmd::Raw(frame.into()));
    }

    /// Drops every open market-data socket without a close frame.
    pub fn drop_market_sockets(&self) {
        let _ = self.market_tx.send(WsCmd::Drop);
    }

    /// Makes every open market-data socket half-dead: nothing sent, nothing read, no pongs.
    pub fn silence_market_sockets(&self) {
        self.silence_market_sockets_for(Duration::from_secs(300));
    }

    /// Makes every open market-data socket half-dead for `d`, then closes it.
    pub fn silence_market_sockets_for(&self, d: Duration) {
        let _ = self.market_tx.send(WsCmd::Silence(d));
    }

    /// Sends a raw message to every listening trade_updates socket.
    pub fn send_update_raw(&self, msg: &str) {
        let _ = self.updates_tx.send(UpdCmd::Msg(msg.into()));
    }

    /// Drops every open trade_updates socket without a close frame.
    pub fn drop_update_sockets(&self) {
        let _ = self.updates_tx.send(UpdCmd::Drop);
    }

    /// Market-data connections accepted so far (406 refusals not counted).
    pub fn market_connections(&self) -> usize {
        self.lock().market_connections
    }

    /// REST requests received so far whose path is `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.lock().requests.iter().filter(|r| r.method == method && r.path == path).count()
    }
}

impl Drop for FakeAlpaca {
    fn drop(&mut self) {
        self.task.abort();
        self.market.get_mut().unwrap_or_else(|p| p.into_inner()).iter().for_each(|t| t.abort());
    }
}

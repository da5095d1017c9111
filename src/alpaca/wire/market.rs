//! Market-data WebSocket messages (stocks `v2/{iex,sip}`, crypto `v1beta3/crypto/us`), as JSON text.
//! A frame is a JSON array of these; each element is decoded on its own (see `parse::market_frame`).

use serde::{Deserialize, Serialize};

/// One element of a market-data frame, tagged by `T`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "T")]
pub enum StreamMsg {
    /// `success`: `connected` or `authenticated`.
    #[serde(rename = "success")]
    Success {
        /// The text: `connected`, `authenticated`, ...
        msg: String,
    },
    /// `error`: a refusal or failure, e.g. bad keys or a connection limit.
    #[serde(rename = "error")]
    Error {
        /// Alpaca's error code (e.g. 402 auth failed).
        code: i64,
        /// Alpaca's message for it.
        msg: String,
    },
    /// `subscription`: the whole set of channels now subscribed.
    #[serde(rename = "subscription")]
    Subscription(Subscription),
    /// `t`: a trade.
    #[serde(rename = "t")]
    Trade(Trade),
    /// `q`: a quote.
    #[serde(rename = "q")]
    Quote(Quote),
    /// `b`: a minute bar.
    #[serde(rename = "b")]
    Bar(Bar),
    /// `d`: the day's bar so far.
    #[serde(rename = "d")]
    DailyBar(Bar),
    /// `u`: a minute bar corrected by a late trade.
    #[serde(rename = "u")]
    UpdatedBar(Bar),
    /// `s`: a trading status (halt, resume).
    #[serde(rename = "s")]
    Status(Status),
    /// `l`: limit-up/limit-down bands.
    #[serde(rename = "l")]
    Luld(Luld),
    /// `i`: an order imbalance.
    #[serde(rename = "i")]
    Imbalance(Imbalance),
    /// `c`: a trade correction.
    #[serde(rename = "c")]
    Correction(Correction),
    /// `x`: a trade cancel or error.
    #[serde(rename = "x")]
    CancelError(CancelError),
    /// `o`: a crypto order-book update.
    #[serde(rename = "o")]
    OrderBook(OrderBook),
    /// `n`: a news article.
    #[serde(rename = "n")]
    News(News),
    /// Any other `T`: skipped and counted, never an error.
    #[serde(other)]
    Unknown,
}

/// The full set of current channels, sent after every (un)subscribe. Keys vary by endpoint; any may be
/// absent or `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// `trades`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub trades: Vec<String>,
    /// `quotes`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<String>,
    /// `bars` (minute bars): the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub bars: Vec<String>,
    /// `updatedBars`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub updated_bars: Vec<String>,
    /// `dailyBars`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub daily_bars: Vec<String>,
    /// `statuses`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    /// `lulds`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub lulds: Vec<String>,
    /// `corrections`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub corrections: Vec<String>,
    /// `cancelErrors`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub cancel_errors: Vec<String>,
    /// `imbalances`: the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub imbalances: Vec<String>,
    /// `orderbooks` (crypto): the symbols subscribed (`*` = all).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub orderbooks: Vec<String>,
}

/// A trade. Stocks carry `x`, `c`, `z`; crypto carries `tks` and a fractional `s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trade {
    /// `S`: the symbol (`AAPL`, `BTC/USD`).
    #[serde(rename = "S")]
    pub symbol: String,
    /// `i`: the trade id; absent on some feeds.
    #[serde(rename = "i", default)]
    pub id: Option<u64>,
    /// `x`: the exchange code (stocks).
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    /// `p`: the price, in dollars.
    #[serde(rename = "p")]
    pub price: f64,
    /// `s`: the size: whole shares for stocks, fractional units for crypto.
    #[serde(rename = "s")]
    pub size: f64,
    /// `c`: the trade condition codes (stocks).
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<String>>,
    /// `t`: the trade time, RFC 3339 with nanoseconds, UTC.
    #[serde(rename = "t")]
    pub time: String,
    /// `z`: the SIP tape, `A` to `C` (stocks).
    #[serde(rename = "z", default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<String>,
    /// `tks`: the taker's side, `B` buy or `S` sell (crypto).
    #[serde(rename = "tks", default, skip_serializing_if = "Option::is_none")]
    pub taker_side: Option<String>,
}

/// A quote. Crypto quotes have no exchanges, conditions or tape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    /// `S`: the symbol.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `bx`: the bid's exchange code (stocks).
    #[serde(rename = "bx", default, skip_serializing_if = "Option::is_none")]
    pub bid_exchange: Option<String>,
    /// `bp`: the best bid, in dollars.
    #[serde(rename = "bp")]
    pub bid_price: f64,
    /// `bs`: the bid size: round lots for stocks, units for crypto.
    #[serde(rename = "bs")]
    pub bid_size: f64,
    /// `ax`: the ask's exchange code (stocks).
    #[serde(rename = "ax", default, skip_serializing_if = "Option::is_none")]
    pub ask_exchange: Option<String>,
    /// `ap`: the best ask, in dollars.
    #[serde(rename = "ap")]
    pub ask_price: f64,
    /// `as`: the ask size: round lots for stocks, units for crypto.
    #[serde(rename = "as")]
    pub ask_size: f64,
    /// `c`: the quote condition codes (stocks).
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<String>>,
    /// `t`: the quote time, RFC 3339, UTC.
    #[serde(rename = "t")]
    pub time: String,
    /// `z`: the SIP tape (stocks).
    #[serde(rename = "z", default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<String>,
}

/// A bar (`b` minute, `d` daily, `u` updated). Also the element of REST bars pages, where `S` is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// `S`: the symbol; absent in REST bars pages, where the page's map key names it.
    #[serde(rename = "S", default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Open price, in dollars.
    pub o: f64,
    /// High price, in dollars.
    pub h: f64,
    /// Low price, in dollars.
    pub l: f64,
    /// Close price, in dollars.
    pub c: f64,
    /// An integer for stocks, fractional for crypto.
    pub v: f64,
    /// The bar's start time, RFC 3339, UTC.
    pub t: String,
    /// Number of trades in the bar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Volume-weighted average price of the bar, in dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vw: Option<f64>,
}

/// A trading status (halt `H`, resume `T`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `S`: the stock.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `sc`: the status code (UTP: `H` halted, `T` trading, ...).
    pub sc: String,
    /// `sm`: the status in words.
    #[serde(default)]
    pub sm: String,
    /// `rc`: the reason code.
    #[serde(default)]
    pub rc: String,
    /// `rm`: the reason in words.
    #[serde(default)]
    pub rm: String,
    /// `t`: when the status changed, RFC 3339, UTC.
    pub t: String,
    /// `z`: the SIP tape.
    #[serde(default)]
    pub z: String,
}

/// Limit-up / limit-down bands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Luld {
    /// `S`: the stock.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `u`: the limit-up price, in dollars.
    pub u: f64,
    /// `d`: the limit-down price, in dollars.
    pub d: f64,
    /// `i`: the LULD indicator.
    pub i: String,
    /// `t`: when the bands were set, RFC 3339, UTC.
    pub t: String,
    /// `z`: the SIP tape.
    #[serde(default)]
    pub z: String,
}

/// An order imbalance (auction) price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imbalance {
    /// `S`: the stock.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `p`: the imbalance reference price, in dollars.
    pub p: f64,
    /// `t`: when it was published, RFC 3339, UTC.
    pub t: String,
    /// `z`: the SIP tape.
    #[serde(default)]
    pub z: String,
}

/// A trade correction: original (`o*`) and corrected (`c*`) trade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    /// `S`: the stock.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `x`: the exchange code.
    pub x: String,
    /// `oi`: the original trade's id.
    pub oi: u64,
    /// `op`: the original trade's price, in dollars.
    pub op: f64,
    /// `os`: the original trade's size, in shares.
    pub os: f64,
    /// `oc`: the original trade's condition codes.
    #[serde(default)]
    pub oc: Vec<String>,
    /// `ci`: the corrected trade's id.
    pub ci: u64,
    /// `cp`: the corrected price, in dollars.
    pub cp: f64,
    /// `cs`: the corrected size, in shares.
    pub cs: f64,
    /// `cc`: the corrected condition codes.
    #[serde(default)]
    pub cc: Vec<String>,
    /// `t`: when the correction was made, RFC 3339, UTC.
    pub t: String,
    /// `z`: the SIP tape.
    #[serde(default)]
    pub z: String,
}

/// A trade cancel (`a` = `C`) or error (`a` = `E`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelError {
    /// `S`: the stock.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `i`: the id of the trade canceled.
    pub i: u64,
    /// `x`: the exchange code.
    pub x: String,
    /// `p`: the trade's price, in dollars.
    pub p: f64,
    /// `s`: the trade's size, in shares.
    pub s: f64,
    /// `a`: the action, `C` cancel or `E` error.
    pub a: String,
    /// `t`: when it was canceled, RFC 3339, UTC.
    pub t: String,
    /// `z`: the SIP tape.
    #[serde(default)]
    pub z: String,
}

/// A crypto order book update; `r` = full snapshot, a level with `s` = 0 is deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderBook {
    /// `S`: the pair, e.g. `BTC/USD`.
    #[serde(rename = "S")]
    pub symbol: String,
    /// `t`: when the book changed, RFC 3339, UTC.
    pub t: String,
    /// `b`: the bid levels changed.
    #[serde(default)]
    pub b: Vec<BookLevel>,
    /// `a`: the ask levels changed.
    #[serde(default)]
    pub a: Vec<BookLevel>,
    /// `r`: true when this is the whole book (a reset), typically the first message after subscribing.
    #[serde(default)]
    pub r: bool,
}

/// One price level of an `OrderBook` (`{"p":…,"s":…}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookLevel {
    /// `p`: the level's price, in dollars.
    pub p: f64,
    /// `s`: the units at it; 0 deletes the level.
    pub s: f64,
}

/// A news article (news stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct News {
    /// Alpaca's article id.
    pub id: i64,
    /// The article's headline.
    pub headline: String,
    /// A short summary (may be empty).
    #[serde(default)]
    pub summary: String,
    /// The author as Alpaca gives it (may be empty).
    #[serde(default)]
    pub author: String,
    /// The article's full text (may be empty).
    #[serde(default)]
    pub content: String,
    /// The article's address on its source's site, if any.
    #[serde(default)]
    pub url: Option<String>,
    /// The symbols the article is tagged with.
    #[serde(default)]
    pub symbols: Vec<String>,
    /// When it was published, RFC 3339, UTC.
    pub created_at: String,
    /// When it was last changed, RFC 3339, UTC.
    pub updated_at: String,
    /// The news source (e.g. `benzinga`), if given.
    #[serde(default)]
    pub source: Option<String>,
}

/// Client → server: `{"action":"auth","key":..,"secret":..}`. The fake server reads it with this type too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthRequest {
    /// `auth` (the only action this message carries).
    pub action: String,
    /// The API key id (`APCA_API_KEY_ID`).
    pub key: String,
    /// The API secret (`APCA_API_SECRET_KEY`).
    pub secret: String,
}

/// Client → server: `{"action":"subscribe"|"unsubscribe", "trades":[..], ...}`. Absent keys, `null` and `[]`
/// all mean "none" (Go sends every key, alpaca-py puts `action` last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscribeRequest {
    /// `subscribe` or `unsubscribe`.
    pub action: String,
    /// The channels and symbols to add or remove, as top-level keys next to `action`.
    #[serde(flatten)]
    pub channels: Subscription,
}

/// Missing and `null` lists both become empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

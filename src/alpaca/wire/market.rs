//! Market-data WebSocket messages (stocks `v2/{iex,sip}`, crypto `v1beta3/crypto/us`), as JSON text.
//! A frame is a JSON array of these; each element is decoded on its own (see `parse::market_frame`).

use serde::{Deserialize, Serialize};

/// One element of a market-data frame, tagged by `T`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "T")]
pub enum StreamMsg {
    #[serde(rename = "success")]
    Success { msg: String },
    #[serde(rename = "error")]
    Error { code: i64, msg: String },
    #[serde(rename = "subscription")]
    Subscription(Subscription),
    #[serde(rename = "t")]
    Trade(Trade),
    #[serde(rename = "q")]
    Quote(Quote),
    #[serde(rename = "b")]
    Bar(Bar),
    #[serde(rename = "d")]
    DailyBar(Bar),
    #[serde(rename = "u")]
    UpdatedBar(Bar),
    #[serde(rename = "s")]
    Status(Status),
    #[serde(rename = "l")]
    Luld(Luld),
    #[serde(rename = "i")]
    Imbalance(Imbalance),
    #[serde(rename = "c")]
    Correction(Correction),
    #[serde(rename = "x")]
    CancelError(CancelError),
    #[serde(rename = "o")]
    OrderBook(OrderBook),
    #[serde(rename = "n")]
    News(News),
    #[serde(other)]
    Unknown,
}

/// The full set of current channels, sent after every (un)subscribe. Keys vary by endpoint; any may be
/// absent or `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub trades: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub bars: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub updated_bars: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub daily_bars: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub lulds: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub corrections: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub cancel_errors: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub imbalances: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub orderbooks: Vec<String>,
}

/// A trade. Stocks carry `x`, `c`, `z`; crypto carries `tks` and a fractional `s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trade {
    #[serde(rename = "S")]
    pub symbol: String,
    #[serde(rename = "i", default)]
    pub id: Option<u64>,
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    #[serde(rename = "p")]
    pub price: f64,
    #[serde(rename = "s")]
    pub size: f64,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<String>>,
    #[serde(rename = "t")]
    pub time: String,
    #[serde(rename = "z", default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<String>,
    #[serde(rename = "tks", default, skip_serializing_if = "Option::is_none")]
    pub taker_side: Option<String>,
}

/// A quote. Crypto quotes have no exchanges, conditions or tape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    #[serde(rename = "S")]
    pub symbol: String,
    #[serde(rename = "bx", default, skip_serializing_if = "Option::is_none")]
    pub bid_exchange: Option<String>,
    #[serde(rename = "bp")]
    pub bid_price: f64,
    #[serde(rename = "bs")]
    pub bid_size: f64,
    #[serde(rename = "ax", default, skip_serializing_if = "Option::is_none")]
    pub ask_exchange: Option<String>,
    #[serde(rename = "ap")]
    pub ask_price: f64,
    #[serde(rename = "as")]
    pub ask_size: f64,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<String>>,
    #[serde(rename = "t")]
    pub time: String,
    #[serde(rename = "z", default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<String>,
}

/// A bar (`b` minute, `d` daily, `u` updated). Also the element of REST bars pages, where `S` is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    #[serde(rename = "S", default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    pub o: f64,
    pub h: f64,
    pub l: f64,
    pub c: f64,
    /// An integer for stocks, fractional for crypto.
    pub v: f64,
    pub t: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vw: Option<f64>,
}

/// A trading status (halt `H`, resume `T`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    #[serde(rename = "S")]
    pub symbol: String,
    pub sc: String,
    #[serde(default)]
    pub sm: String,
    #[serde(default)]
    pub rc: String,
    #[serde(default)]
    pub rm: String,
    pub t: String,
    #[serde(default)]
    pub z: String,
}

/// Limit-up / limit-down bands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Luld {
    #[serde(rename = "S")]
    pub symbol: String,
    pub u: f64,
    pub d: f64,
    pub i: String,
    pub t: String,
    #[serde(default)]
    pub z: String,
}

/// An order imbalance (auction) price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imbalance {
    #[serde(rename = "S")]
    pub symbol: String,
    pub p: f64,
    pub t: String,
    #[serde(default)]
    pub z: String,
}

/// A trade correction: original (`o*`) and corrected (`c*`) trade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    #[serde(rename = "S")]
    pub symbol: String,
    pub x: String,
    pub oi: u64,
    pub op: f64,
    pub os: f64,
    #[serde(default)]
    pub oc: Vec<String>,
    pub ci: u64,
    pub cp: f64,
    pub cs: f64,
    #[serde(default)]
    pub cc: Vec<String>,
    pub t: String,
    #[serde(default)]
    pub z: String,
}

/// A trade cancel (`a` = `C`) or error (`a` = `E`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelError {
    #[serde(rename = "S")]
    pub symbol: String,
    pub i: u64,
    pub x: String,
    pub p: f64,
    pub s: f64,
    pub a: String,
    pub t: String,
    #[serde(default)]
    pub z: String,
}

/// A crypto order book update; `r` = full snapshot, a level with `s` = 0 is deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderBook {
    #[serde(rename = "S")]
    pub symbol: String,
    pub t: String,
    #[serde(default)]
    pub b: Vec<BookLevel>,
    #[serde(default)]
    pub a: Vec<BookLevel>,
    #[serde(default)]
    pub r: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookLevel {
    pub p: f64,
    pub s: f64,
}

/// A news article (news stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct News {
    pub id: i64,
    pub headline: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub symbols: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub source: Option<String>,
}

/// Client → server: `{"action":"auth","key":..,"secret":..}`. The fake server reads it with this type too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthRequest {
    pub action: String,
    pub key: String,
    pub secret: String,
}

/// Client → server: `{"action":"subscribe"|"unsubscribe", "trades":[..], ...}`. Absent keys, `null` and `[]`
/// all mean "none" (Go sends every key, alpaca-py puts `action` last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscribeRequest {
    pub action: String,
    #[serde(flatten)]
    pub channels: Subscription,
}

/// Missing and `null` lists both become empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

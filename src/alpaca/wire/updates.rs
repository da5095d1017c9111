//! The trade_updates WebSocket: single JSON objects `{"stream": .., "data": ..}` (text on live, binary
//! frames holding JSON on paper). Order objects inside are the REST [`Order`].

use super::rest::Order;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One trade_updates message, tagged by `stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", content = "data")]
pub enum UpdatesMsg {
    /// `authorization`: the reply to the auth message.
    #[serde(rename = "authorization")]
    Authorization(Authorization),
    /// `listening`: the reply to a listen request.
    #[serde(rename = "listening")]
    Listening(Listening),
    /// `trade_updates`: an order event.
    #[serde(rename = "trade_updates")]
    TradeUpdate(Box<TradeUpdate>),
    /// Any other `stream`: skipped.
    #[serde(other)]
    Unknown,
}

/// `{"status":"authorized"|"unauthorized","action":"authenticate"|"listen"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Authorization {
    /// `authorized` or `unauthorized`.
    pub status: String,
    /// The action answered: `authenticate` (also for the current `auth` form) or `listen`.
    #[serde(default)]
    pub action: String,
}

/// `{"streams":[..]}`: the streams listened to, in a listen request or its reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listening {
    /// The stream names, e.g. `trade_updates`; the list replaces the set, `[]` stops.
    #[serde(default)]
    pub streams: Vec<String>,
}

/// The `data` of a trade update. Which optional fields are present depends on the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TradeUpdate {
    /// What happened to the order.
    pub event: TradeEvent,
    /// The order after the event: the full REST order object.
    pub order: Order,
    /// When the event happened, RFC 3339 (documented for fills, cancels, expiries, replaces, rejections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Fills only: this fill's price, in dollars, as a decimal string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// Fills only: this fill's quantity, in units, as a decimal string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qty: Option<String>,
    /// Fills only: the account's position in the symbol after the fill (negative when short), a decimal string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_qty: Option<String>,
    /// Fills: the execution's id (a UUID), unique per fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Newer messages: when Alpaca sent the event, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// ULID-like string in 2025 examples; kept as any JSON value so a number would not fail the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<serde_json::Value>,
    /// Multi-leg option fills: symbol → position quantity after the fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_qtys: Option<BTreeMap<String, String>>,
}

/// Every event Alpaca documents, plus `restated` (alpaca-py).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TradeEvent {
    /// `new`: the order was routed to the market and is working.
    New,
    /// `fill`: the order filled completely (with this fill).
    Fill,
    /// `partial_fill`: part of the order filled; the rest still works.
    PartialFill,
    /// `canceled`: a cancel request took effect; nothing more fills.
    Canceled,
    /// `expired`: its time in force ran out unfilled (or partly filled).
    Expired,
    /// `done_for_day`: no more fills today; it may work again the next day.
    DoneForDay,
    /// `replaced`: a replace request took effect; the new order has its own events.
    Replaced,
    /// `accepted`: Alpaca accepted the order but has not routed it yet.
    Accepted,
    /// `rejected`: the order was refused; nothing fills.
    Rejected,
    /// `pending_new`: received by Alpaca, being routed.
    PendingNew,
    /// `stopped`: a trade is guaranteed for the order, usually at a stated price.
    Stopped,
    /// `pending_cancel`: a cancel request was received and is pending.
    PendingCancel,
    /// `pending_replace`: a replace request was received and is pending.
    PendingReplace,
    /// `calculated`: filled, but the order's final figures are still being calculated.
    Calculated,
    /// `suspended`: the order is suspended and cannot trade.
    Suspended,
    /// `order_replace_rejected`: a replace request was refused; the order works on unchanged.
    OrderReplaceRejected,
    /// `order_cancel_rejected`: a cancel request was refused (e.g. the order just filled).
    OrderCancelRejected,
    /// `restated`: the order was restated (known to alpaca-py, not in Alpaca's docs).
    Restated,
    /// Any other event name: the message parses, and the update is skipped as unknown.
    #[serde(other)]
    Unknown,
}

/// Client → server auth, current form: `{"action":"auth","key":..,"secret":..}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthRequest {
    /// `auth`.
    pub action: String,
    /// The API key id (`APCA_API_KEY_ID`).
    pub key: String,
    /// The API secret (`APCA_API_SECRET_KEY`).
    pub secret: String,
}

/// Client → server auth, legacy form: `{"action":"authenticate","data":{"key_id":..,"secret_key":..}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyAuthRequest {
    /// `authenticate`.
    pub action: String,
    /// The keys.
    pub data: LegacyAuthData,
}

/// The `data` of a legacy auth request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyAuthData {
    /// The API key id (`APCA_API_KEY_ID`).
    pub key_id: String,
    /// The API secret (`APCA_API_SECRET_KEY`).
    pub secret_key: String,
}

/// Client → server: `{"action":"listen","data":{"streams":["trade_updates"]}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenRequest {
    /// `listen`.
    pub action: String,
    /// The streams wanted.
    pub data: Listening,
}

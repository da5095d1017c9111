//! The trade_updates WebSocket: single JSON objects `{"stream": .., "data": ..}` (text on live, binary
//! frames holding JSON on paper). Order objects inside are the REST [`Order`].

use super::rest::Order;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One trade_updates message, tagged by `stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", content = "data")]
pub enum UpdatesMsg {
    #[serde(rename = "authorization")]
    Authorization(Authorization),
    #[serde(rename = "listening")]
    Listening(Listening),
    #[serde(rename = "trade_updates")]
    TradeUpdate(Box<TradeUpdate>),
    #[serde(other)]
    Unknown,
}

/// `{"status":"authorized"|"unauthorized","action":"authenticate"|"listen"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Authorization {
    pub status: String,
    #[serde(default)]
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listening {
    #[serde(default)]
    pub streams: Vec<String>,
}

/// The `data` of a trade update. Which optional fields are present depends on the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TradeUpdate {
    pub event: TradeEvent,
    pub order: Order,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_qty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// ULID-like string in 2025 examples; kept as any JSON value so a number would not fail the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_qtys: Option<BTreeMap<String, String>>,
}

/// Every event Alpaca documents, plus `restated` (alpaca-py).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TradeEvent {
    New,
    Fill,
    PartialFill,
    Canceled,
    Expired,
    DoneForDay,
    Replaced,
    Accepted,
    Rejected,
    PendingNew,
    Stopped,
    PendingCancel,
    PendingReplace,
    Calculated,
    Suspended,
    OrderReplaceRejected,
    OrderCancelRejected,
    Restated,
    #[serde(other)]
    Unknown,
}

/// Client → server auth, current form: `{"action":"auth","key":..,"secret":..}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthRequest {
    pub action: String,
    pub key: String,
    pub secret: String,
}

/// Client → server auth, legacy form: `{"action":"authenticate","data":{"key_id":..,"secret_key":..}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyAuthRequest {
    pub action: String,
    pub data: LegacyAuthData,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyAuthData {
    pub key_id: String,
    pub secret_key: String,
}

/// Client → server: `{"action":"listen","data":{"streams":["trade_updates"]}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenRequest {
    pub action: String,
    pub data: Listening,
}

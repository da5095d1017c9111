//! What `tradebot status` shows: the daemon's state in one serialisable value, filled by the engine loop
//! (or, with no daemon running, from the store and the registry). Versioned: `version` says which shape
//! this is, and every field has a default, so a newer or older reader still parses it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shape of `StatusReport` this build writes.
pub const STATUS_VERSION: u32 = 1;

/// How the status's `activity` begins while the engine has no model to trade with.
pub const NO_MODEL: &str = "waiting for a model";

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusReport {
    /// `STATUS_VERSION` of the writer (0: written before versions).
    pub version: u32,
    /// Whether a daemon answered (false: read from the store and registry with no daemon running).
    pub daemon_running: bool,
    /// "paper" or "live".
    pub mode: String,
    pub pid: u32,
    pub started_at: Option<DateTime<Utc>>,
    /// What the daemon is doing, as in its last sd_notify STATUS= line.
    pub activity: String,
    pub feed: FeedStatus,
    pub positions: Vec<PositionStatus>,
    pub open_orders: Vec<OrderStatusLine>,
    pub equity: f64,
    pub cash: f64,
    /// Equity change since the first bar of the current (New York) trading day.
    pub pnl_today: f64,
    pub models: ModelsStatus,
    pub risk: RiskStatus,
    /// The last flatten asked for by a person (`tradebot flatten`): what went out, waits, failed.
    #[serde(default)]
    pub flatten: Option<FlattenStatus>,
    /// With no daemon running: when the daemon last published the equity, cash, prices and orders shown
    /// (they are as of then). `None` for a running daemon, or when it never published.
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
}

/// What a flatten did: the symbols whose sells went out, those waiting for the cancel of our working buy
/// (the broker would refuse the sell as a wash trade), and those that could not be sold, with why.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FlattenStatus {
    /// 1 for the daemon's first flatten, then 2, ...
    pub seq: u64,
    pub at: Option<DateTime<Utc>>,
    pub sent: Vec<String>,
    /// Sells sent that the broker has not acknowledged yet.
    pub unconfirmed: Vec<String>,
    pub waiting: Vec<String>,
    pub failed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FeedStatus {
    /// "replay" or "alpaca".
    pub kind: String,
    pub connected: bool,
    pub reconnects: u64,
    /// Close time of the last bar per symbol.
    pub last_bar: BTreeMap<String, DateTime<Utc>>,
    pub bars_received: u64,
    /// Symbols carried at their last close (no bar of their own in the latest periods): never traded
    /// while stale; `down` past `market.max_stale_bars`.
    pub stale: Vec<StaleSymbol>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StaleSymbol {
    pub symbol: String,
    /// Periods carried since its last bar.
    pub bars: u32,
    pub down: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PositionStatus {
    pub symbol: String,
    pub qty: f64,
    pub price: f64,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OrderStatusLine {
    pub client_order_id: String,
    pub symbol: String,
    pub side: String,
    pub qty: f64,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelsStatus {
    pub ppo: Option<String>,
    pub lstm: Option<String>,
    /// The kind being retrained right now, if any.
    pub retraining: Option<String>,
    pub last_retrain: Option<RetrainStatus>,
    pub next_retrain: Option<DateTime<Utc>>,
}

/// One retrain run and its outcome, as stored in the `runs` tree.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrainStatus {
    pub started_at: Option<DateTime<Utc>>,
    /// "promoted", "kept" (failed the gate), "failed" (crash, NaN, timeout, ...), "running".
    pub outcome: String,
    pub reason: String,
    pub candidate: Option<String>,
    /// The gate's numbers: candidate and champion Sharpe, drawdown, trades.
    pub numbers: BTreeMap<String, f64>,
    /// The first and last bar the candidate was trained on.
    pub data_from: Option<DateTime<Utc>>,
    pub data_to: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RiskStatus {
    pub kill_switch: bool,
    pub kill_reason: Option<String>,
    pub paused: bool,
    pub gross_exposure: f64,
}

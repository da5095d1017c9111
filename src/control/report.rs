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

/// The daemon's state as `tradebot status`, the dashboard and the Telegram bot show it. Money is in
/// dollars, times in UTC.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusReport {
    /// `STATUS_VERSION` of the writer (0: written before versions).
    pub version: u32,
    /// Whether a daemon answered (false: read from the store and registry with no daemon running).
    pub daemon_running: bool,
    /// "paper" or "live".
    pub mode: String,
    /// The daemon's process id (0 when no daemon answered).
    pub pid: u32,
    /// When the daemon started; `None` when no daemon answered.
    pub started_at: Option<DateTime<Utc>>,
    /// What the daemon is doing, as in its last sd_notify STATUS= line.
    pub activity: String,
    /// The market data feed's health.
    pub feed: FeedStatus,
    /// Every position held, valued at its symbol's last close.
    pub positions: Vec<PositionStatus>,
    /// Our orders not yet filled, canceled, rejected or expired.
    pub open_orders: Vec<OrderStatusLine>,
    /// The account's equity (cash plus positions' value), in dollars; NaN with no daemon running when
    /// none ever published it.
    pub equity: f64,
    /// The account's cash, in dollars (negative when on margin); NaN as `equity`.
    pub cash: f64,
    /// Equity change since the first bar of the current (New York) trading day.
    pub pnl_today: f64,
    /// The champions and the retrains.
    pub models: ModelsStatus,
    /// The kill switch, the pause and the exposure.
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
    /// When the flatten was asked for.
    pub at: Option<DateTime<Utc>>,
    /// The symbols whose sells went out.
    pub sent: Vec<String>,
    /// Sells sent that the broker has not acknowledged yet.
    pub unconfirmed: Vec<String>,
    /// The symbols whose sells wait for the cancel of our working buy.
    pub waiting: Vec<String>,
    /// The symbols that could not be sold, each as `SYMBOL: why`.
    pub failed: Vec<String>,
}

/// The market data feed's health.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FeedStatus {
    /// "replay" or "alpaca".
    pub kind: String,
    /// Whether the stream is connected now (a replay, which reads the store, always is).
    pub connected: bool,
    /// How many times the stream reconnected since the daemon started.
    pub reconnects: u64,
    /// Close time of the last bar per symbol.
    pub last_bar: BTreeMap<String, DateTime<Utc>>,
    /// Bars received since the daemon started, all symbols together.
    pub bars_received: u64,
    /// Symbols carried at their last close (no bar of their own in the latest periods): never traded
    /// while stale; `down` past `market.max_stale_bars`.
    pub stale: Vec<StaleSymbol>,
}

/// A symbol without a bar of its own in the latest periods, carried at its last close.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StaleSymbol {
    /// The stale symbol.
    pub symbol: String,
    /// Periods carried since its last bar.
    pub bars: u32,
    /// True once `bars` passed `market.max_stale_bars`: the symbol counts as down.
    pub down: bool,
}

/// One position held.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PositionStatus {
    /// The position's symbol.
    pub symbol: String,
    /// Units held (shares or coins); negative when short.
    pub qty: f64,
    /// The symbol's last close, in dollars per unit (NaN when no bar has been seen).
    pub price: f64,
    /// `qty * price`, in dollars; negative when short.
    pub value: f64,
}

/// One of our open orders.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OrderStatusLine {
    /// Our id of the order, as sent to the broker.
    pub client_order_id: String,
    /// The symbol ordered.
    pub symbol: String,
    /// `buy` or `sell`.
    pub side: String,
    /// Units ordered (NaN for an order by dollar amount).
    pub qty: f64,
    /// Its lifecycle state (`pending_new`, `accepted`, `partially_filled`, ...).
    pub status: String,
}

/// The champions and the retrains.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelsStatus {
    /// The policy champion's id; `None` without one.
    pub ppo: Option<String>,
    /// The LSTM champion's id; `None` without one.
    pub lstm: Option<String>,
    /// The kind being retrained right now, if any.
    pub retraining: Option<String>,
    /// The latest retrain run; `None` before the first.
    pub last_retrain: Option<RetrainStatus>,
    /// When the schedule next retrains; `None` when retraining is off.
    pub next_retrain: Option<DateTime<Utc>>,
}

/// One retrain run and its outcome, as stored in the `runs` tree.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrainStatus {
    /// When the run started.
    pub started_at: Option<DateTime<Utc>>,
    /// "promoted", "kept" (failed the gate), "failed" (crash, NaN, timeout, ...), "running".
    pub outcome: String,
    /// Why it ended so, in words (the gate's verdict or the failure).
    pub reason: String,
    /// The id of the model it trained; `None` when training produced none.
    pub candidate: Option<String>,
    /// The gate's numbers: candidate and champion Sharpe, drawdown, trades.
    pub numbers: BTreeMap<String, f64>,
    /// The first and last bar the candidate was trained on.
    pub data_from: Option<DateTime<Utc>>,
    /// The last bar the candidate was trained on (see `data_from`).
    pub data_to: Option<DateTime<Utc>>,
}

/// The risk state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RiskStatus {
    /// Whether the kill switch has tripped (cleared by `tradebot risk clear`).
    pub kill_switch: bool,
    /// Why it tripped; `None` when it has not.
    pub kill_reason: Option<String>,
    /// Whether new orders are paused (`tradebot pause`, or after a flatten).
    pub paused: bool,
    /// The positions' absolute value summed, as a fraction of equity (1.0 = 100%); 0 without equity.
    pub gross_exposure: f64,
}

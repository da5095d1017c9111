//! What the dashboard shows, as plain values: the daemon's `StatusReport` plus the histories the page
//! draws (equity against buy-and-hold, decisions, models and gate decisions, training runs). A
//! `DashboardSource` produces it on each request; the daemon's source reads its store and registry.

use crate::control::StatusReport;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct DashboardData {
    pub status: StatusReport,
    /// Equity over time with the buy-and-hold benchmark on the same bars.
    pub equity: Vec<ChartPoint>,
    /// Most recent first.
    pub decisions: Vec<DecisionView>,
    pub models: Vec<ModelView>,
    /// Every promotion-gate decision, most recent first.
    pub gate: Vec<GateView>,
    /// Training runs, most recent first; a running one has `progress`.
    pub training: Vec<TrainingView>,
    /// The daemon's last log lines at WARN and above, oldest first.
    #[serde(default)]
    pub logs: Vec<crate::logging::LogLine>,
    /// Closed trades, most recent first.
    #[serde(default)]
    pub trades: Vec<crate::oms::trades::ClosedTrade>,
    /// Per traded symbol: what is held at what entry, and what was made.
    #[serde(default)]
    pub symbols: Vec<SymbolView>,
    /// Recent closes per symbol with the bot's fills on them.
    #[serde(default)]
    pub prices: Vec<PriceView>,
    /// The latest hyper-parameter searches, most recent first (the search page).
    #[serde(default)]
    pub studies: Vec<crate::retrain::study_record::StudyRecord>,
    /// The trailing stop: the fraction below the high-water mark since entry at which a holding is sold
    /// (0 = off). The price charts draw its line.
    #[serde(default)]
    pub trailing_stop: f64,
    /// The bars' timeframe ("1Day", "1Min", ...): the charts show dates for daily bars, seconds otherwise.
    #[serde(default)]
    pub timeframe: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct SymbolView {
    pub symbol: String,
    pub qty: f64,
    /// Average price of the units held (0 when flat).
    pub avg_entry: f64,
    pub last_price: f64,
    /// (last − entry) × qty, before selling fees.
    pub unrealised: f64,
    /// Closed trades' P&L after fees.
    pub realised: f64,
    pub fees: f64,
    pub trades: usize,
    pub wins: usize,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct PriceView {
    pub symbol: String,
    pub t: Vec<DateTime<Utc>>,
    pub close: Vec<f64>,
    pub fills: Vec<FillMark>,
    /// The stored bars' open, high, low and volume at each `t` (a bar not in the store: the close, and 0
    /// volume); empty when no bar was read.
    #[serde(default)]
    pub open: Vec<f64>,
    #[serde(default)]
    pub high: Vec<f64>,
    #[serde(default)]
    pub low: Vec<f64>,
    #[serde(default)]
    pub volume: Vec<f64>,
}

impl PriceView {
    /// Fills `open`, `high`, `low` and `volume` from `bars` (any order; those at no `t` are ignored).
    pub(crate) fn add_bars(&mut self, bars: &[crate::domain::Bar]) {
        let at: BTreeMap<DateTime<Utc>, &crate::domain::Bar> = bars.iter().map(|b| (b.t, b)).collect();
        let pick = |f: fn(&crate::domain::Bar) -> f64, none: &dyn Fn(usize) -> f64| -> Vec<f64> {
            self.t.iter().enumerate().map(|(i, t)| at.get(t).map_or_else(|| none(i), |b| f(b))).collect()
        };
        let close = |i: usize| self.close[i];
        let (open, high, low) = (pick(|b| b.o, &close), pick(|b| b.h, &close), pick(|b| b.l, &close));
        let volume = pick(|b| b.v, &|_| 0.0);
        (self.open, self.high, self.low, self.volume) = (open, high, low, volume);
    }
}

/// Each view's OHLCV from `store`'s bars of `tf` over its span (a store that does not read: closes only).
pub(crate) fn add_stored_bars(prices: &mut [PriceView], store: &crate::store::Store, tf: crate::domain::Timeframe) {
    for p in prices.iter_mut() {
        let (Some(from), Some(to)) = (p.t.first().copied(), p.t.last().copied()) else { continue };
        let Ok(symbol) = crate::domain::Symbol::new(&p.symbol) else { continue };
        match store.bars(&symbol, tf, from, to) {
            Ok(bars) => p.add_bars(&bars),
            Err(e) => log::debug!("dashboard: cannot read the bars of {}: {e}", p.symbol),
        }
    }
}

/// Why an order was sent, in words, from its client order id (`ClientOrderId::derive`'s tag): the
/// trailing stop, the kill switch, a flatten, a protective sell, an adopted order, or the model (the
/// strategy's orders).
pub(crate) fn order_reason(client_order_id: &str) -> String {
    if client_order_id.starts_with("x-") {
        return "adopted from the broker".into();
    }
    match client_order_id.strip_prefix("tb-").and_then(|r| r.split('-').next()) {
        Some("stop") => "trailing stop".into(),
        Some("killsw") => "kill switch".into(),
        Some("flatten") => "flatten".into(),
        Some("sell") => "protective sell".into(),
        Some(_) => "model".into(),
        None => "placed outside tradebot".into(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FillMark {
    pub t: DateTime<Utc>,
    pub buy: bool,
    pub qty: f64,
    pub price: f64,
    /// Why its order was sent (`order_reason`).
    #[serde(default)]
    pub reason: String,
}

/// One point of the dashboard's equity chart: the account and buy-and-hold at a bar (the backtest's
/// `EquityPoint` has the cash, trades and fees besides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChartPoint {
    pub t: DateTime<Utc>,
    pub equity: f64,
    pub buy_hold: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DecisionView {
    pub t: DateTime<Utc>,
    pub symbol: String,
    pub model_id: String,
    /// The model's outputs, e.g. `action` or `p_up`.
    pub outputs: BTreeMap<String, f64>,
    /// What the strategy did: "buy 12", "hold", "vetoed", "refused: max_position".
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelView {
    pub id: String,
    pub kind: String,
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub metrics: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GateView {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub candidate: Option<String>,
    /// "promoted", "kept" or "failed".
    pub outcome: String,
    pub reason: String,
    pub numbers: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrainingView {
    pub id: String,
    pub kind: String,
    pub started_at: DateTime<Utc>,
    /// "running", "promoted", "kept", "failed".
    pub outcome: String,
    /// Named curves over updates or epochs: "return", "loss", "val_mcc", ...
    pub curves: BTreeMap<String, Vec<f64>>,
    pub progress: Option<TrainingProgress>,
    /// The child's final numbers.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// The gate's decision: its reason, and its numbers in a line.
    #[serde(default)]
    pub gate: Option<(String, String)>,
}

/// A training child's progress as the dashboard and the foreground `tradebot retrain` show it: its count (steps,
/// epochs or trials) of its total, its rate and ETA (`retrain::RetrainProgress` is the retrain run's stages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrainingProgress {
    pub done: f64,
    pub total: f64,
    pub steps_per_s: f64,
    pub eta_secs: f64,
    /// The GPU's utilisation since the child's previous progress line, when it trains on one.
    #[serde(default)]
    pub gpu: Option<GpuNow>,
}

/// A training child's GPU readings (NVML): busy %, memory in use (MiB), power (W).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct GpuNow {
    pub busy_pct: f64,
    pub memory_mb: f64,
    pub power_w: Option<f64>,
}

impl TrainingProgress {
    /// A training child's progress line as the run's progress: PPO counts steps, the LSTM epochs, a
    /// search (`retrain.tune`) its ended trials; `None` for a line without both counts (the dataset's,
    /// `done`). The dashboard and the foreground `tradebot retrain` show the same.
    pub(crate) fn of_line(line: &serde_json::Value) -> Option<TrainingProgress> {
        let done = ["env_steps", "epoch", "trials_ended"].iter().find_map(|k| line.get(*k)?.as_f64())?;
        let total = ["total_steps", "max_epochs", "trials"].iter().find_map(|k| line.get(*k)?.as_f64())?;
        Some(TrainingProgress {
            done,
            total,
            steps_per_s: crate::metrics::train_rate(line).unwrap_or(0.0),
            eta_secs: line.get("eta_secs").and_then(|x| x.as_f64()).unwrap_or_else(|| {
                // The LSTM reports epoch times: the epochs left at the last one's pace.
                let epoch = line.get("epoch_secs").and_then(|x| x.as_f64()).unwrap_or(0.0);
                (total - done).max(0.0) * epoch
            }),
            gpu: GpuNow::of_line(line),
        })
    }

    /// What it counts: "steps", "epochs" or "trials" (by the line's keys).
    pub(crate) fn unit(line: &serde_json::Value) -> &'static str {
        if line.get("env_steps").is_some() {
            "steps"
        } else if line.get("epoch").is_some() {
            "epochs"
        } else {
            "trials"
        }
    }
}

impl GpuNow {
    /// From a progress line's `gpu_busy_pct`, `gpu_memory_mb` and `gpu_power_w` (busy % and memory needed).
    pub(crate) fn of_line(line: &serde_json::Value) -> Option<GpuNow> {
        let get = |k: &str| line.get(k).and_then(serde_json::Value::as_f64);
        Some(GpuNow { busy_pct: get("gpu_busy_pct")?, memory_mb: get("gpu_memory_mb")?, power_w: get("gpu_power_w") })
    }
}

/// Where the dashboard's data comes from. Called on each request, off the engine's thread.
pub(crate) trait DashboardSource: Send + Sync + 'static {
    fn snapshot(&self) -> DashboardData;
}

/// A fixed snapshot, replaceable at any time: tests, and daemons that push rather than pull.
#[derive(Debug, Default)]
pub(crate) struct SharedData(std::sync::RwLock<DashboardData>);

impl SharedData {
    #[cfg(test)]
    pub(crate) fn new(d: DashboardData) -> Self {
        SharedData(std::sync::RwLock::new(d))
    }

    pub(crate) fn set(&self, d: DashboardData) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = d;
    }
}

impl DashboardSource for SharedData {
    fn snapshot(&self) -> DashboardData {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

//! Prometheus metrics: one `Metrics` value, shared (`Arc`) by the feed, the engine, the retrainer and the
//! web server, which serves it at `/metrics` in the OpenMetrics text format (`prometheus-client`).
//!
//! Counters are bumped where things happen (bars, reconnects, orders, rejects, retrains); gauges that
//! describe the account (equity, positions, exposure, P&L, kill switch, models in use) are set from the
//! daemon's `StatusReport` by `observe_status`, so `/metrics` and `tradebot status` never disagree.

use crate::control::StatusReport;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// The content type `/metrics` answers with.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type FGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SymbolLabel {
    pub symbol: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    pub kind: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelLabel {
    pub kind: String,
    pub id: String,
}

pub(crate) struct Metrics {
    registry: Registry,
    pub bars: Family<SymbolLabel, Counter>,
    pub feed_reconnects: Counter,
    /// 1 while the live market-data stream is connected.
    pub feed_connected: Gauge,
    pub backfilled_bars: Counter,
    /// Seconds per decision: features + inference + strategy + risk.
    pub decision_latency: Histogram,
    /// Order transitions by the status entered.
    pub orders: Family<StatusLabel, Counter>,
    pub rejects: Family<ReasonLabel, Counter>,
    pub equity: FGauge,
    pub cash: FGauge,
    pub position_value: Family<SymbolLabel, FGauge>,
    pub position_qty: Family<SymbolLabel, FGauge>,
    pub gross_exposure: FGauge,
    pub pnl_today: FGauge,
    pub kill_switch: Gauge,
    pub paused: Gauge,
    pub stale_symbols: Gauge,
    pub down_symbols: Gauge,
    pub retrain_runs: Family<OutcomeLabel, Counter>,
    pub train_steps_per_second: Family<KindLabel, FGauge>,
    pub train_epoch_seconds: Family<KindLabel, FGauge>,
    /// The GPU's utilisation while a training child runs on one (NVML, from its progress lines); gone
    /// when the run ends.
    pub train_gpu_busy: Family<KindLabel, FGauge>,
    pub train_gpu_memory: Family<KindLabel, FGauge>,
    pub train_gpu_power: Family<KindLabel, FGauge>,
    /// 1 for the model each kind trades with.
    pub model_in_use: Family<ModelLabel, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut r = Registry::with_prefix("tradebot");
        let m = Metrics {
            bars: Family::default(),
            feed_reconnects: Counter::default(),
            feed_connected: Gauge::default(),
            backfilled_bars: Counter::default(),
            // 1 µs to about 0.5 s.
            decision_latency: Histogram::new(exponential_buckets(1e-6, 2.0, 20)),
            orders: Family::default(),
            rejects: Family::default(),
            equity: FGauge::default(),
            cash: FGauge::default(),
            position_value: Family::default(),
            position_qty: Family::default(),
            gross_exposure: FGauge::default(),
            pnl_today: FGauge::default(),
            kill_switch: Gauge::default(),
            paused: Gauge::default(),
            stale_symbols: Gauge::default(),
            down_symbols: Gauge::default(),
            retrain_runs: Family::default(),
            train_steps_per_second: Family::default(),
            train_epoch_seconds: Family::default(),
            train_gpu_busy: Family::default(),
            train_gpu_memory: Family::default(),
            train_gpu_power: Family::default(),
            model_in_use: Family::default(),
            registry: Registry::default(),
        };
        r.register("bars_received", "Closed bars received, by symbol", m.bars.clone());
        r.register("feed_reconnects", "Market-data stream reconnects", m.feed_reconnects.clone());
        r.register("feed_connected", "1 while the live market-data stream is connected", m.feed_connected.clone());
        r.register("backfilled_bars", "Bars filled in over REST after a gap", m.backfilled_bars.clone());
        r.register(
            "decision_latency_seconds",
            "Per-decision latency: features, inference, strategy and risk",
            m.decision_latency.clone(),
        );
        r.register("orders", "Order transitions, by the status entered", m.orders.clone());
        r.register("order_rejects", "Orders refused (risk or broker), by reason", m.rejects.clone());
        r.register("equity", "Account equity", m.equity.clone());
        r.register("cash", "Account cash", m.cash.clone());
        r.register("position_value", "Market value of each position", m.position_value.clone());
        r.register("position_qty", "Quantity held of each symbol", m.position_qty.clone());
        r.register("gross_exposure", "Sum of |position value| over equity", m.gross_exposure.clone());
        r.register("pnl_today", "Equity change since the trading day's first bar", m.pnl_today.clone());
        r.register("kill_switch", "1 while the daily-loss kill switch is tripped", m.kill_switch.clone());
        r.register("paused", "1 while trading is paused", m.paused.clone());
        r.register(
            "stale_symbols",
            "Symbols carried at their last close for want of a bar (not traded)",
            m.stale_symbols.clone(),
        );
        r.register("down_symbols", "Stale symbols past market.max_stale_bars", m.down_symbols.clone());
        r.register("retrain_runs", "Retrain runs, by kind and outcome", m.retrain_runs.clone());
        r.register(
            "train_steps_per_second",
            "Training throughput of the running or last run",
            m.train_steps_per_second.clone(),
        );
        r.register("train_epoch_seconds", "Duration of the last training epoch", m.train_epoch_seconds.clone());
        r.register(
            "train_gpu_busy_percent",
            "Share of time the GPU ran a kernel while the training child runs (NVML)",
            m.train_gpu_busy.clone(),
        );
        r.register(
            "train_gpu_memory_megabytes",
            "GPU memory in use (MiB) while the training child runs (NVML)",
            m.train_gpu_memory.clone(),
        );
        r.register(
            "train_gpu_power_watts",
            "GPU power while the training child runs (NVML)",
            m.train_gpu_power.clone(),
        );
        r.register("model_in_use", "1 for the model each kind trades with", m.model_in_use.clone());
        Metrics { registry: r, ..m }
    }

    /// The exposition text (OpenMetrics), ending in `# EOF`.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would be a bug in a metric's labels.
        if let Err(e) = encode(&mut out, &self.registry) {
            log::error!("metrics: cannot encode: {e}");
        }
        out
    }

    pub(crate) fn bar(&self, symbol: &str) {
        self.bars.get_or_create(&SymbolLabel { symbol: symbol.to_string() }).inc();
    }

    pub(crate) fn order(&self, status: &str) {
        self.orders.get_or_create(&StatusLabel { status: status.to_string() }).inc();
    }

    pub(crate) fn reject(&self, reason: &str) {
        self.rejects.get_or_create(&ReasonLabel { reason: reason.to_string() }).inc();
    }

    pub(crate) fn retrain(&self, kind: &str, outcome: &str) {
        self.retrain_runs.get_or_create(&OutcomeLabel { kind: kind.into(), outcome: outcome.into() }).inc();
    }

    /// A training progress line (the child's JSON): steps/s (PPO's `steps_per_sec`, the LSTM's
    /// `samples_per_sec`) and epoch time when present.
    pub(crate) fn training_progress(&self, kind: &str, line: &serde_json::Value) {
        let label = KindLabel { kind: kind.to_string() };
        if let Some(v) = train_rate(line) {
            self.train_steps_per_second.get_or_create(&label).set(v);
        }
        if let Some(v) = line.get("epoch_secs").and_then(|v| v.as_f64()) {
            self.train_epoch_seconds.get_or_create(&label).set(v);
        }
        for (key, family) in self.gpu_families() {
            if let Some(v) = line.get(key).and_then(|v| v.as_f64()) {
                family.get_or_create(&label).set(v);
            }
        }
    }

    /// A training run ended: its GPU readings leave the exposition (throughput stays, the last run's).
    pub(crate) fn training_ended(&self, kind: &str) {
        let label = KindLabel { kind: kind.to_string() };
        for (_, family) in self.gpu_families() {
            family.remove(&label);
        }
    }

    fn gpu_families(&self) -> [(&'static str, &Family<KindLabel, FGauge>); 3] {
        [
            ("gpu_busy_pct", &self.train_gpu_busy),
            ("gpu_memory_mb", &self.train_gpu_memory),
            ("gpu_power_w", &self.train_gpu_power),
        ]
    }

    /// Sets the account gauges from the daemon's status, so `/metrics` and `tradebot status` agree.
    pub(crate) fn observe_status(&self, s: &StatusReport) {
        self.equity.set(s.equity);
        self.cash.set(s.cash);
        self.pnl_today.set(s.pnl_today);
        self.gross_exposure.set(s.risk.gross_exposure);
        self.kill_switch.set(i64::from(s.risk.kill_switch));
        self.paused.set(i64::from(s.risk.paused));
        self.stale_symbols.set(s.feed.stale.len() as i64);
        self.down_symbols.set(s.feed.stale.iter().filter(|x| x.down).count() as i64);
        self.position_value.clear();
        self.position_qty.clear();
        for p in &s.positions {
            let l = SymbolLabel { symbol: p.symbol.clone() };
            self.position_value.get_or_create(&l).set(p.value);
            self.position_qty.get_or_create(&l).set(p.qty);
        }
        self.model_in_use.clear();
        for (kind, id) in [("ppo", &s.models.ppo), ("lstm", &s.models.lstm)] {
            if let Some(id) = id {
                self.model_in_use.get_or_create(&ModelLabel { kind: kind.into(), id: id.clone() }).set(1);
            }
        }
    }
}

/// The training throughput in a child's progress line, by whichever name the trainer uses.
pub(crate) fn train_rate(line: &serde_json::Value) -> Option<f64> {
    ["steps_per_sec", "steps_per_s", "samples_per_sec"].iter().find_map(|k| line.get(*k).and_then(|v| v.as_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::report::{PositionStatus, RiskStatus};

    /// Parses the exposition with an independent parser (prometheus-parse) and finds one sample.
    fn sample(text: &str, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
        let lines = text.lines().filter(|l| *l != "# EOF").map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
        scrape.samples.iter().find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v))).map(
            |s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            },
        )
    }

    #[test]
    fn exposition_parses_and_carries_the_values() {
        let m = Metrics::new();
        m.bar("AAPL");
        m.bar("AAPL");
        m.bar("MSFT");
        m.reject("max_position");
        m.retrain("ppo", "promoted");
        m.decision_latency.observe(12e-6);
        // The trainers' own progress lines: PPO's steps_per_sec, the LSTM's samples_per_sec and epoch time.
        m.training_progress("ppo", &serde_json::json!({"event": "progress", "steps_per_sec": 4321.0}));
        m.training_progress(
            "lstm",
            &serde_json::json!({"event": "epoch", "samples_per_sec": 900.0, "epoch_secs": 5.5}),
        );
        let status = StatusReport {
            equity: 101_234.5,
            cash: 5_000.0,
            positions: vec![PositionStatus { symbol: "AAPL".into(), qty: 10.0, price: 150.0, value: 1500.0 }],
            risk: RiskStatus { kill_switch: true, ..Default::default() },
            ..Default::default()
        };
        m.observe_status(&status);
        let text = m.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(sample(&text, "tradebot_bars_received_total", Some(("symbol", "AAPL"))), Some(2.0));
        assert_eq!(sample(&text, "tradebot_bars_received_total", Some(("symbol", "MSFT"))), Some(1.0));
        assert_eq!(sample(&text, "tradebot_order_rejects_total", Some(("reason", "max_position"))), Some(1.0));
        assert_eq!(sample(&text, "tradebot_retrain_runs_total", Some(("outcome", "promoted"))), Some(1.0));
        assert_eq!(sample(&text, "tradebot_equity", None), Some(101_234.5));
        assert_eq!(sample(&text, "tradebot_position_value", Some(("symbol", "AAPL"))), Some(1500.0));
        assert_eq!(sample(&text, "tradebot_kill_switch", None), Some(1.0));
        assert_eq!(sample(&text, "tradebot_train_steps_per_second", Some(("kind", "ppo"))), Some(4321.0));
        assert_eq!(sample(&text, "tradebot_train_steps_per_second", Some(("kind", "lstm"))), Some(900.0));
        assert_eq!(sample(&text, "tradebot_train_epoch_seconds", Some(("kind", "lstm"))), Some(5.5));
        assert!(text.contains("tradebot_decision_latency_seconds_count 1"), "{text}");
        // A child on a GPU: its readings while it runs, gone when the run ends.
        m.training_progress(
            "ppo",
            &serde_json::json!({"gpu_busy_pct": 97.5, "gpu_memory_mb": 5100.0, "gpu_power_w": 310.0}),
        );
        let text = m.encode();
        assert_eq!(sample(&text, "tradebot_train_gpu_busy_percent", Some(("kind", "ppo"))), Some(97.5));
        assert_eq!(sample(&text, "tradebot_train_gpu_memory_megabytes", Some(("kind", "ppo"))), Some(5100.0));
        assert_eq!(sample(&text, "tradebot_train_gpu_power_watts", Some(("kind", "ppo"))), Some(310.0));
        assert_eq!(sample(&text, "tradebot_train_gpu_busy_percent", Some(("kind", "lstm"))), None);
        m.training_ended("ppo");
        let text = m.encode();
        assert_eq!(sample(&text, "tradebot_train_gpu_busy_percent", Some(("kind", "ppo"))), None);
        assert_eq!(sample(&text, "tradebot_train_steps_per_second", Some(("kind", "ppo"))), Some(4321.0));
        // A position closed since the last status disappears from the exposition.
        m.observe_status(&StatusReport::default());
        assert_eq!(sample(&m.encode(), "tradebot_position_value", Some(("symbol", "AAPL"))), None);
    }
}

//! Backtests: the Engine over stored bars with the `SimBroker`, and the metrics of the result next to
//! buy-and-hold's.
//!
//! ```text
//!  Store bars (aligned over the symbols) ─► sim::simulate(Engine + SimBroker) ─► equity curve
//!     ─► metrics::metrics (strategy, buy-and-hold) ─► BacktestReport; curve into the `equity` tree
//! ```
//!
//! The engine's own orders, fills and decisions go to a scratch store, so a backtest never touches the
//! trading state; only the equity curve is written to the real store (`equity` tree, keyed
//! `backtest/<model id>/<time>`).

pub mod metrics;
#[cfg(test)]
mod parity_tests;
pub mod sim;

pub use metrics::{Activity, Metrics, metrics};
pub use sim::{SimRun, SimRunError, simulate};

use crate::broker::SimBroker;
use crate::config::Config;
use crate::domain::{Bar, Symbol, Timeframe};
use crate::engine::{Engine, EngineConfig, LstmProbs, ManualClock, ProbSource, StrategyConfig, StrategyMode};
use crate::env::ExecParams;
use crate::models::{ModelKind, Registry};
use crate::oms::{Oms, OmsConfig};
use crate::policy::{ModelSel, Pipeline, PolicyError, PpoPolicy, SessionOptions};
use crate::store::{Store, StoreError, TreeName, keys::time_key};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub enum BacktestError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("backtest scratch store: {0}")]
    Scratch(String),
    #[error("{0}")]
    Run(#[from] SimRunError),
    #[error(
        "only {got} bars common to all of {symbols:?} in the window; at least {need} are needed (feature warm-up + 1): import data (`tradebot data import`) or widen --from/--to"
    )]
    TooFewBars { got: usize, need: usize, symbols: Vec<Symbol> },
}

/// One point of a stored equity curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EquityPoint {
    pub t: DateTime<Utc>,
    pub equity: f64,
    pub cash: f64,
    pub buy_hold: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BacktestReport {
    pub model_id: String,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub bars: usize,
    pub strategy: Metrics,
    pub buy_hold: Metrics,
    #[serde(skip)]
    pub curve: Vec<EquityPoint>,
}

/// Bars per year for annualising (252 trading days; intraday timeframes scale from 6.5-hour sessions).
pub fn periods_per_year(tf: Timeframe) -> f64 {
    match tf {
        Timeframe::Minutes(m) => 252.0 * 390.0 / f64::from(m.max(1)),
        Timeframe::Hours(h) => 252.0 * 6.5 / f64::from(h.max(1)),
        Timeframe::Days(d) => 252.0 / f64::from(d.max(1)),
        Timeframe::Weeks(w) => 52.0 / f64::from(w.max(1)),
    }
}

/// The stored bars of every symbol in `[from, to]`, cut to the times all of them have.
pub fn aligned_bars(
    store: &Store,
    symbols: &[Symbol],
    tf: Timeframe,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Vec<Bar>>, StoreError> {
    let all: Vec<Vec<Bar>> = symbols.iter().map(|s| store.bars(s, tf, from, to)).collect::<Result<_, _>>()?;
    let mut common: Option<BTreeSet<DateTime<Utc>>> = None;
    for bars in &all {
        let times: BTreeSet<_> = bars.iter().map(|b| b.t).collect();
        common = Some(match common {
            None => times,
            Some(c) => c.intersection(&times).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    Ok(all.into_iter().map(|bars| bars.into_iter().filter(|b| common.contains(&b.t)).collect()).collect())
}

/// Buy-and-hold: the initial cash split evenly over the symbols at the first bar (whole units, fees
/// charged), held to the end.
pub fn buy_and_hold(bars: &[Vec<Bar>], start: usize, initial_cash: f64, exec: &ExecParams) -> (Vec<f64>, Activity) {
    let a = bars.len().max(1) as f64;
    let fee = exec.fee_bps * 1e-4;
    let mut cash = initial_cash;
    let mut act = Activity::default();
    let shares: Vec<f64> = bars
        .iter()
        .map(|b| {
            let p = f64::from(b[start].c as f32);
            let q = (initial_cash / a / (p * (1.0 + fee))).floor().max(0.0);
            cash -= q * p * (1.0 + fee);
            act.traded_notional += q * p;
            act.fees += q * p * fee;
            act.trades += usize::from(q > 0.0);
            q
        })
        .collect();
    let days = bars.first().map_or(0, |b| b.len());
    let curve: Vec<f64> = (start..days)
        .map(|d| cash + bars.iter().zip(&shares).map(|(b, q)| q * f64::from(b[d].c as f32)).sum::<f64>())
        .collect();
    act.exposure_sum = curve.iter().map(|e| if *e > 0.0 { (e - cash) / e } else { 0.0 }).sum();
    (curve, act)
}

/// A scratch directory for the engine's own store, removed on drop.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Backtests the selected PPO model over the stored bars of the configured symbols in `[from, to]`.
pub fn run(
    config: &Config,
    store: &Store,
    registry: &Registry,
    sel: &ModelSel,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<BacktestReport, BacktestError> {
    run_kind(config, store, registry, ModelKind::Ppo, sel, from, to)
}

/// Backtests the selected model of `kind`: a PPO model trades in `ppo` mode; an LSTM model in `lstm`
/// mode (long `strategy.lstm_qty` units on P(up), flat on P(down)), its windows built by the same
/// `features::windows` code as in training.
pub fn run_kind(
    config: &Config,
    store: &Store,
    registry: &Registry,
    kind: ModelKind,
    sel: &ModelSel,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<BacktestReport, BacktestError> {
    let symbols = config.market.symbols.clone();
    let bars = aligned_bars(store, &symbols, config.market.timeframe, from, to)?;
    let start = config.features.warmup().saturating_sub(1);
    let days = bars.first().map_or(0, |b| b.len());
    if days < start + 2 {
        return Err(BacktestError::TooFewBars { got: days, need: start + 2, symbols });
    }
    let pipeline = Pipeline::new(&config.features, &symbols);
    let (policy, probs, mode): (_, Option<Box<dyn ProbSource>>, _) = match kind {
        ModelKind::Ppo => {
            (Some(PpoPolicy::load(registry, sel, &pipeline, SessionOptions::default())?), None, StrategyMode::Ppo)
        }
        ModelKind::Lstm => {
            let w = config.lstm.window_spec();
            let p = LstmProbs::load(registry, sel, &config.features, w, &symbols)?;
            (None, Some(Box::new(p)), StrategyMode::Lstm)
        }
    };
    let model_id = match (&policy, &probs) {
        (Some(p), _) => p.id().to_string(),
        (None, Some(p)) => p.model_id(),
        (None, None) => String::new(),
    };
    let nanos = Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let scratch = Scratch(std::env::temp_dir().join(format!("tradebot-backtest-{}-{nanos}", std::process::id())));
    let scratch_store = Store::open(&scratch.0).map_err(|e| BacktestError::Scratch(e.to_string()))?;
    let clock = ManualClock::new(bars[0][0].t);
    let oms = Oms::open(&scratch_store, Box::new(clock.clone()), OmsConfig::default())
        .map_err(|e| BacktestError::Scratch(e.to_string()))?;
    let env = &config.env;
    let cfg = EngineConfig {
        strategy: StrategyConfig { mode, ..config.strategy.clone() },
        symbols: symbols.clone(),
        features: config.features.clone(),
        initial_cash: env.initial_cash,
        exec: env.exec,
        max_order_notional: config.risk.max_order_notional,
        reconcile_every: 0,
    };
    let mut engine =
        Engine::new(cfg, &scratch_store, oms, policy, probs).map_err(|e| BacktestError::Scratch(e.to_string()))?;
    let mut sim = SimBroker::new(env.initial_cash, env.exec);
    let run = simulate(&mut engine, &clock, &mut sim, &bars, start)?;
    let (bh, bh_act) = buy_and_hold(&bars, start, env.initial_cash, &env.exec);
    let ppy = periods_per_year(config.market.timeframe);
    let bh_curve: Vec<_> = run.curve.iter().zip(&bh).map(|((t, _), e)| (*t, *e)).collect();
    let curve: Vec<EquityPoint> = run
        .curve
        .iter()
        .zip(&run.cash)
        .zip(&bh)
        .map(|(((t, e), c), b)| EquityPoint { t: *t, equity: *e, cash: *c, buy_hold: *b })
        .collect();
    let tree = store.tree::<EquityPoint>(TreeName::Equity)?;
    for p in &curve {
        let mut key = format!("backtest/{model_id}/").into_bytes();
        key.extend_from_slice(&time_key(p.t));
        tree.insert(&key, p)?;
    }
    store.flush()?;
    Ok(BacktestReport {
        model_id,
        from: curve.first().map(|p| p.t),
        to: curve.last().map(|p| p.t),
        bars: curve.len(),
        strategy: metrics(&run.curve, ppy, run.activity),
        buy_hold: metrics(&bh_curve, ppy, bh_act),
        curve,
    })
}

/// The curve as CSV: `time,equity,cash,buy_hold`.
pub fn write_csv(path: &std::path::Path, curve: &[EquityPoint]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "time,equity,cash,buy_hold")?;
    for p in curve {
        writeln!(f, "{},{},{},{}", p.t.to_rfc3339(), p.equity, p.cash, p.buy_hold)?;
    }
    f.flush()
}

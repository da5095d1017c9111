//! Backtests: the Engine over stored bars with the `SimBroker`, and the metrics of the result next to
//! buy-and-hold's.
//!
//! ```text
//!  Store bars (aligned over the symbols) ─► SimSession (Engine + SimBroker through `engine::drive::run`,
//!     the one loop of replays, backtests and the gate) ─► equity curve
//!     ─► metrics::metrics (strategy, buy-and-hold) ─► BacktestReport; curve into the `equity` tree
//! ```
//!
//! The engine's own orders, fills and decisions go to a scratch store, so a backtest never touches the
//! trading state; only the equity curve is written to the real store (`equity` tree, keyed
//! `backtest/<model id>/<time>`).

pub(crate) mod account;
pub(crate) mod metrics;
pub(crate) mod session;
pub(crate) mod sim;
pub(crate) mod tearsheet;
#[cfg(test)]
mod tests;

pub(crate) use metrics::{Activity, Performance, metrics};
#[cfg(test)]
pub(crate) use session::simulate;
pub(crate) use session::{EquityPoint, Models, SessionHooks, SimSession};
pub(crate) use sim::{SimRunError, SimVenue};

use crate::config::Config;
use crate::domain::{Bar, Symbol, Timeframe};
use crate::engine::{LstmProbs, ProbSource, StrategyMode};
use crate::exec::ExecParams;
use crate::models::{ModelKind, Registry};
use crate::policy::{ModelSel, Pipeline, PolicyError, PpoPolicy, SessionOptions};
use crate::store::{Store, StoreError, TreeName, keys::time_key};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub(crate) enum BacktestError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("backtest scratch store: {0}")]
    Scratch(String),
    #[error("{0}")]
    Run(#[from] SimRunError),
    #[error(
        "no model {0} in the registry: `tradebot models list` shows the ids; `tradebot models seed` imports the shipped ones"
    )]
    NoModel(String),
    #[error(
        "only {got} bars common to all of {} in the window; at least {need} are needed (the strategy's warm-up + 1): import data (`tradebot data import`) or widen --from/--to",
        crate::domain::symbol_list(.symbols)
    )]
    TooFewBars { got: usize, need: usize, symbols: Vec<Symbol> },
    #[error(
        "no bars of {} (common to all of them) in the backtest window {from} to {to}; {stored}: pick --from/--to within them, or import data (`tradebot data import`)",
        crate::domain::symbol_list(.symbols)
    )]
    EmptyWindow { from: String, to: String, symbols: Vec<Symbol>, stored: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BacktestReport {
    pub model_id: String,
    pub mode: StrategyMode,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub bars: usize,
    pub strategy: Performance,
    pub buy_hold: Performance,
    /// Orders risk refused, by reason code.
    pub refusals: std::collections::BTreeMap<&'static str, usize>,
    #[serde(skip)]
    pub curve: Vec<EquityPoint>,
    /// The account's fills in time order (`--trades`, `--report`).
    #[serde(skip)]
    pub fills: Vec<crate::oms::FillRecord>,
}

/// Bars per year for annualising (252 trading days; intraday timeframes scale from 6.5-hour sessions).
pub(crate) fn periods_per_year(tf: Timeframe) -> f64 {
    match tf {
        Timeframe::Minutes(m) => 252.0 * 390.0 / f64::from(m.max(1)),
        Timeframe::Hours(h) => 252.0 * 6.5 / f64::from(h.max(1)),
        Timeframe::Days(d) => 252.0 / f64::from(d.max(1)),
        Timeframe::Weeks(w) => 52.0 / f64::from(w.max(1)),
    }
}

/// The bars a session over `[from, to]` steps: the window's aligned bars preceded by up to `lead` stored
/// bars from before `from`, so that the features are warm when the window opens (the engine then trades
/// from the window's first bar, as a live daemon warmed up on its stored bars would). Returns the bars and
/// the index of the window's first bar; with less history before `from` the warm-up eats into the window.
pub(crate) fn window_bars(
    store: &Store,
    symbols: &[Symbol],
    tf: Timeframe,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    lead: usize,
) -> Result<(Vec<Vec<Bar>>, usize), StoreError> {
    let mut bars = crate::data::aligned_bars(store, symbols, tf, DateTime::<Utc>::MIN_UTC, to)?;
    let in_window = bars.first().map_or(0, |b| b.partition_point(|bar| bar.t < from));
    let start = in_window.saturating_sub(lead);
    for b in &mut bars {
        b.drain(..start);
    }
    Ok((bars, in_window - start))
}

/// The stored bars of every symbol in `[from, to]`, cut to the times all of them have.
pub(crate) fn aligned_bars(
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
pub(crate) fn buy_and_hold(
    bars: &[Vec<Bar>],
    start: usize,
    initial_cash: f64,
    exec: &ExecParams,
) -> (Vec<f64>, Activity) {
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

/// What to backtest: the strategy (by default the selected model's kind) and the model.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub sel: ModelSel,
    /// `None`: the model's kind (a PPO model trades `ppo`, an LSTM model `lstm`). `ensemble` pairs the
    /// selected model with the champion of the other kind.
    pub mode: Option<StrategyMode>,
}

/// Backtests the selected PPO model over the stored bars of the configured symbols in `[from, to]`.
#[cfg(test)]
pub(crate) fn run(
    config: &Config,
    store: &Store,
    registry: &Registry,
    sel: &ModelSel,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<BacktestReport, BacktestError> {
    run_kind(config, store, registry, ModelKind::Ppo, sel, from, to)
}

/// Backtests the selected model of `kind` in its own strategy (`ppo` or `lstm`).
pub(crate) fn run_kind(
    config: &Config,
    store: &Store,
    registry: &Registry,
    kind: ModelKind,
    sel: &ModelSel,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<BacktestReport, BacktestError> {
    let mode = match kind {
        ModelKind::Ppo => StrategyMode::Ppo,
        ModelKind::Lstm => StrategyMode::Lstm,
    };
    run_subject(config, store, registry, &Subject { sel: sel.clone(), mode: Some(mode) }, from, to)
}

/// The kind of the selected model (`champion`: a PPO champion, else the LSTM one; `latest`: the kind of
/// the model trained last).
pub(crate) fn model_kind(registry: &Registry, sel: &ModelSel) -> Result<ModelKind, BacktestError> {
    let found = match sel {
        ModelSel::Id(id) => registry.load(id).ok().map(|(m, _)| m.kind),
        ModelSel::Champion => {
            let ppo = registry.champion(ModelKind::Ppo).ok().flatten().map(|m| m.kind);
            ppo.or_else(|| registry.champion(ModelKind::Lstm).ok().flatten().map(|m| m.kind))
        }
        ModelSel::Latest => registry.latest(None).ok().flatten().map(|m| m.kind),
    };
    found.ok_or_else(|| BacktestError::NoModel(sel.to_string()))
}

/// Loads the models strategy `mode` trades with: the selected model for its kind, the champion for the
/// other (ensemble).
pub(crate) fn load_models(
    config: &Config,
    registry: &Registry,
    mode: StrategyMode,
    sel: &ModelSel,
    sel_kind: ModelKind,
) -> Result<Models, BacktestError> {
    let symbols = &config.market.symbols;
    let pick = |k: ModelKind| if k == sel_kind { sel.clone() } else { ModelSel::Champion };
    let policy = match mode {
        StrategyMode::Ppo | StrategyMode::Ensemble => {
            let pipeline =
                Pipeline::new(&config.features, symbols, config.market.timeframe).with_action(config.env.action);
            Some(PpoPolicy::load(registry, &pick(ModelKind::Ppo), &pipeline, SessionOptions::default())?)
        }
        _ => None,
    };
    let probs: Option<Box<dyn ProbSource>> = match mode {
        StrategyMode::Lstm | StrategyMode::Ensemble => Some(Box::new(LstmProbs::load(
            registry,
            &pick(ModelKind::Lstm),
            &config.features,
            config.lstm.window_spec(),
            symbols,
            config.market.timeframe,
        )?)),
        _ => None,
    };
    Ok((policy, probs))
}

/// The models' id for reports: the PPO's, the LSTM's, or both joined by `+`.
pub(crate) fn models_id(models: &Models) -> String {
    let ids: Vec<String> =
        models.0.iter().map(|p| p.id().to_string()).chain(models.1.iter().map(|p| p.model_id())).collect();
    ids.join("+")
}

/// One evaluation: a strategy over aligned bars, beside buy-and-hold and cash.
#[derive(Debug, Clone)]
pub(crate) struct Evaluation {
    pub curve: Vec<EquityPoint>,
    /// Orders risk refused, by reason code.
    pub refusals: std::collections::BTreeMap<&'static str, usize>,
    pub strategy: Performance,
    pub buy_hold: Performance,
    /// The account's fills, in time order (`evaluate`; empty from `summarise`).
    pub fills: Vec<crate::oms::FillRecord>,
}

impl Evaluation {}

/// The evaluator: `models` trading strategy `mode` over `bars` (aligned, the config's symbols) on a
/// fresh simulated account (a store in memory: no file, no flush), with the full risk checks, beside
/// buy-and-hold over the same bars. The curve starts at the first bar the engine can trade on with
/// `mode` (`first_traded_bar`).
pub(crate) fn evaluate(
    config: &Config,
    mode: StrategyMode,
    models: Models,
    bars: &[Vec<Bar>],
) -> Result<Evaluation, BacktestError> {
    // The account lives in memory: nothing of it is read after the run, so nothing is written or flushed.
    let account = Store::in_memory().map_err(|e| BacktestError::Scratch(e.to_string()))?;
    evaluate_on(config, mode, models, bars, &account)
}

/// `evaluate` on the given (fresh) account store: the same run over a store in memory or on disk.
pub(crate) fn evaluate_on(
    config: &Config,
    mode: StrategyMode,
    models: Models,
    bars: &[Vec<Bar>],
    account: &Store,
) -> Result<Evaluation, BacktestError> {
    let start = session::first_traded_bar(config, mode);
    let days = bars.first().map_or(0, |b| b.len());
    if days < start + 2 {
        return Err(BacktestError::TooFewBars { got: days, need: start + 2, symbols: config.market.symbols.clone() });
    }
    let mut session = SimSession::open(config, mode, account, models, bars[0][0].t)
        .map_err(|e| BacktestError::Scratch(e.to_string()))?;
    let exec = config.env.exec;
    let (bh, bh_act) = buy_and_hold(bars, start, session::initial_cash(config), &exec);
    session.run(bars, &bh)?;
    let mut ev = summarise(config, &session, bh_act);
    let fills = account.tree::<crate::oms::FillRecord>(TreeName::Fills).and_then(|t| t.scan_prefix(b""));
    ev.fills = fills.map_err(|e| BacktestError::Scratch(e.to_string()))?.into_iter().map(|(_, f)| f).collect();
    ev.fills.sort_by_key(|f| f.time);
    Ok(ev)
}

/// The metrics of a session's curve and of its buy-and-hold line (the replay's summary, too).
pub(crate) fn summarise(config: &Config, session: &SimSession, bh_act: Activity) -> Evaluation {
    let ppy = periods_per_year(config.market.timeframe);
    let curve = session.curve().to_vec();
    let bh: Vec<_> = curve.iter().map(|p| (p.t, p.buy_hold)).collect();
    Evaluation {
        refusals: session.refusals().clone(),
        strategy: metrics(&session.equity_curve(), ppy, session.activity()),
        buy_hold: metrics(&bh, ppy, bh_act),
        curve,
        fills: Vec::new(),
    }
}

/// Backtests `subject` over the stored bars of the configured symbols in `[from, to]`, and stores the
/// curve in the `equity` tree (`backtest/<model id>/<time>`).
pub(crate) fn run_subject(
    config: &Config,
    store: &Store,
    registry: &Registry,
    subject: &Subject,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<BacktestReport, BacktestError> {
    let symbols = config.market.symbols.clone();
    let kind = model_kind(registry, &subject.sel)?;
    let mode = subject.mode.unwrap_or(match kind {
        ModelKind::Ppo => StrategyMode::Ppo,
        ModelKind::Lstm => StrategyMode::Lstm,
    });
    let lead = session::first_traded_bar(config, mode);
    let (bars, first_in_window) = window_bars(store, &symbols, config.market.timeframe, (from, to), lead)?;
    if bars.first().is_none_or(|b| b.len() <= first_in_window) {
        let all =
            aligned_bars(store, &symbols, config.market.timeframe, DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC)?;
        let day = |b: Option<&Bar>| b.map(|b| b.t.date_naive().to_string());
        let stored = match all.first().map(|b| (day(b.first()), day(b.last()))) {
            Some((Some(a), Some(z))) => format!("the stored ones run from {a} to {z}"),
            _ => "none is stored".to_string(),
        };
        // The window's days as given: its ends are midnights in New York (`data::day_window`).
        let day = |t: DateTime<Utc>| t.with_timezone(&chrono_tz::America::New_York).date_naive().to_string();
        return Err(BacktestError::EmptyWindow { from: day(from), to: day(to), symbols, stored });
    }
    if mode == StrategyMode::Scripted {
        return Err(BacktestError::NoModel("strategy \"scripted\" is not a model strategy".into()));
    }
    let models = load_models(config, registry, mode, &subject.sel, kind)?;
    let model_id = models_id(&models);
    let ev = evaluate(config, mode, models, &bars)?;
    let tree = store.tree::<EquityPoint>(TreeName::Equity)?;
    for p in &ev.curve {
        let mut key = format!("backtest/{model_id}/").into_bytes();
        key.extend_from_slice(&time_key(p.t));
        tree.insert(&key, p)?;
    }
    store.flush()?;
    Ok(BacktestReport {
        model_id,
        mode,
        from: ev.curve.first().map(|p| p.t),
        to: ev.curve.last().map(|p| p.t),
        bars: ev.curve.len(),
        strategy: ev.strategy,
        buy_hold: ev.buy_hold,
        refusals: ev.refusals,
        curve: ev.curve,
        fills: ev.fills,
    })
}

/// The curve as CSV: `time,equity,cash,buy_hold`.
pub(crate) fn write_csv(path: &std::path::Path, curve: &[EquityPoint]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "time,equity,cash,buy_hold")?;
    for p in curve {
        writeln!(f, "{},{},{},{}", p.t.to_rfc3339(), p.equity, p.cash, p.buy_hold)?;
    }
    f.flush()
}

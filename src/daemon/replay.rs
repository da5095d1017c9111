//! The daemon on a replay: `tradebot run` with `feed.kind = "replay"` and `broker.kind = "sim"`. Stored bars
//! go through the `Engine` (features, models, strategy, full risk checks, OMS) with the `SimBroker` filling
//! each order at the next bar's close, as in the env and the backtest; the engine's clock is the bar clock,
//! so the retrain schedule fires in simulated time. When it fires, the replay waits (simulated time stands
//! still) while the retrain runs in its child process, and a promoted model is swapped in before the next
//! bar: no restart, no missed bar. Between bars the loop answers the control socket, feeds `/metrics` and
//! the dashboard, and pings the systemd watchdog.
//!
//! The simulated account (orders, fills, positions, decisions, kill switch) lives in its own store,
//! `state_dir/replay`, begun afresh by every replay: the SimBroker's account starts from `initial_cash`
//! each time, so yesterday's replay orders must not meet today's. Bars, models and retrain records stay in
//! the main store.

use super::notify::Notifier;
use super::retrainer::{RetrainEvent, Retrainer, RunPipeline};
use crate::backtest::{self, Activity, Metrics as PerfMetrics, periods_per_year};
use crate::broker::SimBroker;
use crate::config::Config;
use crate::control::server::Call;
use crate::control::status::{FeedStatus, ModelsStatus, OrderStatusLine, PositionStatus, RiskStatus, STATUS_VERSION};
use crate::control::{Request, Response, StatusReport};
use crate::domain::{Bar, OrderRequest, OrderStatus, Symbol};
use crate::engine::{
    Command, Control, Engine, EngineConfig, EngineRisk, Event, LstmProbs, ManualClock, ProbSource, StrategyMode,
};
use crate::live::Core;
use crate::metrics::Metrics;
use crate::models::{ModelKind, Registry};
use crate::oms::{Oms, OmsConfig};
use crate::policy::{LstmPolicy, ModelSel, Pipeline, PpoPolicy, SessionOptions};
use crate::retrain::{Progress, RunRecord};
use crate::risk::RiskChecks;
use crate::store::{Store, TreeName};
use crate::web::data::{DashboardData, DecisionView, EquityPoint, GateView, ModelView, SharedData, TrainingView};
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Everything the replay loop talks to besides the engine it builds.
pub struct ReplayParts<P: RunPipeline> {
    pub config: Config,
    /// The main store: bars, retrain records.
    pub store: Store,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub dashboard: Arc<SharedData>,
    pub retrainer: Retrainer<P>,
    /// The retrainer's progress (`Retrainer::with_progress`).
    pub progress: Option<mpsc::UnboundedReceiver<Progress>>,
    /// The control socket's requests (`control::server::serve`).
    pub calls: Option<mpsc::Receiver<Call>>,
    pub shutdown: CancellationToken,
    pub notifier: Notifier,
    /// After the last bar, keep answering status, metrics and the dashboard until shutdown.
    pub linger: bool,
}

/// The end of a replay: the account against buy-and-hold, and every retrain.
#[derive(Debug, Clone)]
pub struct ReplaySummary {
    pub bars: usize,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub strategy: PerfMetrics,
    pub buy_hold: PerfMetrics,
    pub retrains: Vec<RunRecord>,
    /// Bars (after the feature warm-up) on which the engine stored no decision; 0 is the promise.
    pub missed_decisions: usize,
    pub ppo: Option<String>,
    pub lstm: Option<String>,
    /// Stopped by a signal or the control socket before the end of the data.
    pub interrupted: bool,
}

/// The replay window, `feed.from ..= feed.to` (open ends: every stored bar).
pub fn replay_window(config: &Config) -> (DateTime<Utc>, DateTime<Utc>) {
    let first = chrono::NaiveDate::from_ymd_opt(1800, 1, 1).unwrap_or_default();
    let last = chrono::NaiveDate::from_ymd_opt(2300, 1, 1).unwrap_or_default();
    let from = crate::data::daily_bar_time(config.feed.from.unwrap_or(first));
    let to = crate::data::daily_bar_time(config.feed.to.unwrap_or(last)) + chrono::Duration::days(1)
        - chrono::Duration::microseconds(1);
    (from, to)
}

/// The replay's live state, behind the status report and the dashboard.
struct Live {
    bars_received: u64,
    last_bar: BTreeMap<String, DateTime<Utc>>,
    day_open_equity: Option<(chrono::NaiveDate, f64)>,
    equity: Vec<EquityPoint>,
    running: BTreeMap<String, TrainingView>,
    activity: String,
    started_at: DateTime<Utc>,
}

pub fn run<P: RunPipeline>(mut parts: ReplayParts<P>) -> anyhow::Result<ReplaySummary> {
    let config = parts.config.clone();
    let symbols = config.market.symbols.clone();
    let tf = config.market.timeframe;
    let (from, to) = replay_window(&config);
    let bars = backtest::aligned_bars(&parts.store, &symbols, tf, from, to).context("reading the replay's bars")?;
    let days = bars.first().map_or(0, |b| b.len());
    let warmup = config.features.warmup();
    if days < warmup + 2 {
        bail!(
            "the replay window holds {days} bars common to {symbols:?}; at least {} are needed (feature warm-up + 2): widen feed.from / feed.to or import data",
            warmup + 2
        );
    }

    // The simulated account, begun afresh.
    let session_dir = config.state_dir.join("replay");
    if session_dir.exists() {
        std::fs::remove_dir_all(&session_dir)
            .with_context(|| format!("clearing the previous replay's account in {}", session_dir.display()))?;
    }
    let session = Store::open(&session_dir).context("opening the replay's account store")?;
    let clock = ManualClock::new(bars[0][0].t);
    let oms =
        Oms::open(&session, Box::new(clock.clone()), OmsConfig::default()).context("opening the order manager")?;
    let mode = config.strategy.mode;
    if mode == StrategyMode::Scripted {
        bail!(
            "{}: strategy.mode = \"scripted\" is the live runner's order-path harness (feed and broker \"alpaca\", paper); a replay trades a model: use ppo, lstm or ensemble",
            config.source.display()
        );
    }
    let (policy, probs) = load_models(&config, &parts.registry)?;
    let env = &config.env;
    let checks = RiskChecks::open(&config.risk, &env.exec, &session).context("opening the risk checks")?;
    let cfg = EngineConfig {
        strategy: config.strategy.clone(),
        symbols: symbols.clone(),
        features: config.features.clone(),
        initial_cash: env.initial_cash,
        exec: env.exec,
        max_order_notional: config.risk.max_order_notional,
        reconcile_every: 0,
    };
    let mut engine = Engine::new(cfg, &session, oms, policy, probs)
        .context("building the engine")?
        .with_risk(EngineRisk { checks, clock: Box::new(clock.clone()), timeframe: tf, assets: Default::default() });
    let initial_cash = config.broker.initial_cash.to_f64().unwrap_or(env.initial_cash);
    let mut sim = SimBroker::new(initial_cash, env.exec);
    let (bh, _) = backtest::buy_and_hold(&bars, 0, initial_cash, &env.exec);

    let mut live = Live {
        bars_received: 0,
        last_bar: BTreeMap::new(),
        day_open_equity: None,
        equity: Vec::with_capacity(days),
        running: BTreeMap::new(),
        activity: "starting".into(),
        started_at: Utc::now(),
    };
    let mut pending: Vec<OrderRequest> = Vec::new();
    let mut activity = Activity::default();
    let mut curve = Vec::with_capacity(days);
    let mut retrains = Vec::new();
    let mut missed = 0usize;
    let mut interrupted = false;
    let decisions = session.tree::<crate::engine::DecisionRecord>(TreeName::Decisions)?;
    let speed = config.feed.speed;
    log::info!(
        "replay: {days} bars of {symbols:?} from {} to {}, strategy {mode:?}, models {} / {}",
        bars[0][0].t.date_naive(),
        bars[0][days - 1].t.date_naive(),
        engine.policy_id().unwrap_or("-"),
        engine.probs_id().unwrap_or_else(|| "-".into()),
    );

    for d in 0..days {
        if parts.shutdown.is_cancelled() {
            interrupted = true;
            break;
        }
        let t = bars[0][d].t;
        clock.set(t);
        // Yesterday's orders fill at today's close; the broker's view reaches the engine first.
        let prices: Vec<(Symbol, f64)> = bars.iter().map(|b| (b[d].symbol.clone(), f64::from(b[d].c as f32))).collect();
        let snap = backtest::sim::fill_pending(&mut sim, &mut pending, &prices, t, &mut activity)
            .context("simulated broker")?;
        for o in &snap.orders {
            parts.metrics.order(if o.status == OrderStatus::Filled { "filled" } else { "canceled" });
        }
        backtest::sim::deliver(&mut engine, snap, t);
        if d == 0 {
            parts.notifier.ready(&format!("replaying from {}", t.date_naive()));
        }
        let eq = sim.equity();
        let day = t.date_naive();
        if live.day_open_equity.is_none_or(|(d0, _)| d0 != day) {
            // The day opens at the last equity of the day before (the first bar: the account's cash).
            live.day_open_equity = Some((day, curve.last().map_or(initial_cash, |p: &(DateTime<Utc>, f64)| p.1)));
        }
        curve.push((t, eq));
        if eq > 0.0 {
            activity.exposure_sum += (eq - sim.cash()) / eq;
        }
        live.equity.push(EquityPoint { t, equity: eq, buy_hold: bh.get(d).copied().unwrap_or(f64::NAN) });

        let before = decisions.len();
        for b in &bars {
            let bar: &Bar = &b[d];
            parts.metrics.bar(bar.symbol.as_str());
            live.bars_received += 1;
            live.last_bar.insert(bar.symbol.to_string(), bar.t);
            let started = Instant::now();
            let cmds = engine.process(Event::Bar(bar.clone()));
            parts.metrics.decision_latency.observe(started.elapsed().as_secs_f64());
            for c in cmds {
                if let Command::Submit(o) = c {
                    parts.metrics.order("new");
                    pending.push(o.into_inner());
                }
            }
        }
        if d + 1 >= warmup
            && decisions.len() == before
            && !engine.is_paused()
            && engine.risk().and_then(|r| r.kill_switch()).is_none()
        {
            missed += 1;
            log::warn!("replay: no decision stored for the bar at {t}");
        }
        for (_, reason) in engine.take_refusals() {
            parts.metrics.reject(reason);
        }
        live.activity = format!("replaying {}", t.date_naive());
        publish(&parts, &engine, &mut live, &sim, &decisions);
        parts.notifier.watchdog();
        let cmds = serve_calls(&mut parts, &mut engine, &clock, &live, &sim);
        pending.extend(cmds);

        if parts.retrainer.on_clock(&clock) {
            live.activity = format!("retraining at {} (simulated time stands still)", t.date_naive());
            parts.notifier.status(&live.activity);
            publish(&parts, &engine, &mut live, &sim, &decisions);
            if !wait_for_retrain(
                &mut parts,
                &mut engine,
                &clock,
                &mut live,
                &sim,
                &mut retrains,
                &mut pending,
                &decisions,
            ) {
                interrupted = true;
                break;
            }
        }
        if speed > 0.0
            && let Some(next) = bars[0].get(d + 1)
        {
            let gap = (next.t - t).to_std().unwrap_or_default().div_f64(speed);
            sleep_unless_cancelled(&parts.shutdown, gap.min(Duration::from_secs(3600)));
        }
    }

    let (bh_curve, bh_act) = backtest::buy_and_hold(&bars, 0, initial_cash, &env.exec);
    let n = curve.len();
    let ppy = periods_per_year(tf);
    let bh_points: Vec<_> = curve.iter().zip(&bh_curve).map(|((t, _), e)| (*t, *e)).collect();
    let summary = ReplaySummary {
        bars: n,
        from: curve.first().map(|p| p.0),
        to: curve.last().map(|p| p.0),
        strategy: backtest::metrics(&curve, ppy, activity),
        buy_hold: backtest::metrics(&bh_points[..n.min(bh_points.len())], ppy, bh_act),
        retrains,
        missed_decisions: missed,
        ppo: engine.policy_id().map(str::to_string),
        lstm: engine.probs_id(),
        interrupted,
    };
    live.activity = if interrupted { "stopped".into() } else { "replay finished".into() };
    publish(&parts, &engine, &mut live, &sim, &decisions);
    if parts.linger && !interrupted {
        log::info!("replay: finished; serving status, /metrics and the dashboard until SIGTERM");
        parts.notifier.status("replay finished; serving status until stopped");
        while !parts.shutdown.is_cancelled() {
            let cmds = serve_calls(&mut parts, &mut engine, &clock, &live, &sim);
            drop(cmds);
            drain_retrains(&mut parts, &mut engine, &mut live, &mut Vec::new());
            parts.notifier.watchdog();
            sleep_unless_cancelled(&parts.shutdown, Duration::from_millis(50));
        }
    }
    parts.notifier.stopping("flushing state");
    engine.process(Event::Control(Control::Shutdown));
    session.flush().context("flushing the replay's account")?;
    parts.store.flush().context("flushing the store")?;
    Ok(summary)
}

/// A PPO policy and an LSTM probability source, as a strategy needs them.
pub type Models = (Option<PpoPolicy>, Option<Box<dyn ProbSource>>);

/// The champions the configured strategy trades with: the PPO policy (`ppo`, `ensemble`) and the LSTM
/// probability source (`lstm`, `ensemble`), each checked against the running pipeline.
pub fn load_models(config: &Config, registry: &Registry) -> anyhow::Result<Models> {
    let symbols = &config.market.symbols;
    let mode = config.strategy.mode;
    let pipeline = Pipeline::new(&config.features, symbols);
    let policy = match mode {
        StrategyMode::Ppo | StrategyMode::Ensemble => {
            Some(PpoPolicy::load(registry, &ModelSel::Champion, &pipeline, SessionOptions::default()).context(
                "loading the PPO champion (`tradebot models list`; `tradebot models seed` imports the shipped one)",
            )?)
        }
        StrategyMode::Lstm | StrategyMode::Scripted => None,
    };
    let probs: Option<Box<dyn ProbSource>> = match mode {
        StrategyMode::Lstm | StrategyMode::Ensemble => Some(Box::new(
            LstmProbs::load(registry, &ModelSel::Champion, &config.features, config.lstm.window_spec(), symbols)
                .context("loading the LSTM champion")?,
        )),
        StrategyMode::Ppo | StrategyMode::Scripted => None,
    };
    Ok((policy, probs))
}

/// Waits while a retrain runs, answering the control socket and following its progress. Returns false
/// when shutdown came first (the run's child is killed when the runtime drops its task).
#[allow(clippy::too_many_arguments)]
fn wait_for_retrain<P: RunPipeline>(
    parts: &mut ReplayParts<P>,
    engine: &mut Engine,
    clock: &ManualClock,
    live: &mut Live,
    sim: &SimBroker,
    retrains: &mut Vec<RunRecord>,
    pending: &mut Vec<OrderRequest>,
    decisions: &crate::store::TypedTree<crate::engine::DecisionRecord>,
) -> bool {
    loop {
        if parts.shutdown.is_cancelled() {
            return false;
        }
        let idle = drain_retrains(parts, engine, live, retrains);
        pending.extend(serve_calls(parts, engine, clock, live, sim));
        publish(parts, engine, live, sim, decisions);
        parts.notifier.watchdog();
        if idle {
            return true;
        }
        sleep_unless_cancelled(&parts.shutdown, Duration::from_millis(50));
    }
}

/// Applies the retrainer's progress and events; a promotion is hot-swapped into the engine. Returns true
/// when the retrainer went idle.
fn drain_retrains<P: RunPipeline>(
    parts: &mut ReplayParts<P>,
    engine: &mut Engine,
    live: &mut Live,
    retrains: &mut Vec<RunRecord>,
) -> bool {
    if let Some(rx) = parts.progress.as_mut() {
        while let Ok(p) = rx.try_recv() {
            on_progress(&parts.metrics, live, &p);
        }
    }
    let mut idle = false;
    for ev in parts.retrainer.poll() {
        if let Some((kind, id)) = ev.swap() {
            swap_in(&parts.config, &parts.registry, engine, kind, id);
        }
        match ev {
            RetrainEvent::Finished(r) => {
                parts.metrics.retrain(r.kind.as_str(), r.outcome.as_str());
                live.running.remove(r.kind.as_str());
                retrains.push(*r);
            }
            RetrainEvent::Idle => idle = true,
        }
    }
    idle
}

/// Loads the new champion and swaps it in; a model that does not load is logged and the running one kept.
fn swap_in(config: &Config, registry: &Registry, engine: &mut Engine, kind: ModelKind, id: &str) {
    let sel = ModelSel::Id(id.to_string());
    let pipeline = Pipeline::new(&config.features, &config.market.symbols);
    match kind {
        ModelKind::Ppo if engine.policy_id().is_some() => {
            match PpoPolicy::load(registry, &sel, &pipeline, SessionOptions::default()) {
                Ok(p) => engine.set_policy(p),
                Err(e) => log::error!(
                    "replay: the new PPO champion {id} does not load ({e}); the previous model keeps trading"
                ),
            }
        }
        ModelKind::Lstm if engine.probs_id().is_some() => {
            let shapes = crate::engine::lstm_source::shapes(&config.features, &config.lstm.window_spec());
            match LstmPolicy::load(registry, &sel, &pipeline, shapes, SessionOptions::default()) {
                Ok(p) => {
                    if let Some(src) = engine.probs_mut() {
                        log::info!("engine: LSTM model {} → {id}", src.model_id());
                        src.set_lstm(p);
                    }
                }
                Err(e) => log::error!(
                    "replay: the new LSTM champion {id} does not load ({e}); the previous model keeps trading"
                ),
            }
        }
        _ => log::info!(
            "replay: {} champion is now {id} (not used by strategy {:?})",
            kind.as_str(),
            config.strategy.mode
        ),
    }
}

fn on_progress(metrics: &Metrics, live: &mut Live, p: &Progress) {
    match p {
        Progress::Snapshot { kind, .. } => {
            live.running.insert(
                kind.as_str().to_string(),
                TrainingView {
                    id: format!("{}-running", kind.as_str()),
                    kind: kind.as_str().to_string(),
                    started_at: Utc::now(),
                    outcome: "running".into(),
                    curves: BTreeMap::new(),
                    progress: None,
                },
            );
        }
        Progress::Training { kind, line } => {
            metrics.training_progress(kind.as_str(), line);
            if let Some(v) = live.running.get_mut(kind.as_str()) {
                for (name, key) in [("return", "mean_return"), ("loss", "train_loss"), ("val_mcc", "val_mcc")] {
                    if let Some(x) = line.get(key).and_then(|x| x.as_f64()) {
                        v.curves.entry(name.to_string()).or_default().push(x);
                    }
                }
                let done = line.get("env_steps").or_else(|| line.get("epoch")).and_then(|x| x.as_f64());
                let total = line.get("total_steps").or_else(|| line.get("max_epochs")).and_then(|x| x.as_f64());
                if let (Some(done), Some(total)) = (done, total) {
                    v.progress = Some(crate::web::data::Progress {
                        done,
                        total,
                        steps_per_s: line
                            .get("steps_per_s")
                            .or_else(|| line.get("samples_per_sec"))
                            .and_then(|x| x.as_f64())
                            .unwrap_or(0.0),
                        eta_secs: line.get("eta_secs").and_then(|x| x.as_f64()).unwrap_or(0.0),
                    });
                }
            }
        }
        Progress::Evaluating { .. } | Progress::Finished(_) => {}
    }
}

/// Answers whatever the control socket asked since the last bar; returns orders to send (flatten).
fn serve_calls<P: RunPipeline>(
    parts: &mut ReplayParts<P>,
    engine: &mut Engine,
    clock: &ManualClock,
    live: &Live,
    sim: &SimBroker,
) -> Vec<OrderRequest> {
    let mut out = Vec::new();
    let Some(rx) = parts.calls.as_mut() else { return out };
    while let Ok((req, reply)) = rx.try_recv() {
        let resp = match req {
            Request::Status => {
                Response::status(status(&parts.config, &parts.store, engine, live, sim, &parts.retrainer))
            }
            Request::Pause => {
                engine.process(Event::Control(Control::Pause));
                Response::done("paused: no new orders until resume")
            }
            Request::Resume => {
                engine.process(Event::Control(Control::Resume));
                Response::done("resumed")
            }
            Request::Flatten => {
                for c in engine.process(Event::Control(Control::Flatten)) {
                    if let Command::Submit(o) = c {
                        out.push(o.into_inner());
                    }
                }
                Response::done("flattening every position, then paused")
            }
            Request::Retrain { kind } => match parts.retrainer.request(kind, "control socket", clock) {
                Ok(()) => Response::done("retrain started"),
                Err(e) => Response::error(e.to_string()),
            },
        };
        let _ = reply.send(resp);
    }
    out
}

/// The status report, the metrics' gauges and the dashboard, from the engine's state now.
fn publish<P: RunPipeline>(
    parts: &ReplayParts<P>,
    engine: &Engine,
    live: &mut Live,
    sim: &SimBroker,
    decisions: &crate::store::TypedTree<crate::engine::DecisionRecord>,
) {
    let st = status(&parts.config, &parts.store, engine, live, sim, &parts.retrainer);
    parts.metrics.observe_status(&st);
    let recent = recent_decisions(decisions, &parts.config.market.symbols, 10);
    let (models, gate, training) = history(&parts.registry, &parts.store, live);
    parts.dashboard.set(DashboardData {
        status: st,
        equity: live.equity.clone(),
        decisions: recent,
        models,
        gate,
        training,
    });
}

fn status<P: RunPipeline>(
    config: &Config,
    store: &Store,
    engine: &Engine,
    live: &Live,
    sim: &SimBroker,
    retrainer: &Retrainer<P>,
) -> StatusReport {
    let now = live.last_bar.values().max().copied().unwrap_or_else(Utc::now);
    let closes: BTreeMap<Symbol, f64> = engine.last_closes().into_iter().collect();
    let positions: Vec<PositionStatus> = engine
        .oms()
        .positions()
        .into_iter()
        .map(|(s, q)| {
            let qty = q.to_f64().unwrap_or(f64::NAN);
            let price = closes.get(&s).copied().unwrap_or(f64::NAN);
            PositionStatus { symbol: s.to_string(), qty, price, value: qty * price }
        })
        .collect();
    let equity = sim.equity();
    let gross: f64 = positions.iter().map(|p| p.value.abs()).sum();
    let open_orders = engine
        .oms()
        .open_orders()
        .map(|o| OrderStatusLine {
            client_order_id: o.client_order_id.to_string(),
            symbol: o.symbol.to_string(),
            side: format!("{:?}", o.side).to_lowercase(),
            qty: o.qty.and_then(|q| q.to_f64()).unwrap_or(f64::NAN),
            status: format!("{:?}", o.status).to_lowercase(),
        })
        .collect();
    let day_open = live.day_open_equity.map_or(equity, |(_, e)| e);
    let mut models = super::status::models(config, store, now).unwrap_or_else(|e| {
        log::warn!("status: cannot read the registry or the runs: {e}");
        ModelsStatus::default()
    });
    // What the engine trades with, which is what the registry's champion is after a swap.
    models.ppo = engine.policy_id().map(str::to_string).or(models.ppo);
    models.lstm = engine.probs_id().or(models.lstm);
    models.retraining = live.running.keys().next().cloned();
    models.next_retrain = retrainer.next_due();
    let kill = engine.risk().and_then(|r| r.kill_switch());
    StatusReport {
        version: STATUS_VERSION,
        daemon_running: true,
        mode: format!("{:?}", config.mode).to_lowercase(),
        pid: std::process::id(),
        started_at: Some(live.started_at),
        activity: live.activity.clone(),
        feed: FeedStatus {
            kind: "replay".into(),
            connected: true,
            reconnects: 0,
            last_bar: live.last_bar.clone(),
            bars_received: live.bars_received,
        },
        positions,
        open_orders,
        equity,
        cash: sim.cash(),
        pnl_today: equity - day_open,
        models,
        risk: RiskStatus {
            kill_switch: kill.is_some(),
            kill_reason: kill.map(|k| k.reason.clone()),
            paused: engine.is_paused(),
            gross_exposure: if equity > 0.0 { gross / equity } else { 0.0 },
        },
    }
}

fn recent_decisions(
    tree: &crate::store::TypedTree<crate::engine::DecisionRecord>,
    symbols: &[Symbol],
    n: usize,
) -> Vec<DecisionView> {
    let Ok(all) = tree.scan_prefix(b"") else { return Vec::new() };
    let mut out = Vec::new();
    for (_, r) in all.into_iter().rev().take(n) {
        let model = r.model_id.clone().or(r.lstm_model_id.clone()).unwrap_or_default();
        for (k, sym) in symbols.iter().enumerate() {
            let mut outputs = BTreeMap::new();
            if let Some(a) = r.actions.get(k) {
                outputs.insert("action".to_string(), f64::from(*a));
            }
            if let Some(Some(p)) = r.probs.get(k) {
                outputs.insert("p_down".to_string(), f64::from(p[0]));
                outputs.insert("p_up".to_string(), f64::from(p[2]));
            }
            if let Some(c) = r.closes.get(k) {
                outputs.insert("close".to_string(), *c);
            }
            let action = r
                .orders
                .iter()
                .find(|o| o.0 == sym.as_str())
                .map(|o| format!("{} {}", o.1, o.2))
                .or_else(|| r.note.clone().filter(|n| n.starts_with(&format!("{sym} ")) || !n.contains(": refused")))
                .unwrap_or_else(|| "hold".into());
            out.push(DecisionView { t: r.t, symbol: sym.to_string(), model_id: model.clone(), outputs, action });
        }
    }
    out
}

fn history(registry: &Registry, store: &Store, live: &Live) -> (Vec<ModelView>, Vec<GateView>, Vec<TrainingView>) {
    let models = registry
        .list()
        .map(|(ms, _)| {
            let mut v: Vec<ModelView> = ms
                .into_iter()
                .map(|m| ModelView {
                    id: m.id,
                    kind: m.kind.as_str().to_string(),
                    state: format!("{:?}", m.state).to_lowercase(),
                    created_at: m.created_at,
                    metrics: m.metrics,
                })
                .collect();
            v.sort_by_key(|m| std::cmp::Reverse(m.created_at));
            v
        })
        .unwrap_or_default();
    let runs = crate::retrain::record::list(store).unwrap_or_default();
    let gate = runs
        .iter()
        .map(|r| GateView {
            at: r.started_at,
            kind: r.kind.as_str().to_string(),
            candidate: r.candidate.clone(),
            outcome: r.outcome.as_str().to_string(),
            reason: r.reason(),
            numbers: r.decision.as_ref().map(|d| d.numbers.clone()).unwrap_or_default(),
        })
        .collect();
    let mut training: Vec<TrainingView> = live.running.values().cloned().collect();
    training.extend(runs.iter().map(|r| TrainingView {
        id: r.id.clone(),
        kind: r.kind.as_str().to_string(),
        started_at: r.started_at,
        outcome: r.outcome.as_str().to_string(),
        curves: r.train_metrics.iter().map(|(k, v)| (k.clone(), vec![*v])).collect(),
        progress: None,
    }));
    (models, gate, training)
}

fn sleep_unless_cancelled(token: &CancellationToken, d: Duration) {
    let end = Instant::now() + d;
    while !token.is_cancelled() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

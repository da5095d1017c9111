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

use super::host::{Account, Host, load_models};
use super::retrainer::RunPipeline;
use crate::backtest::{self, Activity, Metrics as PerfMetrics, periods_per_year};
use crate::broker::SimBroker;
use crate::config::Config;
use crate::domain::{OrderRequest, OrderStatus};
use crate::engine::{
    Command, Control, DecisionRecord, Engine, EngineConfig, EngineRisk, Event, ManualClock, StrategyMode,
};
use crate::live::Core;
use crate::oms::{Oms, OmsConfig};
use crate::retrain::RunRecord;
use crate::risk::RiskChecks;
use crate::store::{Store, TreeName, TypedTree};
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub struct ReplayParts<P: RunPipeline> {
    pub host: Host<P>,
    pub shutdown: CancellationToken,
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

pub fn run<P: RunPipeline>(parts: ReplayParts<P>) -> anyhow::Result<ReplaySummary> {
    let ReplayParts { mut host, shutdown, linger } = parts;
    let config = host.config.clone();
    let symbols = config.market.symbols.clone();
    let tf = config.market.timeframe;
    let mode = config.strategy.mode;
    if mode == StrategyMode::Scripted {
        bail!(
            "{}: strategy.mode = \"scripted\" is the live runner's order-path harness (feed and broker \"alpaca\", paper); a replay trades a model: use ppo, lstm or ensemble",
            config.source.display()
        );
    }
    let (from, to) = replay_window(&config);
    let bars = backtest::aligned_bars(&host.store, &symbols, tf, from, to).context("reading the replay's bars")?;
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
    let (policy, probs) = load_models(&config, &host.registry)?;
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

    let mut pending: Vec<OrderRequest> = Vec::new();
    let mut activity = Activity::default();
    let mut curve = Vec::with_capacity(days);
    let mut missed = 0usize;
    let mut interrupted = false;
    let decisions = session.tree::<DecisionRecord>(TreeName::Decisions)?;
    let speed = config.feed.speed;
    log::info!(
        "replay: {days} bars of {symbols:?} from {} to {}, strategy {mode:?}, models {} / {}",
        bars[0][0].t.date_naive(),
        bars[0][days - 1].t.date_naive(),
        engine.policy_id().unwrap_or("-"),
        engine.probs_id().unwrap_or_else(|| "-".into()),
    );
    let account = |sim: &SimBroker| Account { equity: sim.equity(), cash: sim.cash() };

    for d in 0..days {
        if shutdown.is_cancelled() {
            interrupted = true;
            break;
        }
        let t = bars[0][d].t;
        clock.set(t);
        // Yesterday's orders fill at today's close; the broker's view reaches the engine first.
        let prices: Vec<_> = bars.iter().map(|b| (b[d].symbol.clone(), f64::from(b[d].c as f32))).collect();
        let snap = backtest::sim::fill_pending(&mut sim, &mut pending, &prices, t, &mut activity)
            .context("simulated broker")?;
        for o in &snap.orders {
            host.metrics.order(if o.status == OrderStatus::Filled { "filled" } else { "canceled" });
        }
        backtest::sim::deliver(&mut engine, snap, t);
        if d == 0 {
            host.notifier.ready(&format!("replaying from {}", t.date_naive()));
        }
        let eq = sim.equity();
        curve.push((t, eq));
        if eq > 0.0 {
            activity.exposure_sum += (eq - sim.cash()) / eq;
        }
        host.equity_point(t, eq, bh.get(d).copied().unwrap_or(f64::NAN));

        // The last stored decision's key (O(log n); `len` would scan the tree).
        let last_key = |d: &TypedTree<DecisionRecord>| d.last().ok().flatten().map(|(k, _)| k);
        let before = last_key(&decisions);
        for b in &bars {
            host.saw_bar(&b[d]);
            let started = Instant::now();
            let cmds = engine.process(Event::Bar(b[d].clone()));
            host.metrics.decision_latency.observe(started.elapsed().as_secs_f64());
            submit(&host, cmds, &mut pending);
        }
        if d + 1 >= warmup
            && last_key(&decisions) == before
            && !engine.is_paused()
            && engine.risk().and_then(|r| r.kill_switch()).is_none()
        {
            missed += 1;
            log::warn!("replay: no decision stored for the bar at {t}");
        }
        host.live.activity = format!("replaying {}", t.date_naive());
        let (cmds, _) = host.poll(&mut engine, &clock, account(&sim));
        submit(&host, cmds, &mut pending);
        host.publish(&engine, account(&sim), Some(&decisions));
        host.notifier.watchdog();

        if host.retrainer.on_clock(&clock) {
            host.set_activity(format!("retraining at {} (simulated time stands still)", t.date_naive()));
            if !wait_for_retrain(&mut host, &mut engine, &clock, &sim, &mut pending, &decisions, &shutdown) {
                interrupted = true;
                break;
            }
        }
        if speed > 0.0
            && let Some(next) = bars[0].get(d + 1)
        {
            let gap = (next.t - t).to_std().unwrap_or_default().div_f64(speed);
            sleep_unless_cancelled(&shutdown, gap.min(Duration::from_secs(3600)));
        }
    }

    let (bh_curve, bh_act) = backtest::buy_and_hold(&bars, 0, initial_cash, &env.exec);
    let n = curve.len();
    let ppy = periods_per_year(tf);
    let bh_points: Vec<_> = curve.iter().zip(&bh_curve).map(|((t, _), e)| (*t, *e)).collect();
    host.set_activity(if interrupted { "stopped" } else { "replay finished" });
    host.publish(&engine, account(&sim), Some(&decisions));
    if linger && !interrupted {
        log::info!("replay: finished; serving status, /metrics and the dashboard until SIGTERM");
        while !shutdown.is_cancelled() {
            let _ = host.poll(&mut engine, &clock, account(&sim));
            host.publish(&engine, account(&sim), Some(&decisions));
            host.notifier.watchdog();
            sleep_unless_cancelled(&shutdown, Duration::from_millis(100));
        }
    }
    let summary = ReplaySummary {
        bars: n,
        from: curve.first().map(|p| p.0),
        to: curve.last().map(|p| p.0),
        strategy: backtest::metrics(&curve, ppy, activity),
        buy_hold: backtest::metrics(&bh_points[..n.min(bh_points.len())], ppy, bh_act),
        retrains: std::mem::take(&mut host.retrains),
        missed_decisions: missed,
        ppo: engine.policy_id().map(str::to_string),
        lstm: engine.probs_id(),
        interrupted,
    };
    host.notifier.stopping("flushing state");
    engine.process(Event::Control(Control::Shutdown));
    session.flush().context("flushing the replay's account")?;
    host.store.flush().context("flushing the store")?;
    Ok(summary)
}

/// Orders the engine submitted go to the simulated broker for the next bar.
fn submit<P: RunPipeline>(host: &Host<P>, cmds: Vec<Command>, pending: &mut Vec<OrderRequest>) {
    for c in cmds {
        if let Command::Submit(o) = c {
            host.metrics.order("new");
            pending.push(o.into_inner());
        }
    }
}

/// Waits while a retrain runs, answering the control socket and following its progress. Returns false
/// when shutdown came first (the run's child is killed when the runtime drops its task).
fn wait_for_retrain<P: RunPipeline>(
    host: &mut Host<P>,
    engine: &mut Engine,
    clock: &ManualClock,
    sim: &SimBroker,
    pending: &mut Vec<OrderRequest>,
    decisions: &TypedTree<DecisionRecord>,
    shutdown: &CancellationToken,
) -> bool {
    let account = Account { equity: sim.equity(), cash: sim.cash() };
    loop {
        if shutdown.is_cancelled() {
            return false;
        }
        let (cmds, idle) = host.poll(engine, clock, account);
        submit(host, cmds, pending);
        host.publish(engine, account, Some(decisions));
        host.notifier.watchdog();
        if idle {
            return true;
        }
        sleep_unless_cancelled(shutdown, Duration::from_millis(50));
    }
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

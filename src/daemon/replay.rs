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

use super::host::{Account, EngineView, Host};
use super::models::load_models;
use super::retrainer::RunPipeline;
use crate::backtest::{self, EquityPoint, Metrics as PerfMetrics, SimSession, session};
use crate::config::Config;
use crate::domain::OrderStatus;
use crate::engine::Core;
use crate::engine::{Control, DecisionRecord, Event, StrategyMode};
use crate::out::out;
use crate::retrain::RunRecord;
use crate::store::{Store, TreeName, TypedTree};
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
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
    /// Bars of the replay window stepped (`feed.from ..= feed.to`; fewer when stopped early).
    pub bars: usize,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// The first bar the engine could trade on: the window's first, unless the stored bars before the
    /// window were too few to warm the features up.
    pub traded_from: Option<DateTime<Utc>>,
    pub strategy: PerfMetrics,
    pub buy_hold: PerfMetrics,
    pub retrains: Vec<RunRecord>,
    /// Bars (after the feature warm-up) on which the engine stored no decision; 0 is the promise.
    pub missed_decisions: usize,
    pub ppo: Option<String>,
    pub lstm: Option<String>,
    /// Stopped by a signal or the control socket before the end of the data.
    pub interrupted: bool,
    /// The account and buy-and-hold at every bar from the first tradable one (the backtest's curve).
    pub curve: Vec<EquityPoint>,
    /// Orders risk refused, by reason code.
    pub refusals: std::collections::BTreeMap<&'static str, usize>,
    /// The kill switch, when it tripped in the replay: (when, why).
    pub kill_switch: Option<(DateTime<Utc>, String)>,
    /// Already printed on stdout (`--linger` prints it when the replay ends, not at SIGTERM).
    pub printed: bool,
}

/// The replay window, `feed.from ..= feed.to` (open ends: every stored bar).
pub fn replay_window(config: &Config) -> (DateTime<Utc>, DateTime<Utc>) {
    crate::data::day_window(config.feed.from, config.feed.to)
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
    // Up to a warm-up's worth of stored bars before the window, so trading starts at `feed.from`.
    let lead = session::first_traded_bar(&config, mode);
    let (bars, window_start) =
        backtest::window_bars(&host.store, &symbols, tf, (from, to), lead).context("reading the replay's bars")?;
    let days = bars.first().map_or(0, |b| b.len());
    let warmup = config.features.warmup();
    if days < warmup + 2 || window_start >= days {
        bail!(
            "the replay window holds {days} bars common to {}; at least {} are needed (feature warm-up + 2): widen feed.from / feed.to or import data",
            crate::domain::symbol_list(&symbols),
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
    let models = load_models(&config, &host.registry)?;
    // The one evaluator's session (`backtest::session`): what `tradebot backtest` and the gate step too.
    let mut sim = SimSession::open(&config, mode, &session, models, bars[0][0].t).context("starting the replay")?;
    let start = sim.record_from();
    let (bh, bh_act) =
        backtest::buy_and_hold(&bars, start.min(days - 1), session::initial_cash(&config), &config.env.exec);

    let mut missed = 0usize;
    let mut stepped = 0usize;
    let mut interrupted = false;
    let decisions = session.tree::<DecisionRecord>(TreeName::Decisions)?;
    let speed = config.feed.speed;
    log::info!(
        "replay: {} bars of {} from {} to {} ({window_start} stored bars before it warm the features up), strategy {mode}, models {} / {}",
        days - window_start,
        symbols.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
        bars[0][window_start].t.date_naive(),
        bars[0][days - 1].t.date_naive(),
        sim.engine().policy_id().unwrap_or("-"),
        sim.engine().probs_id().unwrap_or_else(|| "-".into()),
    );

    for d in 0..days {
        if shutdown.is_cancelled() {
            interrupted = true;
            break;
        }
        let t = bars[0][d].t;
        // Yesterday's orders fill at today's close; the broker's view reaches the engine first.
        let statuses = sim.fill(&bars, d, sim.buy_hold_at(&bh, d)).context("simulated broker")?;
        for st in statuses {
            host.metrics.order(if st == OrderStatus::Filled { "filled" } else { "canceled" });
        }
        // Bars before the window only warm the features up: not fed, charted or scheduled on.
        let warming = d < window_start;
        if d == window_start {
            host.notifier.ready(&format!("replaying from {}", t.date_naive()));
        }
        if !warming {
            let (equity, _) = sim.account();
            host.equity_point(t, equity, sim.buy_hold_at(&bh, d));
        }

        // The last stored decision's key (O(log n); `len` would scan the tree).
        let last_key = |d: &TypedTree<DecisionRecord>| d.last().ok().flatten().map(|(k, _)| k);
        let before = last_key(&decisions);
        for b in &bars {
            if !warming {
                host.saw_bar(&b[d]);
            }
            let started = Instant::now();
            let n = sim.decide(&b[d]);
            host.metrics.decision_latency.observe(started.elapsed().as_secs_f64());
            for _ in 0..n {
                host.metrics.order("new");
            }
        }
        for reason in sim.take_fresh_refusals() {
            host.metrics.reject(reason);
        }
        let engine = sim.engine();
        if d + 1 >= warmup
            && last_key(&decisions) == before
            && !engine.is_paused()
            && engine.risk().and_then(|r| r.kill_switch()).is_none()
        {
            missed += 1;
            // Without a model the engine said so once; each bar is not news.
            if engine.missing_model().is_none() {
                log::warn!("replay: no decision stored for the bar at {t}");
            }
        }
        stepped = d + 1;
        host.live.activity = format!("replaying {}", t.date_naive());
        poll(&mut host, &mut sim, &session);
        host.notifier.watchdog();

        if !warming && host.retrainer.on_clock(sim.clock()) {
            host.set_activity(format!("retraining at {} (simulated time stands still)", t.date_naive()));
            if !wait_for_retrain(&mut host, &mut sim, &session, &shutdown) {
                interrupted = true;
                break;
            }
        }
        if speed > 0.0
            && !warming
            && let Some(next) = bars[0].get(d + 1)
        {
            let gap = (next.t - t).to_std().unwrap_or_default().div_f64(speed);
            sleep_unless_cancelled(&shutdown, gap.min(Duration::from_secs(3600)));
        }
    }

    host.set_activity(if interrupted { "stopped" } else { "replay finished" });
    publish(&mut host, &sim, &session);
    let ev = backtest::summarise(&config, &sim, bh_act);
    let engine = sim.engine();
    let window = &bars[0][window_start..];
    let replayed = stepped.saturating_sub(window_start);
    let summary = ReplaySummary {
        bars: replayed,
        from: window.first().map(|b| b.t),
        to: window.get(replayed.saturating_sub(1)).map(|b| b.t),
        traded_from: ev.curve.first().map(|p| p.t),
        strategy: ev.strategy,
        buy_hold: ev.buy_hold,
        retrains: std::mem::take(&mut host.retrains),
        missed_decisions: missed,
        ppo: engine.policy_id().map(str::to_string),
        lstm: engine.probs_id(),
        interrupted,
        refusals: ev.refusals,
        kill_switch: engine.risk().and_then(|r| r.kill_switch()).map(|k| (k.tripped_at, k.reason.clone())),
        curve: ev.curve,
        printed: false,
    };
    let mut summary = summary;
    if linger && !interrupted {
        // The summary now, when the replay ends; the daemon then serves until SIGTERM.
        if let Err(e) = out!("{summary}") {
            log::warn!("replay: the summary was not printed ({e}: {}); serving on", e.0);
        }
        summary.printed = true;
        log::info!("replay: finished; serving status, /metrics and the dashboard until SIGTERM");
        while !shutdown.is_cancelled() {
            poll(&mut host, &mut sim, &session);
            host.notifier.watchdog();
            sleep_unless_cancelled(&shutdown, Duration::from_millis(100));
        }
    }
    host.notifier.stopping("flushing state");
    sim.engine_mut().process(Event::Control(Control::Shutdown));
    session.flush().context("flushing the replay's account")?;
    host.store.flush().context("flushing the store")?;
    Ok(summary)
}

/// Between bars: the host's control calls and retrain outcomes (a flatten's orders go to the simulated
/// broker), then the dashboard.
fn poll<P: RunPipeline>(host: &mut Host<P>, sim: &mut SimSession, account: &Store) -> bool {
    let clock = sim.clock().clone();
    let now = view(sim);
    let (cmds, idle) = host.poll(sim.engine_mut(), &now, &clock);
    for _ in 0..sim.submit(cmds) {
        host.metrics.order("new");
    }
    host.publish(&view(sim), Some(account));
    idle
}

fn publish<P: RunPipeline>(host: &mut Host<P>, sim: &SimSession, account: &Store) {
    host.refresh_book();
    host.publish(&view(sim), Some(account));
}

/// The engine as the host sees it, with the simulated broker's account.
fn view(sim: &SimSession) -> EngineView {
    let (equity, cash) = sim.account();
    EngineView::of(sim.engine(), Account { equity, cash })
}

/// Waits while a retrain runs, answering the control socket and following its progress. Returns false
/// when shutdown came first (the run's child is killed when the runtime drops its task).
fn wait_for_retrain<P: RunPipeline>(
    host: &mut Host<P>,
    sim: &mut SimSession,
    account: &Store,
    shutdown: &CancellationToken,
) -> bool {
    loop {
        if shutdown.is_cancelled() {
            return false;
        }
        let idle = poll(host, sim, account);
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

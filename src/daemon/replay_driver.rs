//! The daemon on a replay: `tradebot run` with `feed.kind = "replay"` and `broker.kind = "sim"`. Stored bars
//! go through the `Engine` (features, models, strategy, full risk checks, OMS) with the `SimBroker` filling
//! each order at the next bar's close, as in the env and the backtest; the engine's clock is the bar clock,
//! so the retrain schedule fires in simulated time. When it fires, the replay waits (simulated time stands
//! still) while the retrain runs in its child process, and a promoted model is swapped in before the next
//! bar: no restart, no missed bar. The replay is a thin driver: the bars go through the one run loop of
//! every simulated session (`SimSession::drive`, over `engine::drive::run`); its hooks (`ReplayHooks`) count
//! the bars, orders and missed decisions for `/metrics`, and between bars answer the control socket, feed
//! the dashboard, ping the systemd watchdog, wait for retrains and pace the replay (`feed.speed`).
//!
//! The simulated account (orders, fills, positions, decisions, kill switch) lives in its own store,
//! `state_dir/replay`, begun afresh by every replay: the SimBroker's account starts from `initial_cash`
//! each time, so yesterday's replay orders must not meet today's. Bars, models and retrain records stay in
//! the main store.

use super::host::{Balance, EngineView, Host};
use super::models::load_models;
use super::replay_hooks::{ReplayHooks, poll, sleep_unless_cancelled};
use super::retrainer::RunPipeline;
use crate::backtest::{self, EquityPoint, Performance, SimSession, session};
use crate::config::Config;
use crate::domain::Bar;
use crate::engine::Core;
use crate::engine::drive::Flow;
use crate::engine::{Control, Event, StrategyMode};
use crate::out::out;
use crate::retrain::RunRecord;
use crate::store::Store;
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) struct ReplayParts<P: RunPipeline> {
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
    pub strategy: Performance,
    pub buy_hold: Performance,
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
pub(crate) fn replay_window(config: &Config) -> (DateTime<Utc>, DateTime<Utc>) {
    crate::data::day_window(config.feed.from, config.feed.to)
}

/// The stored bars a replay steps: up to a warm-up's worth before the window (so trading starts at
/// `feed.from`), and the index of the window's first bar.
fn replay_bars<P: RunPipeline>(host: &Host<P>, config: &Config) -> anyhow::Result<(Vec<Vec<Bar>>, usize)> {
    let symbols = &config.market.symbols;
    let mode = config.strategy.mode;
    if mode == StrategyMode::Scripted {
        bail!(
            "{}: strategy.mode = \"scripted\" is the live runner's order-path harness (feed and broker \"alpaca\", paper); a replay trades a model: use ppo, lstm or ensemble",
            config.source.display()
        );
    }
    let lead = session::first_traded_bar(config, mode);
    let (bars, window_start) =
        backtest::window_bars(&host.store, symbols, config.market.timeframe, replay_window(config), lead)
            .context("reading the replay's bars")?;
    let days = bars.first().map_or(0, |b| b.len());
    let warmup = config.features.warmup();
    if days < warmup + 2 || window_start >= days {
        bail!(
            "the replay window holds {days} bars common to {}; at least {} are needed (feature warm-up + 2): widen feed.from / feed.to or import data",
            crate::domain::symbol_list(symbols),
            warmup + 2
        );
    }
    Ok((bars, window_start))
}

/// The simulated account's store, `state_dir/replay`, begun afresh.
fn fresh_account(config: &Config) -> anyhow::Result<Store> {
    let dir = config.state_dir.join("replay");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("clearing the previous replay's account in {}", dir.display()))?;
    }
    Store::open(&dir).context("opening the replay's account store")
}

pub(crate) fn run<P: RunPipeline>(parts: ReplayParts<P>) -> anyhow::Result<ReplaySummary> {
    let ReplayParts { mut host, shutdown, linger } = parts;
    let config = host.config.clone();
    let mode = config.strategy.mode;
    let (bars, window_start) = replay_bars(&host, &config)?;
    let days = bars[0].len();
    let account = fresh_account(&config)?;
    host.account = Some(account.clone());
    let models = load_models(&config, &host.registry)?;
    // The one evaluator's session (`backtest::session`): what `tradebot backtest` and the gate step too.
    let mut sim = SimSession::open(&config, mode, &account, models, bars[0][0].t).context("starting the replay")?;
    let start = sim.record_from();
    let (bh, bh_act) =
        backtest::buy_and_hold(&bars, start.min(days - 1), session::initial_cash(&config), &config.env.exec);
    log::info!(
        "replay: {} bars of {} from {} to {} ({window_start} stored bars before it warm the features up), strategy {mode}, models {} / {}",
        days - window_start,
        crate::domain::symbol_list(&config.market.symbols),
        bars[0][window_start].t.date_naive(),
        bars[0][days - 1].t.date_naive(),
        sim.engine().policy_id().unwrap_or("-"),
        sim.engine().probs_id().unwrap_or_else(|| "-".into()),
    );
    let clock = sim.clock().clone();
    let mut hooks = ReplayHooks::new(&mut host, (&account, &shutdown), clock, (&bars, window_start), (&bh, start))?;
    let flow = if shutdown.is_cancelled() { Flow::Stop } else { sim.drive(&bars, &bh, &mut hooks)? };
    let (stepped, missed) = (hooks.stepped, hooks.missed);
    let interrupted = flow == Flow::Stop;

    host.set_activity(if interrupted { "stopped" } else { "replay finished" });
    host.refresh_book();
    host.publish(&view(&sim), Some(&account));
    let ev = backtest::summarise(&config, &sim, bh_act);
    let engine = sim.engine();
    let window = &bars[0][window_start..];
    let replayed = stepped.saturating_sub(window_start);
    let mut summary = ReplaySummary {
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
    if linger && !interrupted {
        summary.printed = serve_until_shutdown(&mut host, &mut sim, &account, &shutdown, &summary);
    }
    host.report.stopping("flushing state");
    sim.engine_mut().process(Event::Control(Control::Shutdown));
    account.flush().context("flushing the replay's account")?;
    host.store.flush().context("flushing the store")?;
    Ok(summary)
}

/// `--linger`: the summary now, when the replay ends; then status, /metrics and the dashboard until
/// shutdown (a flatten's orders go to the simulated broker, which no bar fills any more). Returns
/// whether the summary was printed.
fn serve_until_shutdown<P: RunPipeline>(
    host: &mut Host<P>,
    sim: &mut SimSession,
    account: &Store,
    shutdown: &CancellationToken,
    summary: &ReplaySummary,
) -> bool {
    let printed = match out!("{summary}") {
        Ok(()) => true,
        Err(e) => {
            log::warn!("replay: the summary was not printed ({e}: {}); serving on", e.0);
            false
        }
    };
    log::info!("replay: finished; serving status, /metrics and the dashboard until SIGTERM");
    let clock = sim.clock().clone();
    while !shutdown.is_cancelled() {
        let funds = sim.account();
        let (cmds, _) = poll(host, sim.engine_mut(), funds, &clock, account);
        sim.submit(cmds);
        host.report.watchdog();
        sleep_unless_cancelled(shutdown, Duration::from_millis(100));
    }
    printed
}

/// The engine as the host sees it, with the simulated broker's account.
fn view(sim: &SimSession) -> EngineView {
    let (equity, cash) = sim.account();
    EngineView::of(sim.engine(), Balance { equity, cash })
}

//! The live driver: `tradebot::run` with `feed.kind = "alpaca"` and `broker.kind = "alpaca"`, the live
//! runner (`crate::live`) against Alpaca (or anything speaking its protocol at the configured URLs, such as `tradebot fake-alpaca`).
//!
//! It logs the account it will trade first (`alpaca::start`: id, status, cash, equity), then drives the
//! `Engine` (built as the simulated sessions build theirs, `EngineConfig::from_config`) with the configured
//! strategy and the registry's champions (seeded from the shipped `models/`), the full risk checks on the
//! process's clock with Alpaca's asset rules (`broker::alpaca::asset_rules`), and the OMS on the store.
//! Before the first reconciliation the engine is warmed up on the stored bars (`Engine::warm_up_on_store`:
//! features and LSTM windows; no decision).
//! The feed's minutes pass `feed::LiveBars`: each is stored, the gap since the last stored one is
//! backfilled, and the engine gets closed bars of `market.timeframe` (daily bars at the calendar's close).
//! sd_notify: `READY=1` after the first reconciliation, `WATCHDOG=1` as events are processed.
//!
//! `strategy.mode = "scripted"` drives `live::ScriptedCore` instead (it buys one unit of each symbol on
//! each bar): an order-path harness for a paper account, refused in live mode.

use crate::alpaca::feed::{AlpacaFeed, StreamConfig};
use crate::alpaca::rest::{RestClient, RestConfig};
use crate::alpaca::updates::{TradeUpdates, UpdatesConfig};
use crate::broker::AlpacaBroker;
use crate::config::{Config, Credentials, Mode};
use crate::domain::{Qty, Timeframe};
use crate::engine::{Engine, EngineConfig, EngineRisk, ProcessClock, StrategyMode};
use crate::feed::LiveBars;
use crate::live::engine_core::{CountingFeed, LiveCore, Notifying};
use crate::live::notify::Notifier;
use crate::live::report::Reporter;
use crate::live::{RunnerConfig, ScriptedCore};
use crate::models::Registry;
use crate::oms::{Oms, OmsConfig};
use crate::risk::RiskChecks;
use crate::store::Store;
use anyhow::{Context, bail};
use chrono::Duration;
use rust_decimal::Decimal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Ticks between periodic reconciliations (one tick a second).
const RECONCILE_EVERY_TICKS: u64 = 60;
/// Stored bars per symbol the engine warms up on before trading.
const WARM_UP_BARS: usize = 600;

/// Runs on `rt` until `shutdown` is cancelled (by a signal, the caller, or a fatal feed error).
pub(crate) fn run(config: &Config, rt: &tokio::runtime::Runtime, shutdown: &CancellationToken) -> anyhow::Result<()> {
    let scripted = config.strategy.mode == StrategyMode::Scripted;
    refuse_unsafe(config, scripted)?;
    let creds = Credentials::load()?.context(
        "feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID and APCA_API_SECRET_KEY in the environment",
    )?;
    if !scripted {
        crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    // Status, control, metrics, dashboard and the retrainer run around the engine (not the harness).
    let host = if scripted { None } else { Some(super::start::start_host(config, &store, rt, shutdown)?) };
    // The engine's bars: `market.timeframe` (the scripted harness trades each minute).
    let tf = if scripted { Timeframe::MIN1 } else { config.market.timeframe };
    let cfg = runner_config(config, tf);
    let result = rt.block_on(async {
        let rest =
            RestClient::new(RestConfig::from_config(&config.alpaca, &creds)).context("building the REST client")?;
        crate::alpaca::start::check_account(&rest, config, shutdown).await?;
        let oms_cfg = OmsConfig { lost_after: config.broker.lost_after };
        let oms = Oms::open(&store, Box::new(ProcessClock), oms_cfg).context("opening the order manager")?;
        // Every minute stored; the first backfill starts after the last stored one.
        let (mut bars, resume) = LiveBars::resume(store.clone(), &config.market.symbols, tf, crate::clock::now())
            .context("reading the stored bars to resume from")?;
        // Trading days and session times: where daily bars close, and when stock orders may go out.
        // (The scripted harness trades minute bars with no risk checks: it needs none.)
        let calendar = if scripted {
            crate::calendar::Calendar::shipped()
        } else {
            crate::daemon::calendar_source::load(&rest, &store, crate::clock::now()).await
        };
        if matches!(tf, Timeframe::Days(_)) {
            let today = crate::clock::now().date_naive();
            bars.set_early_closes(calendar.early_closes(today - Duration::days(7), today + Duration::days(366)));
        }
        let mut feed_cfg = StreamConfig::from_config(config, &creds);
        feed_cfg.backfill_from = Some(resume.backfill_from);
        feed_cfg.resume = resume.last_minute;
        let feed = AlpacaFeed::start(feed_cfg, rest.clone());
        let updates = TradeUpdates::start(UpdatesConfig::from_config(config, &creds));
        let broker = AlpacaBroker::new(rest.clone());
        let edges = Edges { rest, bars, feed, updates, broker, cfg };
        if scripted {
            run_scripted(config, oms, host.as_ref().map(|h| h.metrics.clone()), edges, shutdown).await
        } else {
            let Some(host) = host else { bail!("internal: no daemon host for the engine") };
            run_engine(config, &store, oms, calendar, host, edges, shutdown).await
        }
    });
    // Flushed on every way out, an error's included.
    let flushed = store.flush().context("flushing the store");
    result?;
    flushed?;
    log::info!("tradebot run: stopped cleanly");
    Ok(())
}

/// A live account is never traded by the scripted harness nor on a simulated clock.
fn refuse_unsafe(config: &Config, scripted: bool) -> anyhow::Result<()> {
    if config.mode == Mode::Live && scripted {
        bail!(
            "{}: strategy.mode = \"scripted\" is an order-path harness that never trades real money: set a model strategy (ppo, lstm, ensemble) or mode = \"paper\"",
            config.source.display()
        );
    }
    if let Some(sim) = crate::clock::simulated() {
        if config.mode == Mode::Live {
            bail!(
                "{} is set: a simulated clock is for paper trading against `tradebot fake-alpaca --market`; unset it to trade real money",
                crate::clock::ENV
            );
        }
        log::warn!(
            "tradebot run: on a simulated clock ({}={sim}): {} minutes per second from {}",
            crate::clock::ENV,
            sim.speed,
            sim.sim
        );
    }
    Ok(())
}

/// The runner's settings for Alpaca: its request timeout bounds every broker call and the shutdown.
/// `tradebot::run` listens for the signals and cancels `shutdown`: the runner does not listen again.
fn runner_config(config: &Config, tf: Timeframe) -> RunnerConfig {
    RunnerConfig {
        broker_timeout: config.alpaca.request_timeout * 4,
        // An order POST in flight at SIGTERM is awaited (up to broker_timeout) and its answer recorded.
        shutdown_deadline: config.alpaca.request_timeout * 4 + std::time::Duration::from_secs(10),
        handle_signals: false,
        max_order_age: config.risk.max_bar_age,
        bar_length: std::time::Duration::from_secs(tf.seconds().unsigned_abs()),
        ..RunnerConfig::default()
    }
}

/// What the core trades through: Alpaca's REST client, the bar path over its stream, its trade updates
/// and its broker, with the runner's settings.
struct Edges {
    rest: RestClient,
    bars: LiveBars<()>,
    feed: AlpacaFeed,
    updates: TradeUpdates,
    broker: AlpacaBroker,
    cfg: RunnerConfig,
}

/// The scripted harness on the live runner (one unit of each symbol bought on each bar).
async fn run_scripted(
    config: &Config,
    oms: Oms,
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    edges: Edges,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let Edges { bars, feed, updates, broker, cfg, .. } = edges;
    let qty = Qty::new(Decimal::ONE).context("order quantity")?;
    let core = ScriptedCore::new(oms, qty, config.risk.max_order_notional, RECONCILE_EVERY_TICKS);
    log::warn!(
        "tradebot run: strategy.mode = \"scripted\": buying 1 unit of each symbol on each bar (an order-path harness, not a strategy)"
    );
    let metrics = metrics.unwrap_or_else(|| std::sync::Arc::new(crate::metrics::Metrics::new()));
    let core = Notifying::new(core, Reporter::new(metrics, Notifier::from_env()));
    let end =
        crate::live::run(core, bars.over(feed), updates, broker, cfg, shutdown.clone()).await.context("running")?;
    match end.fatal {
        Some(reason) => Err(crate::live::RunError::Fatal(reason).into()),
        None => Ok(()),
    }
}

/// The engine on the live runner, with the host's chores (status, retrains, controls, the dashboard) on a
/// thread beside the trading thread, until the run ends.
async fn run_engine(
    config: &Config,
    store: &Store,
    oms: Oms,
    calendar: crate::calendar::Calendar,
    mut host: super::host::Host<crate::retrain::RetrainPipeline>,
    edges: Edges,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let Edges { rest, bars, feed, updates, broker, cfg } = edges;
    let stocks = config.market.symbols.iter().any(|s| !s.is_crypto());
    host.retrainer.set_calendar(stocks.then(|| calendar.clone()));
    let slot = crate::daemon::calendar_source::CalendarSlot::default();
    let (every, retry) = (crate::daemon::calendar_source::REFRESH_EVERY, crate::daemon::calendar_source::RETRY_EVERY);
    let periods = (crate::clock::wall_span(every), crate::clock::wall_span(retry));
    let refresh = crate::daemon::calendar_source::refresh_daily(
        rest.clone(),
        store.clone(),
        calendar.clone(),
        slot.clone(),
        periods,
        shutdown.clone(),
    );
    tokio::spawn(refresh);
    let engine = engine(config, store, &host.registry, &rest, oms, calendar).await?;
    let metrics = host.metrics.clone();
    let feed = bars.over(CountingFeed::new(feed, metrics.clone()));
    let (inbox_tx, inbox) = mpsc::channel(256);
    let core = LiveCore::new(engine, Reporter::new(metrics, Notifier::from_env()), inbox);
    // Status, retrains, controls and the dashboard beside the trading thread, until the run ends.
    let chores_stop = shutdown.child_token();
    let views = core.views();
    let chores =
        super::chores::spawn(host, views, super::chores::Inbox(inbox_tx), slot, store.clone(), chores_stop.clone())
            .context("starting the daemon's chores thread")?;
    let end = crate::live::run(core, feed, updates, broker, cfg, shutdown.clone()).await;
    chores_stop.cancel();
    // The host (its retrainer stops a running child when dropped) comes back when the thread ends.
    if tokio::task::spawn_blocking(move || chores.join()).await.map_or(true, |r| r.is_err()) {
        log::error!("tradebot run: the chores thread panicked");
    }
    let end = end.context("running")?;
    if config.broker.cancel_on_shutdown {
        cancel_open_orders(&rest, end.core.engine(), cfg.broker_timeout).await;
    }
    match end.fatal {
        // Exit EX_FATAL (75): systemd restarts the daemon, which reconnects and reconciles.
        Some(reason) => Err(crate::live::RunError::Fatal(reason).into()),
        None => Ok(()),
    }
}

/// The engine for the live runner: champions, risk checks with Alpaca's asset rules, warm-up on stored bars.
async fn engine(
    config: &Config,
    store: &Store,
    registry: &Registry,
    rest: &RestClient,
    oms: Oms,
    calendar: crate::calendar::Calendar,
) -> anyhow::Result<Engine> {
    let (policy, probs) = crate::daemon::models::load_models(config, registry)?;
    let assets = crate::broker::alpaca::asset_rules(rest, &config.market.symbols).await;
    let mut checks = RiskChecks::open(&config.risk, &config.env.exec, store).context("opening the risk checks")?;
    checks.set_calendar(calendar);
    let cfg = EngineConfig::from_config(config, config.strategy.mode, RECONCILE_EVERY_TICKS);
    let tf = config.market.timeframe;
    let mut engine = Engine::new(cfg, store, oms, (policy, probs), Box::new(ProcessClock))
        .context("building the engine")?
        .with_risk(EngineRisk { checks, timeframe: tf, assets })
        .with_gap_guard()
        .with_audit()
        .with_max_stale_bars(config.market.max_stale_bars);
    let warmed = engine.warm_up_on_store(store, tf, WARM_UP_BARS).context("reading the stored bars to warm up on")?;
    log::info!("engine: warmed up on {warmed} stored bars");
    Ok(engine)
}

/// `broker.cancel_on_shutdown`: asks the broker to cancel every order the OMS still holds open, each
/// within `timeout`; failures are logged (the next start's reconciliation sees what the broker did).
async fn cancel_open_orders(rest: &RestClient, engine: &Engine, timeout: std::time::Duration) {
    let oms = engine.oms();
    let mut broker = AlpacaBroker::new(rest.clone());
    // Ours only: an order placed by hand (adopted at reconciliation) is the user's to cancel.
    let open: Vec<_> = oms.open_orders().filter(|o| !o.adopted).map(|o| o.client_order_id.clone()).collect();
    for id in open {
        match tokio::time::timeout(timeout, crate::broker::Broker::cancel(&mut broker, &id)).await {
            Ok(Ok(())) => log::info!("shutdown: cancel of {id} sent (broker.cancel_on_shutdown)"),
            Ok(Err(e)) => log::warn!("shutdown: cannot cancel {id}: {e}"),
            Err(_) => log::warn!("shutdown: cancel of {id} timed out after {timeout:?}"),
        }
    }
}

//! `tradebot run` with `feed.kind = "alpaca"` and `broker.kind = "alpaca"`: the live runner against
//! Alpaca (or anything speaking its protocol at the configured URLs, such as `tradebot fake-alpaca`).
//!
//! It logs the account it will trade first (id, status, cash, equity), then drives the `Engine` with the
//! configured strategy and the registry's champions (seeded from the shipped `models/`), the full risk
//! checks on the wall clock with Alpaca's asset rules, and the OMS on the store. Before the first
//! reconciliation the engine is warmed up on the stored bars (features and LSTM windows; no decision).
//! sd_notify: `READY=1` after the first reconciliation, `WATCHDOG=1` as events are processed.
//!
//! `strategy.mode = "scripted"` drives `live::ScriptedCore` instead (it buys one unit of each symbol on
//! each bar): an order-path harness for a paper account, refused in live mode.

use crate::alpaca::feed::{AlpacaFeed, FeedConfig};
use crate::alpaca::rest::{GetAccount, GetAsset, RestClient, RestConfig};
use crate::alpaca::updates::{TradeUpdates, UpdatesConfig};
use crate::broker::AlpacaBroker;
use crate::config::{Config, Credentials, Mode};
use crate::daemon::notify::Notifier;
use crate::domain::Qty;
use crate::engine::{Command, Engine, EngineConfig, EngineRisk, Event, StrategyMode, SystemClock};
use crate::live::{Core, RunnerConfig, ScriptedCore};
use crate::models::Registry;
use crate::oms::{Oms, OmsConfig};
use crate::risk::{AssetRules, RiskChecks};
use crate::store::Store;
use anyhow::{Context, anyhow, bail};
use chrono::Duration;
use rust_decimal::Decimal;
use std::collections::HashMap;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Ticks between periodic reconciliations (one tick a second).
const RECONCILE_EVERY_TICKS: u64 = 60;
/// Stored bars per symbol the engine warms up on before trading.
const WARM_UP_BARS: i64 = 600;

pub fn run(config: &Config) -> anyhow::Result<ExitCode> {
    let scripted = config.strategy.mode == StrategyMode::Scripted;
    if config.mode == Mode::Live && scripted {
        bail!(
            "{}: strategy.mode = \"scripted\" is an order-path harness that never trades real money: set a model strategy (ppo, lstm, ensemble) or mode = \"paper\"",
            config.source.display()
        );
    }
    let creds = Credentials::load().map_err(|e| anyhow!(e))?.context(
        "feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID and APCA_API_SECRET_KEY in the environment",
    )?;
    if !scripted {
        crate::native::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cfg = RunnerConfig { broker_timeout: config.alpaca.request_timeout * 4, ..RunnerConfig::default() };
    rt.block_on(async {
        let rest = RestClient::new(RestConfig::from_config(&config.alpaca, &creds)).context("building the REST client")?;
        let account = rest
            .issue::<GetAccount>(&())
            .await
            .context("reading the Alpaca account: check the API keys and alpaca.trading_url")?;
        log::warn!(
            "tradebot run: trading the Alpaca {} account {} at {} (status {}, cash {}, equity {})",
            if config.mode == Mode::Live { "LIVE (real money)" } else { "paper" },
            account.id,
            config.alpaca.trading_url,
            account.status,
            account.cash,
            account.equity
        );
        if account.blocked {
            bail!("Alpaca account {} is blocked for trading (status {}): see Alpaca's dashboard", account.id, account.status);
        }
        let oms = Oms::open(&store, Box::new(SystemClock), OmsConfig::default()).context("opening the order manager")?;
        let feed = AlpacaFeed::start(FeedConfig::from_config(config, &creds), rest.clone());
        let updates = TradeUpdates::start(UpdatesConfig::from_config(config, &creds));
        let broker = AlpacaBroker::new(rest.clone());
        let notifier = Notifier::from_env();
        if scripted {
            let qty = Qty::new(Decimal::ONE).context("order quantity")?;
            let core = ScriptedCore::new(oms, qty, config.risk.max_order_notional, RECONCILE_EVERY_TICKS);
            log::warn!("tradebot run: strategy.mode = \"scripted\": buying 1 unit of each symbol on each bar (an order-path harness, not a strategy)");
            let core = Notifying { core, notifier, ready: false };
            crate::live::run(core, feed, updates, broker, cfg, CancellationToken::new()).await.context("running")?;
        } else {
            let engine = engine(config, &store, &rest, oms).await?;
            let core = Notifying { core: engine, notifier, ready: false };
            crate::live::run(core, feed, updates, broker, cfg, CancellationToken::new()).await.context("running")?;
        }
        anyhow::Ok(())
    })?;
    store.flush().context("flushing the store")?;
    log::info!("tradebot run: stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

/// The engine for the live runner: champions, risk checks with Alpaca's asset rules, warm-up on stored bars.
async fn engine(config: &Config, store: &Store, rest: &RestClient, oms: Oms) -> anyhow::Result<Engine> {
    let registry = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    super::run::seed_shipped(&registry)?;
    let (policy, probs) = crate::daemon::replay::load_models(config, &registry)?;
    let mut assets = HashMap::new();
    for s in &config.market.symbols {
        match rest.issue::<GetAsset>(s).await {
            Ok(a) => {
                assets.insert(s.clone(), AssetRules::from_asset(&a));
            }
            Err(e) => log::warn!("risk: no asset record for {s} ({e}); assuming tradable, whole units, no minimum"),
        }
    }
    let checks = RiskChecks::open(&config.risk, &config.env.exec, store).context("opening the risk checks")?;
    let cfg = EngineConfig {
        strategy: config.strategy.clone(),
        symbols: config.market.symbols.clone(),
        features: config.features.clone(),
        initial_cash: config.env.initial_cash,
        exec: config.env.exec,
        max_order_notional: config.risk.max_order_notional,
        reconcile_every: RECONCILE_EVERY_TICKS,
    };
    let tf = config.market.timeframe;
    let mut engine = Engine::new(cfg, store, oms, policy, probs)
        .context("building the engine")?
        .with_risk(EngineRisk { checks, clock: Box::new(SystemClock), timeframe: tf, assets });
    // The last WARM_UP_BARS stored bars of each symbol (read from twice that span before its last bar).
    let mut warm = Vec::new();
    for s in &config.market.symbols {
        let Some(last) = store.last_bar_time(s, tf)? else {
            log::warn!("engine: no stored {tf} bars of {s} to warm up on; trading starts once the features fill");
            continue;
        };
        let from = last - Duration::seconds(tf.seconds().saturating_mul(WARM_UP_BARS * 2));
        let bars = store.bars(s, tf, from, last)?;
        let n = bars.len();
        warm.extend(bars.into_iter().skip(n.saturating_sub(WARM_UP_BARS as usize)));
    }
    warm.sort_by_key(|b| b.t);
    for b in &warm {
        engine.warm_up(b);
    }
    log::info!("engine: warmed up on {} stored bars", warm.len());
    Ok(engine)
}

/// A core that tells systemd it is ready after its first reconciliation and pings the watchdog as it
/// works.
struct Notifying<C: Core> {
    core: C,
    notifier: Notifier,
    ready: bool,
}

impl<C: Core> Core for Notifying<C> {
    fn process(&mut self, ev: Event) -> Vec<Command> {
        let reconciled = matches!(ev, Event::Reconciled(_));
        let out = self.core.process(ev);
        if reconciled && !self.ready {
            self.ready = true;
            self.notifier.ready("reconciled with the broker; trading");
        }
        self.notifier.watchdog();
        out
    }
}

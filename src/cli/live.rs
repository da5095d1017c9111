//! `tradebot run` with `feed.kind = "alpaca"` and `broker.kind = "alpaca"`: the live runner against
//! Alpaca (or anything speaking its protocol at the configured URLs, such as `tradebot fake-alpaca`).
//!
//! Until the engine lands, the runner drives `live::ScriptedCore`, which buys one unit of each symbol on
//! each bar: a harness for the order path (and the crash test), not a strategy. It is refused in live
//! mode and announced with a warning in paper mode.

use crate::alpaca::feed::{AlpacaFeed, FeedConfig};
use crate::alpaca::rest::{RestClient, RestConfig};
use crate::alpaca::updates::{TradeUpdates, UpdatesConfig};
use crate::broker::AlpacaBroker;
use crate::config::{Config, Credentials, Mode};
use crate::domain::Qty;
use crate::engine::SystemClock;
use crate::live::{RunnerConfig, ScriptedCore};
use crate::oms::{Oms, OmsConfig};
use crate::store::Store;
use anyhow::{Context, anyhow, bail};
use rust_decimal::Decimal;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Ticks between the scripted core's periodic reconciliations (one tick a second).
const RECONCILE_EVERY_TICKS: u64 = 60;

pub fn run(config: &Config) -> anyhow::Result<ExitCode> {
    if config.mode == Mode::Live {
        bail!(
            "{}: the trading engine is not in this version; the scripted order-path harness never trades real money: set mode = \"paper\"",
            config.source.display()
        );
    }
    let creds = Credentials::load().map_err(|e| anyhow!(e))?.context(
        "feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID and APCA_API_SECRET_KEY in the environment",
    )?;
    let store = Store::open(&config.state_dir).context("opening the store")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let core = rt.block_on(async {
        let rest = RestClient::new(RestConfig::from_config(&config.alpaca, &creds)).context("building the REST client")?;
        let feed = AlpacaFeed::start(FeedConfig::from_config(config, &creds), rest.clone());
        let updates = TradeUpdates::start(UpdatesConfig::from_config(config, &creds));
        let oms = Oms::open(&store, Box::new(SystemClock), OmsConfig::default()).context("opening the order manager")?;
        let qty = Qty::new(Decimal::ONE).context("order quantity")?;
        let core = ScriptedCore::new(oms, qty, config.risk.max_order_notional, RECONCILE_EVERY_TICKS);
        log::warn!(
            "tradebot run: the trading engine is not wired in yet; the scripted order-path harness buys 1 unit of each symbol on each bar (not a strategy)"
        );
        let cfg = RunnerConfig { broker_timeout: config.alpaca.request_timeout * 4, ..RunnerConfig::default() };
        crate::live::run(core, feed, updates, AlpacaBroker::new(rest), cfg, CancellationToken::new())
            .await
            .context("running")
    })?;
    drop(core);
    store.flush().context("flushing the store")?;
    log::info!("tradebot run: stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

//! The daemon: `tradebot::run` (`run`) builds the runtime, owns shutdown and the signals, and starts what
//! runs around the engine (`host`: registry, control socket, `/metrics`, dashboard, retrainer, status);
//! then a driver moves bars from the feed to the engine and orders from the engine to the broker:
//! `replay` (stored bars, the SimBroker, simulated time, through the one run loop `live::drive::run` with
//! `replay_hooks`) or `live` (Alpaca's feed and broker through the live runner, `live_core` the cores on
//! its trading thread; `report` carries metrics and systemd for both; `bars` stores every minute and hands the engine closed bars of `market.timeframe`;
//! `calendar` reads the exchange calendar; `models` loads the champions and new ones; live, `chores` runs
//! the host on a thread of its own beside the trading thread). Also systemd notifications (`notify`), scheduled retraining in the background (`retrainer`),
//! and the status (`status`: the report and the dashboard, the book, the alerts the host watches for, and
//! the status as the state directory tells it without a daemon).

pub mod bars;
pub mod calendar;
pub mod chores;
pub mod host;
pub mod link;
pub mod live;
mod live_core;
pub mod models;
pub mod notify;
pub mod replay;
mod replay_hooks;
pub mod report;
pub mod requests;
pub mod retrainer;
pub mod run;
pub mod start;
pub mod status;

pub use run::{EX_CANTCREAT, Outcome, RunOptions, StateDirError, check_live_gate, run};

/// A host for unit tests: the config's registry and store, retrains off, no web, no systemd.
#[cfg(test)]
pub(crate) fn test_host(
    config: &crate::config::Config,
    rt: &tokio::runtime::Runtime,
    calls: Option<tokio::sync::mpsc::Receiver<crate::control::server::Call>>,
) -> host::Host<crate::retrain::RetrainPipeline> {
    let store = crate::store::Store::open(&config.state_dir).unwrap();
    let registry = crate::models::Registry::open(&config.state_dir.join("models")).unwrap();
    let spec = crate::retrain::PipelineSpec::from_config(config).unwrap();
    let evaluator = crate::retrain::holdout::holdout_evaluator(config, &store);
    let pipeline = crate::retrain::RetrainPipeline::new(spec, store.clone(), evaluator);
    let retrainer = retrainer::Retrainer::new(pipeline, config.retrain.schedule.clone(), false, rt.handle().clone());
    host::Host::new(host::HostParts {
        config: config.clone(),
        store,
        registry,
        metrics: std::sync::Arc::new(crate::metrics::Metrics::new()),
        dashboard: std::sync::Arc::default(),
        retrainer,
        progress: None,
        calls,
        notifier: notify::Notifier::disabled(),
    })
}

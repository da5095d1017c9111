//! The daemon: `tradebot::run` (`run`) checks the live/paper gate and hands over to a driver; `start` (the
//! start-up both drivers share) builds the runtime, listens for the signals (shutdown has one owner, the
//! caller's token) and wires the host (`host`: registry, control socket, `/metrics`, dashboard, retrainer,
//! alerts; it reaches the engine through `link`, and `requests` serves the control requests that change or
//! copy the store); then a driver moves bars from the feed to the engine and orders from the engine to the
//! broker: `replay_driver` (stored bars, the SimBroker, simulated time, through the one run loop
//! `engine::drive::run` with `replay_hooks`) or `live_driver` (Alpaca's feed, `feed::LiveBars` and the broker
//! through the live runner, with `live::engine_core`'s cores on its trading thread; `live::report` carries
//! metrics and systemd for both; `calendar_source` reads the exchange calendar; `models` loads the champions and
//! new ones; live, `chores` runs the host on a thread of its own beside the trading thread). Also the last
//! alert of a failing run (`fatal`), scheduled retraining in the background (`retrainer`), and the status
//! (the `status/` folder: the report and the dashboard's data in `status::publish`, the book in
//! `status::book`, the alerts the host watches for in `status::watch`, and the status as the state
//! directory tells it without a daemon in `status::offline`).

pub(crate) mod calendar_source;
pub(crate) mod chores;
mod fatal;
pub(crate) mod host;
pub(crate) mod link;
pub(crate) mod live_driver;
pub(crate) mod models;
pub(crate) mod replay_driver;
mod replay_hooks;
pub(crate) mod requests;
pub(crate) mod retrainer;
pub mod run;
pub(crate) mod start;
pub(crate) mod status;

pub use run::StateDirError;
pub use run::{EX_CANTCREAT, RunEnd, RunOptions, run};

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
        notifier: crate::live::notify::Notifier::disabled(),
    })
}

//! The daemon's start-up, shared by both drivers: the async runtime, the signals (the one place that
//! listens: SIGTERM and SIGINT cancel the caller's `shutdown` token, SIGHUP asks the host to reload), and
//! the host's wiring (the model registry seeded with the shipped models, the control socket, `/metrics`,
//! the dashboard, the retrainer and the alerts). `daemon::run` and the drivers (`daemon::replay_driver`,
//! `daemon::live_driver`) use it; it uses neither.

use super::host::{Host, HostParts};
use super::retrainer::Retrainer;
use crate::config::{Config, ConfigError, FeedKind, Mode};
use crate::live::notify::Notifier;
use crate::metrics::Metrics;
use crate::models::Registry;
use crate::retrain::holdout::holdout_evaluator;
use crate::retrain::{PipelineSpec, RetrainPipeline};
use crate::store::Store;
use crate::web::data::SharedData;
use crate::web::{WebState, resolve_token};
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A problem of the configuration (exit 78), naming the file like the config's own.
pub(super) fn problem(config: &Config, text: &str) -> ConfigError {
    ConfigError { file: config.source.clone(), problems: vec![text.to_string()] }
}

/// "replay", "live" or "paper": how alerts name the run.
pub(super) fn mode_name(config: &Config) -> &'static str {
    match (config.feed.kind, config.mode) {
        (FeedKind::Replay, _) => "replay",
        (_, Mode::Live) => "live",
        _ => "paper",
    }
}

/// The daemon's async runtime: two worker threads, timers and I/O.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// What every daemon runs around its engine: the registry (seeded with the shipped models), `/metrics` and
/// the dashboard (`[web]`), the control socket, and the retrainer with its pipeline; all stop with
/// `shutdown`.
pub(crate) fn start_host(
    config: &Config,
    store: &Store,
    rt: &tokio::runtime::Runtime,
    shutdown: &CancellationToken,
) -> anyhow::Result<Host<RetrainPipeline>> {
    // The alert targets first: a [notify] mistake is a config error (exit 78) before anything is bound.
    let targets = crate::alerts::targets(&config.notify, |k| std::env::var(k).ok())
        .map_err(|e| problem(config, &format!("[notify]: {e}")))?;
    let registry = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    seed_shipped(&registry, config)?;
    let metrics = Arc::new(Metrics::new());
    let dashboard = Arc::new(SharedData::default());
    // The control socket's requests and the dashboard's controls reach the host on one channel.
    let (calls_tx, calls_rx) = mpsc::channel(16);
    // The Telegram bot's commands reach the host on it too.
    crate::telegram::start(
        &config.notify,
        &targets,
        calls_tx.clone(),
        dashboard.clone(),
        rt.handle(),
        shutdown.clone(),
    )
    .map_err(|e| problem(config, &e.to_string()))?;
    if config.web.enabled {
        let token = resolve_token(&config.web, &config.state_dir, |k| std::env::var(k).ok())
            .map_err(|e| problem(config, &e.to_string()))?;
        let listener = rt.block_on(crate::web::bind(&config.web))?;
        let loopback = config.web.listen.ip().is_loopback();
        if let Some(w) = config.web.remote_warning() {
            log::warn!("{w}");
        }
        let state = WebState::new(metrics.clone(), dashboard.clone(), token, loopback)
            .with_control(calls_tx.clone())
            .with_reports(config.clone());
        let limits = crate::web::listen::Limits::from_config(&config.web);
        rt.spawn(crate::web::serve(listener, state, limits, shutdown.clone()));
    }
    let socket = crate::control::socket_path(&config.state_dir);
    let listener = rt
        .block_on(async { crate::control::server::bind(&socket) })
        .with_context(|| format!("binding the control socket {}", socket.display()))?;
    rt.spawn(crate::control::server::serve(listener, calls_tx, shutdown.clone().cancelled_owned()));
    let spec = PipelineSpec::from_config(config).context("locating the tradebot binary and the config file")?;
    let pipeline = RetrainPipeline::new(spec, store.clone(), holdout_evaluator(config, store));
    let (progress_tx, progress_rx) = mpsc::unbounded_channel();
    let retrainer =
        Retrainer::new(pipeline, config.retrain.schedule.clone(), config.retrain.enabled, rt.handle().clone())
            .with_progress(progress_tx);
    let host = Host::new(HostParts {
        config: config.clone(),
        store: store.clone(),
        registry,
        metrics,
        dashboard,
        retrainer,
        progress: Some(progress_rx),
        calls: Some(calls_rx),
        notifier: Notifier::from_env(),
    });
    let host = host.with_alerts(crate::alerts::Alerts::start(targets, &config.notify, mode_name(config), rt.handle()));
    rt.spawn(on_hangup(host.hangup.clone(), shutdown.clone()));
    Ok(host)
}

/// SIGHUP: asks the host to reload what it safely can at its next turn.
async fn on_hangup(flag: Arc<std::sync::atomic::AtomicBool>, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        log::error!("cannot listen for SIGHUP: reloading needs a restart");
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {
                log::info!("SIGHUP: reloading the configuration");
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Imports the shipped models that the registry lacks, and makes a champion for each kind without one.
/// They are looked for in `$TRADEBOT_MODELS_DIR`, then `./models` (a checkout), then
/// `<prefix>/share/tradebot/models` next to the binary (`make install`).
pub(crate) fn seed_shipped(registry: &Registry, config: &Config) -> anyhow::Result<()> {
    let installed = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(|bin| bin.parent()).map(|p| p.join("share/tradebot/models")));
    let same = |a: &std::path::Path, b: &std::path::Path| matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y);
    let candidates: Vec<PathBuf> = match std::env::var_os("TRADEBOT_MODELS_DIR") {
        Some(d) => vec![PathBuf::from(d)],
        None => std::iter::once(PathBuf::from("models")).chain(installed).collect(),
    };
    // The registry itself may be `./models` (a state directory used as the working directory).
    let Some(shipped) = candidates.into_iter().find(|d| d.is_dir() && !same(d, registry.root())) else {
        log::info!(
            "no shipped models directory found ($TRADEBOT_MODELS_DIR, ./models, <prefix>/share/tradebot/models)"
        );
        return Ok(());
    };
    let seeded = registry.seed_fitting(&shipped, &|m| fits(m, config)).context("importing the shipped models")?;
    for e in &seeded.refused {
        log::warn!("shipped model refused: {e}");
    }
    for (id, why) in &seeded.not_applicable {
        log::warn!(
            "shipped model {id} not made champion: {why}; train one for this config with `tradebot retrain --config {}`",
            config.source.display()
        );
    }
    if !seeded.imported.is_empty() {
        log::info!("imported shipped models {} from {}", seeded.imported.join(", "), shipped.display());
    }
    Ok(())
}

/// Whether a model was trained for this configuration: the manifest check the engine applies at load
/// (features, symbols, timeframe), without the input shapes, which follow from those.
pub(crate) fn fits(m: &crate::models::Manifest, config: &Config) -> Result<(), crate::models::Misfit> {
    use crate::models::Misfit;
    let features =
        crate::models::FeatureRef { version: crate::features::FEATURE_VERSION, names: config.features.names() };
    m.check_inputs(&features, &[], &config.market.symbols, config.market.timeframe)
        .map_err(|e| Misfit(e.to_string()))?;
    if m.kind == crate::models::ModelKind::Ppo {
        crate::policy::check_action_space(m, &config.env.action).map_err(|e| Misfit(format!("model {}: {e}", m.id)))?;
    }
    Ok(())
}

/// SIGTERM or SIGINT: graceful shutdown (the replay loop stops between two bars and flushes).
pub(super) async fn on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        log::error!("cannot listen for SIGTERM/SIGINT; stop the daemon with the control socket or SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => log::info!("SIGTERM: shutting down"),
        _ = int.recv() => log::info!("SIGINT: shutting down"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

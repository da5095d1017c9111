//! `tradebot::run`, the daemon's entry. It checks the live/paper gate, builds the async runtime, listens
//! for signals (the one place that does: SIGTERM and SIGINT cancel the caller's `shutdown` token, SIGHUP
//! asks the host to reload), opens the store (importing `feed.file` when the store lacks its bars), seeds
//! the model registry with the shipped models, and starts the control socket, `/metrics` and the
//! dashboard. With `feed.kind = "replay"` and `broker.kind = "sim"` it runs the replay driver
//! (`daemon::replay`: engine, SimBroker, scheduled retrains in simulated time) and returns its summary;
//! with the Alpaca feed and broker it hands over to the live driver (`daemon::live`).
//!
//! Shutdown has one owner, the `shutdown` token the caller passes in: signals, the control socket and the
//! end of a replay all end in it, and every task and driver stops on it.

use super::host::Host;
use super::notify::Notifier;
use super::replay::{self, ReplayParts, ReplaySummary};
use super::retrainer::Retrainer;
use crate::config::{BrokerKind, Config, ConfigError, FeedKind, Mode};
use crate::data::ensure_bars;
use crate::metrics::Metrics;
use crate::models::Registry;
use crate::out::outln;
use crate::retrain::holdout::holdout_evaluator;
use crate::retrain::{PipelineSpec, RetrainPipeline};
use crate::store::Store;
use crate::web::data::SharedData;
use crate::web::{WebState, resolve_token};
use anyhow::Context;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the command line adds to the config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// `--live`: confirms live trading with real money (`mode = "live"` needs it; paper refuses it).
    pub live: bool,
    /// `--linger`: after a replay ends, keep serving status, `/metrics` and the dashboard until shutdown.
    pub linger: bool,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A replay: the account against buy-and-hold, and every retrain.
    Replay(Box<ReplaySummary>),
    /// The live driver stopped cleanly.
    Live,
}

/// The live gate: both the config and the command line must say live, or neither.
pub fn check_live_gate(config: &Config, live_flag: bool) -> Result<(), ConfigError> {
    let problem = match (config.mode, live_flag) {
        (Mode::Live, false) => {
            "mode = \"live\" trades real money: add --live to the command line to confirm, or set mode = \"paper\""
        }
        (Mode::Paper, true) => {
            "--live was given but mode = \"paper\": set mode = \"live\" (see config/alpaca-live.toml.example) or drop --live"
        }
        _ => return Ok(()),
    };
    Err(ConfigError { file: config.source.clone(), problems: vec![problem.to_string()] })
}

/// `EX_CANTCREAT` from sysexits.h: the state directory cannot be created or written (the unit does not
/// restart into it: a person must fix the directory).
pub const EX_CANTCREAT: u8 = 73;

/// The state directory cannot be created or written.
#[derive(Debug, thiserror::Error)]
#[error(
    "{file}: state_dir = {dir:?} cannot be used: {reason}. Fix: point state_dir at a directory this user can \
     write, or create it (`install -d -o $(id -un) {dir}`); under systemd, StateDirectory=tradebot makes \
     /var/lib/tradebot"
)]
pub struct StateDirError {
    pub file: String,
    pub dir: String,
    pub reason: String,
}

/// Runs the daemon until the data ends (a replay) or `shutdown` is cancelled (by the caller or a signal).
/// A run that fails sends an alert to the `[notify]` targets first (`notify::alert_fatal`, at most 5 s).
pub fn run(config: &Config, opts: RunOptions, shutdown: CancellationToken) -> anyhow::Result<Outcome> {
    let result = run_until_stopped(config, opts, shutdown);
    if let Err(e) = &result {
        super::notify::alert_fatal(config, mode_name(config), e);
    }
    result
}

fn run_until_stopped(config: &Config, opts: RunOptions, shutdown: CancellationToken) -> anyhow::Result<Outcome> {
    check_live_gate(config, opts.live)?;
    raise_open_files_limit();
    let live = config.feed.kind == FeedKind::Alpaca && config.broker.kind == BrokerKind::Alpaca;
    if !live && (config.feed.kind == FeedKind::Alpaca || config.broker.kind == BrokerKind::Alpaca) {
        return Err(problem(
            config,
            "feed.kind and broker.kind must both be \"alpaca\" (the live runner) or both \"replay\"/\"sim\" in this version",
        )
        .into());
    }
    // Keys that are missing are a configuration to fix, as keys Alpaca refuses are: exit 78, not restarts.
    if live {
        match crate::config::Credentials::load() {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(problem(
                    config,
                    "feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID and APCA_API_SECRET_KEY in the environment or as systemd credentials (LoadCredential=)",
                )
                .into());
            }
            Err(e) => return Err(problem(config, &e).into()),
        }
    }
    usable_state_dir(&config.state_dir).map_err(|(reason, e)| -> anyhow::Error {
        // A full disk is the disk's (exit 74), not the directory's.
        if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
            let dir = config.state_dir.clone();
            return crate::store::StoreError::DiskFull { dir, free: "none".into(), detail: reason }.into();
        }
        StateDirError { file: config.source.display().to_string(), dir: config.state_dir.display().to_string(), reason }
            .into()
    })?;
    let rt = runtime()?;
    rt.spawn(on_signal(shutdown.clone()));
    let result = if live {
        super::live::run(config, &rt, &shutdown).map(|()| Outcome::Live)
    } else {
        run_replay(config, &rt, &shutdown, opts.linger).map(|s| Outcome::Replay(Box::new(s)))
    };
    shutdown.cancel();
    rt.shutdown_timeout(std::time::Duration::from_secs(10));
    let _ = std::fs::remove_file(crate::control::socket_path(&config.state_dir));
    result
}

fn run_replay(
    config: &Config,
    rt: &tokio::runtime::Runtime,
    shutdown: &CancellationToken,
    linger: bool,
) -> anyhow::Result<ReplaySummary> {
    crate::native::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let store = Store::open(&config.state_dir).context("opening the store")?;
    ensure_bars(config, &store)?;
    let host = start_host(config, &store, rt, shutdown)?;
    outln!(
        "tradebot {} — {:?} mode, replay of {} bars",
        env!("CARGO_PKG_VERSION"),
        config.mode,
        config.market.timeframe
    )?;
    replay::run(ReplayParts { host, shutdown: shutdown.clone(), linger })
}

/// A problem of the configuration (exit 78), naming the file like the config's own.
fn problem(config: &Config, text: &str) -> ConfigError {
    ConfigError { file: config.source.clone(), problems: vec![text.to_string()] }
}

/// Creates `dir` when missing and writes a file in it: a state directory the daemon cannot use is one
/// clear error at start, not a failure somewhere in the store.
fn usable_state_dir(dir: &std::path::Path) -> Result<(), (String, std::io::Error)> {
    std::fs::create_dir_all(dir).map_err(|e| (format!("cannot create it ({e})"), e))?;
    let probe = dir.join(format!(".tradebot-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| (format!("cannot write in it ({e})"), e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The soft limit on open files raised to the hard one (systemd's `LimitNOFILE=`): the dashboard's
/// connections, the store and the model files share it. Said once when it changes.
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    // An unlimited hard limit is more than the kernel allows (fs.nr_open, 1048576 by default).
    let target = hard.min(1 << 20);
    if soft >= target {
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        Ok(()) => log::info!("open files: limit raised from {soft} to {target} (the hard limit)"),
        Err(e) => log::warn!("open files: cannot raise the limit from {soft} to {target}: {e}"),
    }
}

/// "replay", "live" or "paper": how alerts name the run.
fn mode_name(config: &Config) -> &'static str {
    match (config.feed.kind, config.mode) {
        (FeedKind::Replay, _) => "replay",
        (_, Mode::Live) => "live",
        _ => "paper",
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// What every daemon runs around its engine: the registry (seeded with the shipped models), `/metrics` and
/// the dashboard (`[web]`), the control socket, and the retrainer with its pipeline; all stop with
/// `shutdown`.
pub fn start_host(
    config: &Config,
    store: &Store,
    rt: &tokio::runtime::Runtime,
    shutdown: &CancellationToken,
) -> anyhow::Result<Host<RetrainPipeline>> {
    let registry = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    seed_shipped(&registry, config)?;
    let metrics = Arc::new(Metrics::new());
    let dashboard = Arc::new(SharedData::default());
    // The control socket's requests and the dashboard's controls reach the host on one channel.
    let (calls_tx, calls_rx) = mpsc::channel(16);
    if config.web.enabled {
        let token = resolve_token(&config.web, &config.state_dir, |k| std::env::var(k).ok())
            .map_err(|e| problem(config, &e.to_string()))?;
        let listener = rt.block_on(crate::web::bind(&config.web))?;
        let loopback = config.web.listen.ip().is_loopback();
        if let Some(w) = config.web.remote_warning() {
            log::warn!("{w}");
        }
        let state = WebState::new(metrics.clone(), dashboard.clone(), token, loopback).with_control(calls_tx.clone());
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
    let host = Host::new(
        config.clone(),
        store.clone(),
        registry,
        metrics,
        dashboard,
        retrainer,
        Some(progress_rx),
        Some(calls_rx),
        Notifier::from_env(),
    );
    let targets = crate::alerts::targets(&config.notify, |k| std::env::var(k).ok())
        .map_err(|e| problem(config, &format!("[notify]: {e}")))?;
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
pub fn seed_shipped(registry: &Registry, config: &Config) -> anyhow::Result<()> {
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
pub fn fits(m: &crate::models::Manifest, config: &Config) -> Result<(), String> {
    let features =
        crate::models::FeatureRef { version: crate::features::FEATURE_VERSION, names: config.features.names() };
    m.check_inputs(&features, &[], &config.market.symbols, config.market.timeframe).map_err(|e| e.to_string())
}

/// SIGTERM or SIGINT: graceful shutdown (the replay loop stops between two bars and flushes).
async fn on_signal(shutdown: CancellationToken) {
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

/// The summary `tradebot run` prints at the end of a replay.
impl fmt::Display for ReplaySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self;
        let day = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
        writeln!(
            f,
            "replay {}: {} bars, {} to {}",
            if s.interrupted { "stopped early" } else { "finished" },
            s.bars,
            day(s.from),
            day(s.to)
        )?;
        if s.traded_from.is_some_and(|t| s.from.is_some_and(|f| t > f)) {
            writeln!(
                f,
                "traded from {}: fewer stored bars before the window than the feature warm-up",
                day(s.traded_from)
            )?;
        }
        writeln!(f, "{:<14} {:>12} {:>12} {:>12}", "", "tradebot", "buy&hold", "cash")?;
        type Row = (&'static str, fn(&crate::backtest::Metrics) -> String);
        let rows: [Row; 5] = [
            ("total return", |m| format!("{:.2}%", m.total_return * 100.0)),
            ("Sharpe", |m| format!("{:.3}", m.sharpe)),
            ("max drawdown", |m| format!("{:.2}%", m.max_drawdown * 100.0)),
            ("trades", |m| m.trades.to_string()),
            ("fees", |m| format!("{:.2}", m.fees)),
        ];
        let cash = crate::backtest::Metrics::default();
        for (label, g) in rows {
            writeln!(f, "{label:<14} {:>12} {:>12} {:>12}", g(&s.strategy), g(&s.buy_hold), g(&cash))?;
        }
        writeln!(
            f,
            "models at the end: ppo {}, lstm {}",
            s.ppo.as_deref().unwrap_or("-"),
            s.lstm.as_deref().unwrap_or("-")
        )?;
        writeln!(f, "bars without a decision after warm-up: {}", s.missed_decisions)?;
        if let Some((at, why)) = &s.kill_switch {
            writeln!(f, "kill switch: TRIPPED at {}: {why}", at.date_naive())?;
        }
        if s.retrains.is_empty() {
            writeln!(f, "retrains: none (the schedule did not fire in the replay window)")?;
        } else {
            writeln!(f, "retrains: {}", s.retrains.len())?;
            for r in &s.retrains {
                writeln!(
                    f,
                    "  {} at simulated {}: {} — {}",
                    r.kind.as_str(),
                    r.clock_time.date_naive(),
                    r.outcome.as_str(),
                    r.reason()
                )?;
                if let Some(d) = &r.decision {
                    writeln!(f, "    gate: {}", crate::retrain::gate::numbers_line(&d.numbers))?;
                }
            }
        }
        Ok(())
    }
}

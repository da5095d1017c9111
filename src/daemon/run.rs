//! `tradebot::run`, the daemon's entry. It checks the live/paper gate, builds the async runtime and listens
//! for signals (both through `daemon::start`, the start-up both drivers share), opens the store (importing `feed.file` when the store lacks its bars), seeds
//! the model registry with the shipped models, and starts the control socket, `/metrics` and the
//! dashboard. With `feed.kind = "replay"` and `broker.kind = "sim"` it runs the replay driver
//! (`daemon::replay_driver`: engine, SimBroker, scheduled retrains in simulated time) and returns its summary;
//! with the Alpaca feed and broker it hands over to the live driver (`daemon::live_driver`).
//!
//! Shutdown has one owner, the `shutdown` token the caller passes in: signals, the control socket and the
//! end of a replay all end in it, and every task and driver stops on it.

use super::replay_driver::{self, ReplayParts, ReplaySummary};
use super::start::{mode_name, on_signal, problem, runtime, start_host};
use crate::config::{BrokerKind, Config, ConfigError, FeedKind, Mode};
use crate::data::ensure_bars;
use crate::out::outln;
use crate::store::Store;
use anyhow::Context;
use std::fmt;
use tokio_util::sync::CancellationToken;

/// What the command line adds to the config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// `--live`: confirms live trading with real money (`mode = "live"` needs it; paper refuses it).
    pub live: bool,
    /// `--linger`: after a replay ends, keep serving status, `/metrics` and the dashboard until shutdown.
    pub linger: bool,
}

/// How a `tradebot run` ended.
#[derive(Debug, Clone)]
pub enum RunEnd {
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
    /// The config file that names the directory.
    pub file: String,
    /// The `state_dir` as configured.
    pub dir: String,
    /// Why it cannot be used (the I/O error, or that it is not writable).
    pub reason: String,
}

/// Runs the daemon until the data ends (a replay) or `shutdown` is cancelled (by the caller or a signal).
/// A run that fails sends an alert to the `[notify]` targets first (`fatal::alert_fatal`, at most 5 s).
pub fn run(config: &Config, opts: RunOptions, shutdown: CancellationToken) -> anyhow::Result<RunEnd> {
    let result = run_until_stopped(config, opts, shutdown);
    if let Err(e) = &result {
        super::fatal::alert_fatal(config, mode_name(config), e);
    }
    result
}

fn run_until_stopped(config: &Config, opts: RunOptions, shutdown: CancellationToken) -> anyhow::Result<RunEnd> {
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
            Err(e) => return Err(problem(config, &e.to_string()).into()),
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
        super::live_driver::run(config, &rt, &shutdown).map(|()| RunEnd::Live)
    } else {
        run_replay(config, &rt, &shutdown, opts.linger).map(|s| RunEnd::Replay(Box::new(s)))
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
    crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let store = Store::open(&config.state_dir).context("opening the store")?;
    ensure_bars(config, &store)?;
    let host = start_host(config, &store, rt, shutdown)?;
    outln!(
        "tradebot {} — {:?} mode, replay of {} bars",
        env!("CARGO_PKG_VERSION"),
        config.mode,
        config.market.timeframe
    )?;
    replay_driver::run(ReplayParts { host, shutdown: shutdown.clone(), linger })
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
        type Row = (&'static str, fn(&crate::backtest::Performance) -> String);
        let rows: [Row; 5] = [
            ("total return", |m| format!("{:.2}%", m.total_return * 100.0)),
            ("Sharpe", |m| format!("{:.3}", m.sharpe)),
            ("max drawdown", |m| format!("{:.2}%", m.max_drawdown * 100.0)),
            ("trades", |m| m.trades.to_string()),
            ("fees", |m| format!("{:.2}", m.fees)),
        ];
        let cash = crate::backtest::Performance::default();
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
                for w in r.candidates.iter().filter_map(|c| c.warm_start.as_ref()) {
                    writeln!(f, "    candidate {}", w.describe())?;
                }
            }
        }
        Ok(())
    }
}
